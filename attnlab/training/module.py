"""What the training loop trains: a task's ``TaskModule`` and its optimiser (torch only).

A ``TaskModule`` wraps a task's torch model and says what one batch costs:
``loss(batch) -> (loss, logs)``, which the loop's step (``engine.Loop.train_step``) calls by
name. The optimiser is AdamW with a warm-up schedule stepped every iteration: the course's
cosine warm-up (``schedule: cosine``), the paper's Noam schedule (``schedule: noam``; then
--lr is the Noam factor), or one that decays to ``min_lr`` (nanoGPT's cosine, wsd, linear,
constant: ``make_scheduler``). Weight decay, where a run sets it, applies to matrices only (the
GPT recipe): not to biases, norms, learned positions or class tokens (``decay_groups``); a
pretrained BERT's (--init) position and token-type tables are embeddings, and decayed, as
transformers' ``Trainer`` decays them.
``--optimizer muon`` gives the blocks' weight matrices to Muon instead, in one optimiser with
AdamW (``attnlab.training.muon``).

Nothing here imports Lightning: ``attnlab.training.engine`` is the loop, on Fabric.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ..errors import UsageError
from ..nn.positional import LearnedPositionalEncoding
from ..schedulers import CosineWarmupScheduler, NoamScheduler, WarmupDecayScheduler
from ..settings import NOAM_BETA2, TrainSettings, absent_values, defaults
from . import muon
from .totals import resolve

__all__ = ["TaskModule", "OptimizerSettings", "make_optimizer", "make_scheduler", "optimizer_groups", "decay_groups", "fused_adamw_ok", "computed_tables",
           "exact_tables", "frozen_weights", "back_to_float32", "learned_token"]


def batch_size(batch) -> int:
    """Examples in a batch: the length of its first tensor."""
    first = batch[0] if isinstance(batch, (tuple, list)) else batch
    return len(first) if isinstance(first, torch.Tensor) and first.ndim else 1


class TaskModule(nn.Module):
    """Wraps a torch model for training; ``cfg`` is the run's typed config
    (``attnlab.run_config``; frozen, so kept as given).

    Args:
        model: the task's torch model (saved as ``model.safetensors`` after training).
        cfg: the run configuration (``lr``, ``warmup``, ``schedule``, ``model_dim`` ...).
        max_steps: the step budget, for the schedule.

    A subclass implements ``loss(batch) -> (loss, logs)``: the mean loss of the batch and
    named tensors (accuracies) that the loop logs as ``train_NAME`` and ``val_NAME``. Neither
    may read a tensor's value on the host (``float(t)``, ``.item()``): the loop reads the
    numbers it shows only at the steps it shows them. Where a batch's examples have unequal
    numbers of targets, validation's logs give sums and counts instead (``totals.ratio``), so
    that ``val_loss`` is per target of the whole split.
    """

    def __init__(self, model: nn.Module, cfg: Any, max_steps: int) -> None:
        super().__init__()
        self.model = model
        self.cfg = cfg
        self.max_steps = max_steps

    def loss(self, batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError

    def targets(self, batch) -> torch.Tensor | int:
        """What ``loss(batch)`` in training is a mean over: with ``--accumulate N`` each
        batch's loss counts in the step's in proportion to it, so that the N batches train as
        one batch N times larger, however their padding falls. Default: the examples (the
        length of the batch's first tensor). A module whose loss is a mean over tokens, or a
        weighted mean, counts those (a tensor on the batch's device: nothing is read on the
        host)."""
        return batch_size(batch)

    def tokens(self, batch) -> int | None:
        """Tokens in ``batch``, for the log's ``tokens_per_second``; None: not counted. Read off
        shapes only (it runs at every step)."""
        return None

    def validation_start(self) -> None:
        """Called before a validation's first batch (the model in eval mode): forget what the
        last one kept for ``validation_end``. Default: nothing kept."""

    def validation_end(self) -> dict[str, float]:
        """Called after a validation's last batch, the model still in eval mode: the metrics
        measured on the whole split at once, by their ``val_`` names (an AUC or a BLEU score is
        not a mean of per-batch values), which the loop logs beside the batch means. Default:
        none."""
        return {}

    def summarise(self, numbers: dict[str, float]) -> dict[str, float]:
        """The validation numbers (``val_NAME``) from what the loop gathered of ``loss``'s
        numbers over the validation batches: the mean of each, weighted by batch size, and
        the split's sum of each ``totals.ratio`` and ``totals.total``, which this divides out
        (``totals.resolve``: a loss per target of the whole split). A measure that is neither
        (entity F1, from the split's counts) is derived here (``attnlab.training.tagger``)."""
        return resolve(numbers)


# Devices with PyTorch's fused AdamW kernel (one kernel per parameter for the whole update).
FUSED_DEVICES = ("cpu", "cuda")


def _tensors(params: list) -> list[torch.Tensor]:
    """The tensors of a parameter list, which may hold parameter groups (dicts)."""
    out = []
    for p in params:
        if isinstance(p, dict):
            group = p["params"]
            out += [group] if isinstance(group, torch.Tensor) else list(group)
        else:
            out.append(p)
    return out


def fused_adamw_ok(params: list) -> bool:
    """Whether AdamW can take ``fused=True`` for these parameters (tensors or parameter
    groups): floating point, all on the CPU or all on CUDA. On the CPU it is several times
    faster than the default per-tensor update (benchmarks/RESULTS.md, adamw) and agrees with it
    to float32 rounding. The mixed precisions keep float32 weights, and Fabric's gradient
    scaler for ``16-mixed`` hands a fused AdamW its scale (the training loop unscales the
    gradients itself before it clips them, which Fabric does not do for a fused optimiser).
    (PyTorch before 2.4 has no CPU kernel: ``make_optimizer`` then falls back to the
    per-tensor update.)"""
    params = _tensors(params)
    devices = {p.device.type for p in params}
    return (len(devices) == 1 and devices <= set(FUSED_DEVICES)
            and all(p.is_floating_point() for p in params))


def learned_token(p: torch.Tensor) -> bool:
    """Whether ``p`` is one learned vector held as a sequence of one token, (1, 1, D): a
    classifier's or a jet tagger's class token, put before the batch's tokens. A vector,
    not a matrix, whatever its number of dimensions.

    Examples:
        >>> learned_token(torch.zeros(1, 1, 8)), learned_token(torch.zeros(1, 8))
        (True, False)
    """
    return p.ndim > 2 and p.shape[:-1].numel() == 1


def decay_groups(module: nn.Module, weight_decay: float, *,
                 leave: frozenset[int] = frozenset(),
                 decay_tokens: bool = False) -> list[dict[str, Any]]:
    """``module``'s trainable parameters in two AdamW groups: the matrices (linear layers'
    weights, token embeddings) with ``weight_decay``, and the rest — biases, norms' scales,
    learned position tables (``LearnedPositionalEncoding``'s: a pretrained BERT's
    ``position_embeddings`` is an embedding and decayed, as transformers' ``Trainer`` decays
    it), class tokens (``learned_token``) — without (the GPT recipe:
    decaying a norm's scale or a bias pulls it towards a value that means nothing, and a
    position table or a class token is added or read, not multiplied). A parameter shared by
    two modules (tied embeddings) is listed once; one whose ``id`` is in ``leave`` (another
    optimiser's) is not listed. ``decay_tokens``: a class token is decayed, as it was in a
    checkpoint saved before it was not (``--resume`` keeps the groups a run trained with).

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8))
        >>> [(len(g["params"]), g["weight_decay"]) for g in decay_groups(net, 0.1)]
        [(1, 0.1), (3, 0.0)]
    """
    positions = {id(p) for m in module.modules() if isinstance(m, LearnedPositionalEncoding)
                 for p in m.parameters()}
    decay, keep, seen = [], [], set(leave)
    for p in module.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        matrix = p.ndim >= 2 and id(p) not in positions
        (decay if matrix and (decay_tokens or not learned_token(p)) else keep).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": keep, "weight_decay": 0.0}]


# What a mapping that leaves a setting out (the course's LightningModule passes one) reads: the
# value ``TrainSettings`` declares for a run that lacks it, else its default
_LOOP = {**defaults(TrainSettings), **absent_values(TrainSettings)}


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """What ``make_optimizer`` and the warm-up check read of a run: a typed view of the run's
    config (``attnlab.run_config``), or of a plain mapping such as the course's
    LightningModule passes (``TransformerPredictor``), where a key left out or None reads
    what ``TrainSettings`` declares for a run without it.

    Examples:
        >>> OptimizerSettings.of({"lr": 1e-3, "warmup": 10})
        OptimizerSettings(lr=0.001, warmup=10, schedule='cosine', weight_decay=0.0, beta1=0.9, beta2=0.999, min_lr=None, cooldown=None, optimizer='adamw', muon_lr=None)
    """

    lr: float
    warmup: int = _LOOP["warmup"]
    schedule: str = _LOOP["schedule"]
    weight_decay: float = _LOOP["weight_decay"]
    beta1: float = _LOOP["beta1"]
    beta2: float = _LOOP["beta2"]
    min_lr: float | None = _LOOP["min_lr"]
    cooldown: float | None = _LOOP["cooldown"]
    optimizer: str = _LOOP["optimizer"]
    muon_lr: float | None = _LOOP["muon_lr"]

    @classmethod
    def of(cls, cfg: Any) -> OptimizerSettings:
        """The settings of ``cfg``: a run config (its attributes: a setting a run lacks reads
        what the run used), a mapping, or an ``OptimizerSettings``."""
        if isinstance(cfg, cls):
            return cfg
        names = [f.name for f in dataclasses.fields(cls)]
        if isinstance(cfg, Mapping):
            return cls(**{k: cfg[k] for k in names if cfg.get(k) is not None})
        return cls(**{k: getattr(cfg, k) for k in names})


def optimizer_groups(module: nn.Module, cfg: Any, *, decay_tokens: bool = False) -> list:
    """What ``make_optimizer`` trains of ``module`` under ``cfg`` (``OptimizerSettings.of``):
    its trainable parameters, in ``decay_groups`` where a run sets weight decay (with
    ``decay_tokens``: as a checkpoint saved before class tokens were left undecayed), and
    for ``--optimizer muon`` the blocks' weight matrices (``muon.hidden_matrices``) in a
    group of their own marked ``"muon"``, with the same weight decay.

    Raises:
        UsageError: ``--optimizer muon`` with nothing for Muon to train (the task's
            ``Task.no_muon_weights`` should have refused it before the run started).
    """
    opt_cfg = OptimizerSettings.of(cfg)
    wd = float(opt_cfg.weight_decay)
    if opt_cfg.optimizer == "muon":
        hidden = list(muon.hidden_matrices(module).values())
        if not hidden:
            raise UsageError(f"--optimizer muon: this {type(module).__name__} trains no weight "
                             f"matrix of a Transformer block, which are what Muon trains; use "
                             f"--optimizer adamw")
        rest = decay_groups(module, wd, leave=frozenset(map(id, hidden)),
                            decay_tokens=decay_tokens)
        return [*rest, {"params": hidden, "weight_decay": wd, "muon": True}]
    if not wd:
        return [p for p in module.parameters() if p.requires_grad]
    return decay_groups(module, wd, decay_tokens=decay_tokens)


def make_optimizer(params, cfg: Any, *, model_dim: int, max_steps: int, fused: bool = True):
    """AdamW (with ``fused``, the fused kernel where PyTorch has it) and a per-step warm-up
    scheduler from ``cfg`` (``OptimizerSettings.of``: a run config or a mapping): ``lr``,
    ``warmup``, ``schedule``, ``weight_decay`` (default 0), ``beta1`` (default 0.9) and
    ``beta2`` (default 0.999, PyTorch's; Noam's is the paper's 0.98). ``params`` may be
    parameter groups (``decay_groups``); a group's own ``weight_decay`` wins. Groups marked
    ``"muon"`` (``optimizer_groups`` of an ``--optimizer muon`` run) go to
    ``torch.optim.Muon`` at ``muon_lr`` (default ``lr``), the rest to AdamW, joined as one
    ``muon.MuonWithAdamW`` that the schedule scales whole."""
    opt_cfg = OptimizerSettings.of(cfg)
    wd = float(opt_cfg.weight_decay)
    params = list(params)
    hidden = [g for g in params if isinstance(g, dict) and g.get("muon")]
    params = [g for g in params if not (isinstance(g, dict) and g.get("muon"))]
    fused = (fused and fused_adamw_ok(params)) or None  # None: PyTorch's per-tensor default
    noam = opt_cfg.schedule == "noam"
    beta1 = float(opt_cfg.beta1)
    options = (dict(lr=1.0, betas=(beta1, NOAM_BETA2), eps=1e-9) if noam  # the paper's
               else dict(lr=float(opt_cfg.lr), betas=(beta1, float(opt_cfg.beta2))))
    try:
        opt = torch.optim.AdamW(params, weight_decay=wd, fused=fused, **options)
    except RuntimeError:  # a PyTorch without the fused kernel for this device
        if not fused:
            raise
        opt = torch.optim.AdamW(params, weight_decay=wd, **options)
    if hidden:
        opt = muon.MuonWithAdamW(_muon(hidden, opt_cfg, noam), opt)
    return opt, make_scheduler(opt, opt_cfg, model_dim=model_dim, max_steps=max_steps)


def make_scheduler(opt: torch.optim.Optimizer, cfg: Any, *, model_dim: int, max_steps: int):
    """The per-step schedule of ``cfg`` (``OptimizerSettings.of``) for ``opt``: Noam; the
    course's cosine (``schedule: cosine`` without ``min_lr``: every run made before --min-lr);
    or a warm-up-and-decay schedule ending at ``min_lr`` (``WarmupDecayScheduler``)."""
    opt_cfg = OptimizerSettings.of(cfg)
    # the warm-up and length as given, also when the warm-up is longer than the run: the rates
    # that plot lr, lr_schedule.png and warmup_note read off schedule_lr, and the course's
    # CosineWarmupScheduler(warmup, max_iters) (cutting the warm-up to the budget trained others)
    if opt_cfg.schedule == "noam":  # its step 0 counts as 1: --warmup 0 peaks at once
        return NoamScheduler(opt, model_dim, warmup=max(1, int(opt_cfg.warmup)),
                             factor=float(opt_cfg.lr))
    # --warmup 0 means none (the first step trains at the peak); a warm-up longer than
    # the run ramps to the end, as warmup_note says and lr_schedule.png draws
    if opt_cfg.schedule == "cosine" and opt_cfg.min_lr is None:
        return CosineWarmupScheduler(opt, warmup=int(opt_cfg.warmup), max_iters=max(1, max_steps))
    return WarmupDecayScheduler(opt, opt_cfg.schedule, warmup=int(opt_cfg.warmup),
                                max_iters=max_steps, min_lr=float(opt_cfg.min_lr or 0.0),
                                peak_lr=float(opt_cfg.lr), cooldown=opt_cfg.cooldown)


def _muon(groups: list[dict[str, Any]], opt_cfg: OptimizerSettings, noam: bool):
    """``torch.optim.Muon`` (``muon.Muon``: in float64 under ``--precision 64``) over
    ``groups`` with its authors' momentum (0.95, Nesterov) and five Newton–Schulz steps, its
    update scaled to AdamW's size (``match_rms_adamw``), so that ``muon_lr`` defaults to
    AdamW's ``lr``. Under Noam, whose schedule multiplies each
    group's rate (AdamW's is 1: ``lr`` is the factor), Muon's is ``muon_lr / lr``."""
    lr = float(opt_cfg.muon_lr or opt_cfg.lr)
    if noam:
        lr /= float(opt_cfg.lr)
    return muon.Muon(groups, lr=lr, weight_decay=float(opt_cfg.weight_decay),
                            momentum=0.95, nesterov=True, ns_steps=5,
                            adjust_lr_fn="match_rms_adamw")


def computed_tables(module: nn.Module) -> dict[str, torch.Tensor]:
    """``module``'s non-persistent floating-point buffers (not in its state dict: the
    sinusoidal positions, RoPE's angles, ALiBi's slopes), by name."""
    tables = {}
    for prefix, sub in module.named_modules():
        for name in sub._non_persistent_buffers_set:
            buffer = sub._buffers.get(name)
            if buffer is not None and buffer.is_floating_point():
                tables[f"{prefix}.{name}" if prefix else name] = buffer
    return tables


def exact_tables(module: nn.Module) -> dict[str, torch.Tensor]:
    """Copies of ``module``'s float32 computed tables, to put back by ``back_to_float32``."""
    return {name: b.detach().clone() for name, b in computed_tables(module).items()
            if b.dtype == torch.float32}


def frozen_weights(module: nn.Module) -> dict[str, torch.Tensor]:
    """CPU copies of ``module``'s frozen float32 parameters (``--freeze``, the weights under
    ``--lora-rank``'s update), by name, to put back by ``back_to_float32``: a ``bf16-true``
    run trains with them rounded to bfloat16, and saves them as they were, bit for bit, as
    frozen weights are (the checkpoint keeps them for ``--resume``)."""
    return {name: p.detach().to("cpu", copy=True) for name, p in module.named_parameters()
            if not p.requires_grad and p.dtype == torch.float32}


@torch.no_grad()
def back_to_float32(module: nn.Module, tables: dict[str, torch.Tensor]) -> None:
    """Float32 weights again after training in ``64`` or ``bf16-true``, with the computed
    tables (and any frozen weights) put back exact (``tables`` from ``exact_tables`` and
    ``frozen_weights`` before training), not rounded through bfloat16: what comes after
    training — the test split, the figures,
    ``model.safetensors`` — then uses the dtype ``attnlab.load`` builds, so ``metrics.json``
    is what ``attnlab evaluate`` reports for the saved weights (bfloat16 -> float32 is exact;
    float64 -> float32 rounds to 24 bits). The mixed precisions keep float32 weights: nothing
    changes for them."""
    if not any(p.is_floating_point() and p.dtype != torch.float32 for p in module.parameters()):
        return
    module.to(torch.float32)
    now = {**computed_tables(module), **dict(module.named_parameters())}
    for name, exact in tables.items():
        if name in now and now[name].shape == exact.shape:
            now[name].copy_(exact.to(now[name].device))
