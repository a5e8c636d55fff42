"""``attnlab train classify --init``'s training against transformers' ``Trainer`` fine-tuning
``BertForSequenceClassification``: copied weights (encoder, pooler, head), the same batches,
and the Trainer's own optimiser and schedule (AdamW with weight decay on what
``Trainer.get_decay_parameter_names`` names, ``lr_scheduler_type="cosine"`` with warm-up,
``max_grad_norm``), which are attnlab's ``--weight-decay``, ``--schedule cosine --min-lr 0``
and ``--grad-clip``. After eight steps every weight agrees (fp32, atol 1e-5, rtol 1e-4):
with dropout off, and with dropout 0.1 and the same seed, which draws the same masks on both
sides only if both drop the same tensors (embeddings, attention weights, each sub-layer's
output, the pooled vector), at the same rate, in the same order. A whole run with
``--keep-best`` and ``--patience`` is then the Trainer's with ``load_best_model_at_end`` and
``EarlyStoppingCallback``: the same metric at every validation, the same best step and step
to stop at, the same model kept.
``benchmarks/finetune.py --early-stop`` compares the two recipes on this premise: what is
left between them is their random draws (head, dropout masks, batch order)."""
import json

import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from attnlab.tasks import get_task  # noqa: E402
from attnlab.tasks.classify.pretrained import settings_of_config  # noqa: E402
from attnlab.tasks.classify.runtime import Padding, _module, build_model, make_batches  # noqa: E402
from attnlab.tasks.classify.start import Start  # noqa: E402
from tests.interop.test_checkpoint import CORPUS  # noqa: E402
from tests.interop.test_tag_training_matches_hf import assert_same_weights, tiny_bert  # noqa: E402

STEPS, WARMUP, LR, DECAY, CLIP, BATCH = 8, 3, 1e-3, 0.01, 1.0, 4
LABELS = ["a", "b", "c"]


class _GivenBatches(transformers.Trainer):
    """The Trainer, its training batches given (its sampler draws its own order) as a list:
    a DataLoader would draw its base seed from torch's generator at each epoch, one number
    that attnlab's loop, which iterates the batches it is given, does not draw."""

    def __init__(self, *args, batches, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches = batches

    def get_train_dataloader(self):
        return self.batches


def _trainer_fit(model, batches, out, seed):
    """Trainer.train() over ``batches`` with benchmarks/finetune.py's ``_trainer`` arguments
    (less evaluation and checkpoints, which do not change the weights)."""
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=BATCH,
        learning_rate=LR, warmup_steps=WARMUP, lr_scheduler_type="cosine", weight_decay=DECAY,
        max_grad_norm=CLIP, save_strategy="no", report_to=[], use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True, seed=seed)
    dicts = [{"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": y}
             for ids, mask, types, y in batches]
    _GivenBatches(model=model, args=args, batches=dicts).train()


@pytest.mark.slow  # the training loop imports Lightning
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_classify_training_with_min_lr_0_is_the_trainers(tmp_path, dropout):
    from attnlab.training import fit
    from attnlab.training.classifier import ClassifierModule

    checkpoint, hf = tiny_bert(tmp_path, "classify", transformers.BertForSequenceClassification,
                               len(LABELS), dropout)
    encoder = settings_of_config("bert", json.loads((checkpoint.source / "config.json")
                                                    .read_text()))
    cfg = get_task("classify").config(
        **encoder, init="x", pooling="cls", labels=LABELS, max_len=64, threads=1,
        model_vocab_size=checkpoint.config.vocab_size, schedule="cosine", min_lr=0.0, lr=LR,
        warmup=WARMUP, weight_decay=DECAY, grad_clip=CLIP, dropout=dropout, max_steps=STEPS,
        batch_size=BATCH, val_every=STEPS)
    # the encoder and its pooler from the checkpoint, as a run from --init loads them
    ours = Start(model=checkpoint.model).weights_into(build_model(cfg), LABELS)
    ours.classifier.load_state_dict(hf.classifier.state_dict())  # the same new head
    texts = CORPUS[:STEPS * BATCH]
    encoded = checkpoint.tokenizer.encode_for_model(texts, cfg.max_len)
    targets = [len(t) % len(LABELS) for t in texts]
    batches = make_batches(encoded, targets, BATCH, shuffle=True,
                           padding=Padding.of(cfg, checkpoint.tokenizer))
    assert len(batches) == STEPS and batches[0][2].shape == batches[0][0].shape  # token types
    before = hf.classifier.weight.detach().clone()

    _trainer_fit(hf, batches, tmp_path / "trainer", cfg.seed)  # it seeds torch with it
    module = _module(ClassifierModule, ours, cfg, STEPS)  # as classify's run builds it
    torch.manual_seed(cfg.seed)  # as `attnlab train` does
    fit(module, batches, torch.utils.data.DataLoader(batches[:1], batch_size=None), cfg,
        tmp_path / "run", max_steps=STEPS, val_check_interval=STEPS)

    assert (hf.classifier.weight - before).abs().max() > 1e-3  # the steps moved the weights
    assert_same_weights(ours, hf)


class _GivenBatchesKeepingDraws(_GivenBatches):
    """``_GivenBatches`` whose evaluation leaves torch's random state as it found it, as
    attnlab's validation does: the evaluation DataLoader draws its base seed from it, which
    would shift every later dropout mask on the Trainer's side only."""

    def evaluate(self, *args, **kwargs):
        state = torch.get_rng_state()
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            torch.set_rng_state(state)


