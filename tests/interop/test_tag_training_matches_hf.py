"""``attnlab train tag --init``'s training against a plain transformers loop over
``BertForTokenClassification``: copied weights, dropout off, the same batches, AdamW with weight
decay on matrices only, clipping, and attnlab's ``--schedule cosine --min-lr 0``, which is
transformers' ``get_cosine_schedule_with_warmup``. After eight steps every weight agrees
(fp32, atol 1e-5, rtol 1e-4). ``benchmarks/tag_finetune.py`` compares the two recipes on
this premise."""
import pytest
import torch
from torch.testing import assert_close

transformers = pytest.importorskip("transformers")

from attnlab.interop.checkpoint import read_checkpoint  # noqa: E402
from attnlab.interop.hf import from_hf  # noqa: E402
from attnlab.models import BertTagger  # noqa: E402
from attnlab.models.configs import BertClassifierConfig  # noqa: E402
from attnlab.tasks import get_task  # noqa: E402
from attnlab.tasks.tag.runtime import _labels, encode_words, make_batches  # noqa: E402
from attnlab.tasks.tag.scoring import entity_scores  # noqa: E402
from tests.interop.test_checkpoint import save_bert  # noqa: E402
from tests.tasks.test_tag import capitalised  # noqa: E402

STEPS, WARMUP, LR, DECAY, CLIP = 8, 3, 1e-3, 0.01, 1.0


def _hf_loop(model, batches):
    """The loop a transformers user writes (benchmarks/tag_finetune.py's reference)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": DECAY},
                             {"params": rest, "weight_decay": 0.0}], lr=LR)
    schedule = transformers.get_cosine_schedule_with_warmup(opt, WARMUP, STEPS)
    model.train()
    for ids, mask, types, labels in batches:
        loss = model(input_ids=ids, attention_mask=mask, token_type_ids=types,
                     labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        schedule.step()


def tiny_bert(tmp_path, task, hf_class, num_labels, dropout=0.0):
    """(attnlab's ``read_checkpoint`` of a tiny random BERT directory, ``hf_class`` of it with
    ``num_labels`` outputs and ``dropout`` everywhere), the global seed set first."""
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    bert = save_bert(tmp_path / "bert")
    hf = hf_class.from_pretrained(bert, num_labels=num_labels, hidden_dropout_prob=dropout,
                                  attention_probs_dropout_prob=dropout)
    return read_checkpoint(bert, task=task), hf


def assert_same_weights(ours, hf):
    """Every weight of attnlab's ``ours`` (``bert``, ``classifier``; a pooler in ``bert``) is
    the Hugging Face model ``hf``'s, after training: fp32, atol 1e-5, rtol 1e-4."""
    theirs = {**{f"bert.{k}": v for k, v in from_hf(hf.bert).state_dict().items()},
              **{f"classifier.{k}": v for k, v in hf.classifier.state_dict().items()}}
    for name, p in ours.named_parameters():
        assert_close(p, theirs[name], atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.slow  # the training loop imports Lightning
def test_tag_training_with_min_lr_0_is_the_transformers_loop(tmp_path):
    from attnlab.training import fit
    from attnlab.training.tagger import TaggerModule

    tags = ["B-X", "O"]
    checkpoint, hf = tiny_bert(tmp_path, "tag", transformers.BertForTokenClassification,
                               len(tags))
    ours = BertTagger(BertClassifierConfig.of_encoder(checkpoint.config, num_classes=len(tags),
                                                      dropout=0.0))
    ours.bert.load_state_dict(checkpoint.model.state_dict(), strict=False)
    ours.classifier.load_state_dict(hf.classifier.state_dict())
    cfg = get_task("tag").config(
        arch="bert", init="x", tags=tags, max_len=64, threads=1,
        model_vocab_size=checkpoint.config.vocab_size, schedule="cosine", min_lr=0.0, lr=LR,
        warmup=WARMUP, weight_decay=DECAY, grad_clip=CLIP, dropout=0.0, max_steps=STEPS,
        batch_size=4, val_every=STEPS)
    sentences = capitalised(STEPS * 4)
    encoded = encode_words(cfg, checkpoint.tokenizer, [words for words, _ in sentences])
    index = {t: i for i, t in enumerate(tags)}
    labels = [_labels(e, t, index) for e, (_, t) in zip(encoded, sentences)]
    batches = make_batches(encoded, labels, 4, pad_id=0, mask=True, types=True, shuffle=True)
    before = hf.classifier.weight.detach().clone()

    _hf_loop(hf, batches)
    module = TaggerModule(ours, cfg, STEPS, tags, entity_scores)
    fit(module, batches, torch.utils.data.DataLoader(batches[:1], batch_size=None), cfg,
        tmp_path / "run", max_steps=STEPS, val_check_interval=STEPS)

    assert (hf.classifier.weight - before).abs().max() > 1e-3  # the steps moved the weights
    assert_same_weights(ours, hf)
