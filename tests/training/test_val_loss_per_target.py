"""``val_loss`` is the loss per target of the whole validation split, whatever the batches:
what --keep-best and --patience compare, and what users compare runs by.

Each test validates a tiny untrained model with the loop's own ``Loop.validate`` on one split
cut into batches three ways (a short last batch; one batch; pairs), each batch padded to its
own longest example as the tasks pad them, and compares with the loss computed by hand, one
example at a time: translate (targets of 1 to 7 tokens, label smoothing 0.1 in training),
instruction rows (replies of 1 to 6 tokens after prompts the loss skips) and classify with
--class-weights (the weighted loss of the split, Σ w_y·CE / Σ w_y). Tolerance: float32 sums
over a few dozen targets, and a padded batch's attention over masked keys (rtol 1e-5).
"""
import pytest
import torch
import torch.nn.functional as F

from attnlab.data.chat_rows import IGNORE
from attnlab.models import CausalLM, Seq2SeqTransformer, SequenceClassifier
from attnlab.tasks import get_task
from attnlab.training import engine
from attnlab.training.classifier import ClassifierModule
from attnlab.training.lm import LMModule
from attnlab.training.seq2seq import Seq2SeqModule

TINY = dict(model_dim=16, num_heads=2, num_layers=1, dim_feedforward=32)
CUTS = (3, 7, 2)  # batch sizes: 3 + 3 + 1, one batch of 7, 2 + 2 + 2 + 1


def _validations(module, cfg, run_dir, splits):
    """``Loop.validate``'s numbers on each of ``splits`` (each a list of batches), in turn."""
    loop = engine.Loop(module, [], splits[0], cfg, run_dir, max_steps=1, val_check_interval=1,
                       stop_at=None, limit_val_batches=None)
    loop.setup()
    try:
        found = []
        for batches in splits:
            loop.val_loader = batches
            found.append(loop.validate())
        return found
    finally:
        loop.log.close()


def _pad(rows, value):
    """(N, longest) of rows of ids, padded on the right with ``value``."""
    out = torch.full((len(rows), max(map(len, rows))), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row)
    return out


def _cut(rows, size, pad):
    """The split ``rows`` (tuples of id lists) in batches of ``size``, each padded by ``pad``
    (one value per part) to its own longest."""
    return [tuple(_pad(part, p) for part, p in zip(zip(*rows[i:i + size]), pad))
            for i in range(0, len(rows), size)]


def test_translate_val_loss_is_the_plain_cross_entropy_per_target_token_of_the_split(tmp_path):
    g = torch.Generator().manual_seed(0)
    pairs = []
    for n in (1, 7, 2, 6, 1, 3, 5):  # target tokens before EOS
        src = torch.randint(3, 12, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g)
        tgt = torch.randint(3, 10, (n,), generator=g)
        pairs.append((src.tolist(), [1, *tgt.tolist(), 2]))  # SOS ... EOS
    torch.manual_seed(0)
    model = Seq2SeqTransformer(12, 10, **TINY).eval()
    cfg = get_task("translate").config(**TINY, precision="32", checkpoint_every=100)
    assert cfg.label_smoothing > 0  # training's loss is smoothed; val_loss must not be

    total, right, tokens = 0.0, 0, 0
    with torch.no_grad():
        for src, tgt in pairs:
            logits = model(torch.tensor([src]), torch.tensor([tgt[:-1]]))[0]  # (T-1, V)
            target = torch.tensor(tgt[1:])
            total += float(F.cross_entropy(logits, target, reduction="sum"))
            right += int((logits.argmax(-1) == target).sum())
            tokens += len(target)

    splits = [_cut(pairs, size, (0, 0)) for size in CUTS]
    for found in _validations(Seq2SeqModule(model, cfg, 1), cfg, tmp_path, splits):
        torch.testing.assert_close(found["val_loss"], total / tokens, rtol=1e-5, atol=0.0)
        assert found["val_token_accuracy"] == pytest.approx(right / tokens, rel=1e-6)


def test_instruction_val_loss_is_per_reply_token_of_the_split(tmp_path):
    g = torch.Generator().manual_seed(1)
    rows = []  # (inputs, targets): the prompt's targets and the padding's are IGNORE
    for prompt, reply in ((2, 1), (6, 6), (3, 2), (1, 5), (4, 1), (2, 3), (5, 4)):
        ids = torch.randint(3, 20, (prompt + reply + 1,), generator=g).tolist()
        rows.append((ids[:-1], [IGNORE] * (prompt - 1) + ids[prompt:]))
    torch.manual_seed(0)
    model = CausalLM(20, **TINY, max_len=16).eval()
    cfg = get_task("lm").config(**TINY, precision="32", checkpoint_every=100)

    total, counted = 0.0, 0
    with torch.no_grad():
        for inputs, targets in rows:
            logits = model(torch.tensor([inputs]))[0]  # (T, V)
            total += float(F.cross_entropy(logits, torch.tensor(targets), ignore_index=IGNORE,
                                           reduction="sum"))
            counted += sum(t != IGNORE for t in targets)

    splits = [_cut(rows, size, (0, IGNORE)) for size in CUTS]
    for found in _validations(LMModule(model, cfg, 1), cfg, tmp_path, splits):
        torch.testing.assert_close(found["val_loss"], total / counted, rtol=1e-5, atol=0.0)


def test_classify_class_weighted_val_loss_is_the_weighted_loss_of_the_split(tmp_path):
    g = torch.Generator().manual_seed(2)
    weight = torch.tensor([1.0, 4.0, 0.5])
    rows = [(torch.randint(1, 20, (n,), generator=g).tolist(), [c])
            for n, c in ((3, 0), (5, 1), (2, 2), (4, 0), (6, 1), (3, 2), (2, 0))]
    torch.manual_seed(0)
    model = SequenceClassifier(vocab_size=20, num_classes=3, **TINY, max_len=16).eval()
    cfg = get_task("classify").config(**TINY, precision="32", checkpoint_every=100)

    total, weights = 0.0, 0.0
    with torch.no_grad():
        for ids, (c,) in rows:
            logits = model(torch.tensor([ids]))  # (1, C)
            total += float(weight[c] * F.cross_entropy(logits, torch.tensor([c])))
            weights += float(weight[c])

    splits = [[(x, y[:, 0]) for x, y in _cut(rows, size, (0, 0))] for size in CUTS]
    module = ClassifierModule(model, cfg, 1, class_weight=weight)
    for found in _validations(module, cfg, tmp_path, splits):
        torch.testing.assert_close(found["val_loss"], total / weights, rtol=1e-5, atol=0.0)


def test_class_weighted_val_loss_of_a_bf16_model_weighs_in_float32():
    """Under --precision bf16-true the logits are bfloat16, where a weight of 0.3 is 0.3008:
    the sum and the count of the weighted loss are both taken with the float32 weights."""
    weight = torch.tensor([0.3, 1.0])
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(torch.bfloat16)
    cfg = get_task("classify").config(**TINY, precision="bf16-true", checkpoint_every=100)
    module = ClassifierModule(model, cfg, 1, class_weight=weight).eval()
    x, y = torch.randn(6, 4).bfloat16(), torch.tensor([0, 1, 0, 0, 1, 0])
    with torch.no_grad():
        _, logs = module.loss((x, y))
        ce = F.cross_entropy(model(x).float(), y, reduction="none")
    expected = float((weight[y] * ce).sum() / weight[y].sum())
    assert float(logs["loss:sum"] / logs["loss:count"]) == pytest.approx(expected, rel=1e-6)