EVERY, LONG, FAST = 3, 36, 1e-2  # a validation every 3 steps, at most 36, a rate of 1e-2


@pytest.mark.slow  # the training loop imports Lightning
@pytest.mark.parametrize("monitor, patience, texts", [
    ("val_loss", 1, 16),  # falls, rises once at step 12: the best is step 9's
    ("val_acc", 2, 48),  # the same at every validation: a tie is no improvement
])
def test_keep_best_and_patience_are_the_trainers_best_model_and_early_stopping(
        tmp_path, monitor, patience, texts):
    """A whole run of ``--keep-best --monitor M --patience P`` against the Trainer's
    ``load_best_model_at_end`` with ``EarlyStoppingCallback(P)`` (benchmarks/finetune.py
    ``--early-stop``), from the same weights, batches and seed, dropout 0.1: the same
    metric at every validation, the same best step, the same step to stop at, and the same
    weights kept, the best validation's."""
    from attnlab.training import fit
    from attnlab.training.classifier import ClassifierModule

    checkpoint, hf = tiny_bert(tmp_path, "classify", transformers.BertForSequenceClassification,
                               len(LABELS), 0.1)
    encoder = settings_of_config("bert", json.loads((checkpoint.source / "config.json")
                                                    .read_text()))
    cfg = get_task("classify").config(
        **encoder, init="x", pooling="cls", labels=LABELS, max_len=64, threads=1,
        model_vocab_size=checkpoint.config.vocab_size, schedule="cosine", min_lr=0.0, lr=FAST,
        warmup=WARMUP, weight_decay=DECAY, grad_clip=CLIP, dropout=0.1, max_steps=LONG,
        batch_size=BATCH, val_every=EVERY, keep_best=True, monitor=monitor, patience=patience)
    ours = Start(model=checkpoint.model).weights_into(build_model(cfg), LABELS)
    ours.classifier.load_state_dict(hf.classifier.state_dict())
    padding = Padding.of(cfg, checkpoint.tokenizer)

    def batches(texts, shuffle, seed=0):
        encoded = checkpoint.tokenizer.encode_for_model(texts, cfg.max_len)
        return make_batches(encoded, [ord(t[0]) % len(LABELS) for t in texts], BATCH,
                            shuffle=shuffle, seed=seed, padding=padding)

    train = [b for epoch in range(LONG) for b in batches(CORPUS[:texts], True, epoch)][:LONG]
    val = batches(CORPUS[48:], False)
    dicts = [{"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": y}
             for ids, mask, types, y in val]
    curve = {}

    def accuracy(prediction):
        return {"acc": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    class Trainer(_GivenBatchesKeepingDraws):
        def get_eval_dataloader(self, eval_dataset=None):
            return torch.utils.data.DataLoader(dicts, batch_size=None)

        def evaluate(self, *args, **kwargs):
            scores = super().evaluate(*args, **kwargs)
            curve[self.state.global_step] = scores[f"eval_{monitor[4:]}"]
            return scores

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "trainer"), max_steps=LONG, per_device_train_batch_size=BATCH,
        learning_rate=FAST, warmup_steps=WARMUP, lr_scheduler_type="cosine", weight_decay=DECAY,
        max_grad_norm=CLIP, eval_strategy="steps", eval_steps=EVERY, save_strategy="steps",
        save_steps=EVERY, load_best_model_at_end=True, metric_for_best_model=monitor[4:],
        report_to=[], use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=cfg.seed)
    trainer = Trainer(model=hf, args=args, compute_metrics=accuracy, eval_dataset=dicts,
                      batches=[{"input_ids": i, "attention_mask": m, "token_type_ids": t,
                                "labels": y} for i, m, t, y in train],
                      callbacks=[transformers.EarlyStoppingCallback(patience)])
    trainer.train()
    module = _module(ClassifierModule, ours, cfg, LONG)
    torch.manual_seed(cfg.seed)  # as the Trainer's __init__ left it
    result = fit(module, train, torch.utils.data.DataLoader(val, batch_size=None), cfg,
                 tmp_path / "run", max_steps=LONG, val_check_interval=EVERY)

    rows = (tmp_path / "run" / "logs" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    ours_curve = {int(r[header.index("step")]): float(r[header.index(monitor)])
                  for r in (row.split(",") for row in rows[1:]) if r[header.index(monitor)]}
    assert result.steps < LONG  # it stopped early, after patience validations without a gain
    assert ours_curve == pytest.approx(curve, abs=1e-6)
    best_step = int(trainer.state.best_model_checkpoint.rsplit("-", 1)[1])
    assert (result.best["best_step"], result.steps) == (best_step, trainer.state.global_step)
    assert result.best["best_value"] == pytest.approx(trainer.state.best_metric, abs=1e-6)
    # Both kept the best validation's weights: the same outputs. (Not every weight to 1e-5:
    # a key bias gets no gradient but float noise, which Adam at this rate turns into steps.)
    ours.eval(), hf.eval()
    with torch.no_grad():
        for ids, mask, types, _ in val:
            assert_close(ours(ids, mask, types), hf(ids, mask, types).logits, atol=1e-5,
                         rtol=1e-4)
