"""``TransformerPredictor``: the course's LightningModule for per-element prediction.

The model is ``attnlab.models.ElementPredictor`` (same submodules, same state dict); this class
adds what Lightning's ``Trainer`` needs: hyper-parameters, the optimiser with the cosine warm-up
stepped every iteration, and training / validation / test steps for per-element classification
(cross-entropy over every position; accuracy per token and per whole sequence). It is the
course's API, trained by a user's ``pl.Trainer``; ``attnlab train reverse`` trains the same
``ElementPredictor`` in attnlab's own loop (``attnlab.training.engine``) and never imports this.
"""
from __future__ import annotations

import lightning.pytorch as L
import torch.nn.functional as F

from ..models.predictor import ElementPredictor
from ..settings import TrainSettings, check_argument, decay_fits
from .element import check_labels, element_metrics
from .module import back_to_float32, exact_tables, make_optimizer, optimizer_groups

__all__ = ["TransformerPredictor", "element_metrics"]


class _CPUBatches:
    """Batches stay as they are on the CPU (Lightning would walk every batch to move each
    tensor to the device it is already on)."""

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        if device.type == "cpu":
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)


class _Float32AfterFit:
    """Back to float32 weights once ``trainer.fit`` (or test, validate, predict) is done
    (``back_to_float32``): ``precision="64"`` and ``"bf16-true"`` run the module in float64 /
    bfloat16. Also when the fit stops early (the kernel interrupted, an error), where Lightning
    calls no hook of the module's own: left in bfloat16, the model went on predicting in it,
    and the next fit could not restore the positional tables, rounded through bfloat16 for
    good."""

    def setup(self, stage: str) -> None:
        super().setup(stage)
        # before Lightning converts the module to a *-true dtype, which test, validate and
        # predict do too (after a bf16-true test the model stayed in bfloat16)
        self._computed_tables = exact_tables(self)

    def on_fit_end(self) -> None:
        super().on_fit_end()
        self.float32_after_fit()

    def on_test_end(self) -> None:
        super().on_test_end()
        self.float32_after_fit()

    def on_predict_end(self) -> None:
        super().on_predict_end()
        self.float32_after_fit()

    def on_validation_end(self) -> None:
        super().on_validation_end()
        if self.trainer.state.fn == "validate":  # not a validation inside fit
            self.float32_after_fit()

    def configure_callbacks(self):
        callbacks = super().configure_callbacks()
        callbacks = [callbacks] if isinstance(callbacks, L.Callback) else list(callbacks)
        trainer = getattr(self, "_trainer", None)  # a second call (fit, then test) finds the
        # first's there: adding another made Lightning say it overrides it, on every call
        if trainer is None or not any(isinstance(c, _Float32OnInterrupt)
                                      for c in trainer.callbacks):
            callbacks.append(_Float32OnInterrupt())
        return callbacks

    def float32_after_fit(self) -> None:
        back_to_float32(self, getattr(self, "_computed_tables", {}))
        self._computed_tables = {}


class _Float32OnInterrupt(L.Callback):
    """``_Float32AfterFit`` for a fit that raised (Lightning's ``on_exception`` reaches
    callbacks only)."""

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        # (the callback stays with the trainer, which may fit another module later)
        if isinstance(pl_module, _Float32AfterFit):
            pl_module.float32_after_fit()


def _training_arguments(**arguments) -> dict:
    """The optimiser's and schedule's arguments checked against the flags' declarations
    (``TrainSettings``; ``max_iters`` is ``--max-steps``'s), NumPy's numbers as Python's:
    without this, ``max_iters=0`` trained at a learning rate of 0 without a word, and the
    other mistakes surfaced deep in ``trainer.fit``."""
    return {name: check_argument(TrainSettings, "max_steps" if name == "max_iters" else name,
                                 value, shown=name) for name, value in arguments.items()}


