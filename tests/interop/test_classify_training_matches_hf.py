"""``attnlab train classify --init``'s training against transformers' ``Trainer`` fine-tuning
``BertForSequenceClassification``: copied weights (encoder, pooler, head), the same batches,
and the Trainer's own optimiser and schedule (AdamW with weight decay on what
``Trainer.get_decay_parameter_names`` names, ``lr_scheduler_type="cosine"`` with warm-up,
``max_grad_norm``), which are attnlab's ``--weight-decay``, ``--schedule cosine --min-lr 0``
and ``--grad-clip``. After eight steps every weight agrees (fp32, atol 1e-5, rtol 1e-4):
with dropout off, and with dropout 0.1 and the same seed, which draws the same masks on both
sides only if both drop the same tensors (embeddings, attention weights, each sub-layer's
output, the pooled vector), at the same rate, in the same order.
``benchmarks/finetune.py --early-stop`` compares the two recipes on this premise: what is
left between them is their random draws (head, dropout masks, batch order)."""
import json

import pytest
import torch

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