class TransformerPredictor(_CPUBatches, _Float32AfterFit, ElementPredictor, L.LightningModule):
    """The course's ``TransformerPredictor``, trainable with a Lightning ``Trainer``.

    Args:
        input_dim: input features per position (symbols, for one-hot inputs).
        model_dim: model width D.
        num_classes: classes per position.
        num_heads: attention heads.
        num_layers: encoder blocks.
        lr: peak learning rate (the Noam factor with ``schedule="noam"``).
        warmup: warm-up steps.
        max_iters: steps of the cosine schedule (normally the training budget).
        dropout: dropout in the blocks and output net.
        input_dropout: dropout on the inputs.
        dim_feedforward: feed-forward width (default 2·model_dim).
        norm_first: pre-LN blocks.
        schedule: "cosine" (the course's), "noam", or one of `--schedule`'s others
            ("wsd", "linear", "constant": decaying to 0; docs/schedules.md).
        weight_decay: AdamW weight decay (0, the course's Adam, by default), on the
            matrices only, as ``attnlab train --weight-decay``'s: not biases or norms.

    Raises:
        ValueError: naming the argument, for a value ``attnlab train`` refuses in its flag
            (``lr`` not above 0, ``warmup`` below 0, ``max_iters`` below 1, a ``schedule``
            it does not know, ``weight_decay`` below 0 or whose product with the rate is 1
            or more) or a model argument out of range;
            when the model is built, not when ``trainer.fit`` first steps.

    Batches are ``(inputs, labels)``: inputs (B, T) integer symbols (one-hot encoded inside) or
    (B, T, input_dim) floats; labels (B, T) class indices. Training logs ``train_loss``;
    validation and test log ``{mode}_loss``, ``{mode}_acc`` (per token) and ``{mode}_seq_acc``
    (whole sequences right). After ``fit`` with ``precision="bf16-true"`` or ``"64"`` the
    weights are float32 again.

    Examples:
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> x = torch.randint(10, (64, 8))                  # the reverse task: y = x reversed
        >>> train_loader = val_loader = DataLoader(TensorDataset(x, x.flip(1)), batch_size=16)
        >>> model = TransformerPredictor(10, 32, 10, 1, 1, lr=5e-4, warmup=5, max_iters=20)
        >>> trainer = L.Trainer(max_steps=20, logger=False, enable_checkpointing=False,
        ...                     enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(model, train_loader, val_loader)
        >>> trainer.global_step
        20
    """

    def __init__(self, input_dim: int, model_dim: int, num_classes: int, num_heads: int,
                 num_layers: int, lr: float, warmup: int, max_iters: int, dropout: float = 0.0,
                 input_dropout: float = 0.0, *, dim_feedforward: int | None = None,
                 norm_first: bool = False, schedule: str = "cosine",
                 weight_decay: float = 0.0) -> None:
        training = _training_arguments(lr=lr, warmup=warmup, max_iters=max_iters,
                                       schedule=schedule, weight_decay=weight_decay)
        if broken := decay_fits({**training, "model_dim": model_dim}, name="weight_decay"):
            raise ValueError(broken)
        super().__init__(input_dim, model_dim, num_classes, num_heads, num_layers, dropout,
                         input_dropout, dim_feedforward=dim_feedforward, norm_first=norm_first)
        self.save_hyperparameters()
        self.hparams.update(training)

    def configure_optimizers(self):
        hp = self.hparams
        cfg = {"lr": hp.lr, "warmup": hp.warmup, "schedule": hp.schedule,
               "weight_decay": hp.weight_decay}
        # weight decay on the matrices only, as attnlab train's (module.decay_groups)
        groups = optimizer_groups(self, cfg)
        # fit(ckpt_path=...) of a checkpoint saved when every parameter was decayed, in one
        # group: resumed as it trained, as attnlab train --resume does (engine's
        # _groups_saved); not a model only loaded (load_from_checkpoint) and trained afresh
        resuming = self._trainer is not None and self._trainer.ckpt_path
        if resuming and getattr(self, "_saved_groups", None) == 1 and len(groups) != 1:
            groups = list(self.parameters())
        opt, sched = make_optimizer(groups, cfg, model_dim=hp.model_dim,
                                    max_steps=hp.max_iters, fused=self._fused())
        # stepped every iteration, not every epoch, as in the course
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """``trainer.fit(ckpt_path=...)`` calls this before ``configure_optimizers``: the
        number of parameter groups the checkpoint's optimiser was saved with, which that
        builds (docs/compatibility.md)."""
        super().on_load_checkpoint(checkpoint)
        states = checkpoint.get("optimizer_states") or [{}]
        self._saved_groups = len(states[0].get("param_groups", ())) or None

    def training_step(self, batch, batch_idx):
        inputs, labels = batch
        logits = self(inputs)  # (B, T, K)
        check_labels(logits, labels)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        self.log("train_loss", loss, prog_bar=True, batch_size=len(labels))
        return loss

    def _fused(self) -> bool:
        """Whether the optimiser may be fused: not under a mixed precision, where Lightning's
        Trainer refuses gradient clipping with an optimiser that unscales its own gradients
        (attnlab's own loop, on Fabric, has no such limit)."""
        trainer = self._trainer
        return trainer is None or "mixed" not in str(trainer.precision)

    def _evaluation_step(self, batch, mode: str) -> None:
        inputs, labels = batch
        metrics = element_metrics(self(inputs), labels)
        self.log_dict({f"{mode}_{k}": v for k, v in metrics.items()}, prog_bar=True,
                      batch_size=len(labels), sync_dist=True)  # averaged over ranks under DDP

    def validation_step(self, batch, batch_idx):
        self._evaluation_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluation_step(batch, "test")
