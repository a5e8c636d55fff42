"""The loop's gradient accumulation, activation checkpointing, clock and label smoothing, on
tiny models:

- ``--accumulate N``: one optimiser step over N batches of B equals one step over one batch of
  N·B (copied weights; the update applied by plain SGD, so a wrong gradient scale shows, where
  Adam's first step would hide it), for lm and classify, and where the batches' losses are
  means over different numbers of targets (lm's unlabelled targets, translate's and tag's
  padding, classify's class weights, a short batch); the step's gradient clipped once, summed;
  with --epochs, an epoch's last step takes the
  batches left, so each is trained on once an epoch; DDP's sync skipped on all but the
  step's last batch; a run with it (and a wsd schedule, checkpointed activations, dropout)
  killed and resumed ends with the weights of one never killed;
- ``--checkpoint-activations``: the same gradients as without;
- ``train_seconds`` on every row of metrics.csv: rising, and without the validation time;
- ``--label-smoothing`` in lm's loss.
"""
import copy
import csv
import functools

import pytest
import torch
from safetensors.torch import load_file

from attnlab.cli import main
from attnlab.data.chat_rows import IGNORE
from attnlab.models import CausalLM, Seq2SeqTransformer, SequenceClassifier
from attnlab.nn.stacks import checkpoint_activations
from attnlab.settings import steps_of_epochs
from attnlab.tasks import get_task
from attnlab.training import engine, fit
from attnlab.training.classifier import ClassifierModule
from attnlab.training.lm import LMModule, lm_loss
from attnlab.training.seq2seq import Seq2SeqModule
from attnlab.training.tagger import TaggerModule

from .loop_probe import probe_loop

B, N, T, V = 3, 2, 8, 37  # batch, batches per step, tokens, vocabulary


def _sgd(monkeypatch):
    """The loop's optimiser as plain SGD at a constant rate: the update is lr × the gradient."""
    def make_optimizer(params, cfg, **_):
        opt = torch.optim.SGD(params, lr=0.5)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)

    monkeypatch.setattr(engine, "make_optimizer", make_optimizer)


def _lm():
    torch.manual_seed(0)
    model = CausalLM(V, model_dim=16, num_heads=2, num_layers=2, dim_feedforward=32, max_len=T)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (N * B, T + 1), generator=g)
    return model, "lm", LMModule, (ids[:, :-1], ids[:, 1:])


def _classify():
    torch.manual_seed(0)
    model = SequenceClassifier(vocab_size=V, num_classes=3, model_dim=16, num_heads=2,
                               num_layers=2, dim_feedforward=32, max_len=T)
    g = torch.Generator().manual_seed(1)
    return (model, "classify", ClassifierModule,
            (torch.randint(1, V, (N * B, T), generator=g),
             torch.randint(0, 3, (N * B,), generator=g)))


def _lm_with_unlabelled_targets():
    """lm's instruction rows: the first batch's rows count one target each, the second's T."""
    model, task, Module, (x, y) = _lm()
    y = y.clone()
    y[:B, 1:] = IGNORE
    return model, task, Module, (x, y)


def _classify_with_class_weights():
    model, task, Module, data = _classify()
    return model, task, functools.partial(Module, class_weight=torch.tensor([0.2, 1.0, 3.0])), data


def _translate_with_padding():
    """Targets [SOS, y..., EOS, pad...]: the first batch's three real tokens each, the
    second's all T - 1 (pad id 0)."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(V, V, model_dim=16, num_heads=2, num_layers=1, dim_feedforward=32)
    g = torch.Generator().manual_seed(1)
    src, tgt = (torch.randint(4, V, (N * B, T), generator=g) for _ in range(2))
    tgt[:, 0] = 1
    tgt[:B, 4:] = 0
    return model, "translate", Seq2SeqModule, (src, tgt)


def _tag_with_padding():
    """tag's sentences: the first batch's padded after two words (label -100 past them), the
    second's all T words labelled."""
    torch.manual_seed(0)
    model = SequenceClassifier(vocab_size=V, num_classes=3, model_dim=16, num_heads=2,
                               num_layers=2, dim_feedforward=32, max_len=T, head="token")
    g = torch.Generator().manual_seed(1)
    ids, labels = torch.randint(1, V, (N * B, T), generator=g), torch.randint(0, 3, (N * B, T),
                                                                              generator=g)
    ids[:B, 2:], labels[:B, 2:] = 0, IGNORE
    tagger = functools.partial(TaggerModule, tags=["O", "B-X", "I-X"], score=None)
    return model, "tag", tagger, (ids, labels)


def _step(make, tmp_path, accumulate: int, first: int | None = None, **settings):
    """The weights after one optimiser step on the N·B examples, in ``accumulate`` batches
    (with ``first``: two, the first of ``first`` examples); no clipping unless ``settings``
    say (it would hide a wrong scale)."""
    model, task, Module, (x, y) = make()
    cfg = get_task(task).config(**{"accumulate": accumulate, "warmup": 0, "model_dim": 16,
                                   "precision": "32", "checkpoint_every": 100,
                                   "grad_clip": 0.0, **settings})
    size = len(x) // accumulate
    cuts = [0, first, len(x)] if first else [*range(0, len(x), size), len(x)]
    batches = [(x[i:j], y[i:j]) for i, j in zip(cuts, cuts[1:])]
    before = copy.deepcopy(model.state_dict())
    fit(Module(model, cfg, 1), batches, None, cfg, tmp_path, max_steps=1)
    return before, model.state_dict()


@pytest.mark.slow
@pytest.mark.parametrize("make", [_lm, _classify], ids=["lm", "classify"])
def test_n_batches_of_b_make_the_step_of_one_batch_of_n_times_b(make, tmp_path, monkeypatch):
    _sgd(monkeypatch)
    before, whole = _step(make, tmp_path / "whole", accumulate=1)
    _, accumulated = _step(make, tmp_path / "accumulated", accumulate=N)
    moved = [k for k in whole if not torch.equal(whole[k], before[k])]
    assert len(moved) > 10  # the step changed the weights
    for name in whole:  # the same sums in another order: float32 rounding apart
        torch.testing.assert_close(accumulated[name], whole[name], rtol=1e-5, atol=1e-6,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.slow
@pytest.mark.parametrize("make, first", [
    (_lm_with_unlabelled_targets, B), (_translate_with_padding, B), (_tag_with_padding, B),
    (_classify_with_class_weights, B), (_classify, 4)],
    ids=["lm-unlabelled-targets", "translate-padding", "tag-padding", "classify-class-weights",
         "classify-unequal-batches"])
@pytest.mark.parametrize("precision", ["32", "64"])
def test_accumulated_batches_count_as_their_targets(make, first, precision, tmp_path,
                                                    monkeypatch):
    """Two batches whose losses are means over different numbers of targets (tokens counted,
    Σ class weights, rows): their step is still that of one batch of both, as the docs say,
    not the mean of the two batches' means; under --precision 64 to float64's rounding (the
    class weights' sum was float32: 1e-7 of the update apart)."""
    _sgd(monkeypatch)
    if precision == "64":  # the float64 weights as trained, before fit makes them float32
        monkeypatch.setattr(engine, "back_to_float32", lambda module, tables: None)
    before, whole = _step(make, tmp_path / "whole", accumulate=1, precision=precision)
    _, accumulated = _step(make, tmp_path / "accumulated", accumulate=2, first=first,
                           precision=precision)
    assert sum(not torch.equal(whole[k], before[k]) for k in whole) > 10
    for name in whole:  # the same sums in another order: the precision's rounding apart
        if precision == "64":
            update = (whole[name] - before[name]).abs().max()
            tolerance = {"rtol": 0, "atol": 1e-12 * float(update) + 1e-18}
        else:
            tolerance = {"rtol": 1e-5, "atol": 1e-6}
        torch.testing.assert_close(accumulated[name], whole[name], **tolerance,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.slow
def test_the_accumulated_gradient_is_clipped_once(tmp_path, monkeypatch):
    """--grad-clip 0.01 with --accumulate 2: the step's summed gradient is clipped, once, to
    norm 0.01, as one batch of both would be (clipping each batch's share, or clipping twice,
    would step elsewhere). No weight decay: the step is then lr x the clipped gradient."""
    _sgd(monkeypatch)
    clip = {"grad_clip": 0.01, "weight_decay": 0.0}
    before, whole = _step(_lm, tmp_path / "whole", accumulate=1, **clip)
    _, accumulated = _step(_lm, tmp_path / "accumulated", accumulate=N, **clip)
    moved = torch.cat([(whole[k] - before[k]).flatten() for k in whole
                       if k != "lm_head.weight"])  # the token embedding, tied: once
    assert moved.norm() == pytest.approx(0.5 * 0.01, rel=1e-4)  # lr 0.5 x the clipped norm
    for name in whole:
        torch.testing.assert_close(accumulated[name], whole[name], rtol=1e-5, atol=1e-7,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.slow
def test_epochs_with_accumulate_show_every_batch_once_an_epoch(tmp_path, monkeypatch):
    """--epochs 2 --accumulate 4 over 10 batches: steps of 4, 4 and the 2 left, each batch
    trained on twice (not 24 batches, some three times), validated once an epoch."""
    model, task, Module, _ = _classify()
    g = torch.Generator().manual_seed(2)
    loader = [(torch.randint(1, V, (2, T), generator=g), torch.randint(0, 3, (2,), generator=g))
              for _ in range(10)]
    cfg = get_task(task).config(accumulate=4, warmup=0, model_dim=16, precision="32",
                                checkpoint_every=100)
    steps = steps_of_epochs(2, len(loader), cfg.accumulate)
    seen, validated = [], []
    train_step, validate = engine.Loop.train_step, engine.Loop.validate

    def counted(loop, *batches):
        seen.append([next(i for i, b in enumerate(loader) if b is batch) for batch in batches])
        return train_step(loop, *batches)

    def noted(loop):
        validated.append(loop.step)
        return validate(loop)

    monkeypatch.setattr(engine.Loop, "train_step", counted)
    monkeypatch.setattr(engine.Loop, "validate", noted)
    result = fit(Module(model, cfg, steps), loader, loader[:1], cfg, tmp_path, max_steps=steps)
    assert result.steps == steps == 6
    assert seen == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] * 2
    assert validated == [3, 6]


@pytest.mark.slow
def test_ddp_syncs_the_gradients_on_each_steps_last_batch_only(tmp_path, monkeypatch):
    from lightning_fabric import Fabric

    asked = []
    original = Fabric.no_backward_sync

    def no_backward_sync(self, module, enabled=True):
        asked.append(enabled)
        return original(self, module, enabled)

    monkeypatch.setattr(Fabric, "no_backward_sync", no_backward_sync)
    model, task, Module, (x, y) = _lm()
    cfg = get_task(task).config(accumulate=3, warmup=0, model_dim=16, precision="32",
                                checkpoint_every=100)
    fit(Module(model, cfg, 2), [(x[:2], y[:2])] * 6, None, cfg, tmp_path, max_steps=2)
    assert asked == [True, True, False] * 2  # True: skip the sync


@pytest.mark.parametrize("make", [_lm, _classify], ids=["lm", "classify"])
def test_checkpointed_activations_give_the_same_gradients(make):
    """With dropout: the recomputed forward must draw the masks the first one drew."""
    model, _, _, (x, y) = make()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.2
    copied = copy.deepcopy(model)
    assert checkpoint_activations(copied) == 1
    grads = []
    for net in (model, copied):
        net.train()
        torch.manual_seed(5)
        logits = net(x)
        torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                          y.reshape(-1)).backward()
        grads.append({k: p.grad for k, p in net.named_parameters()})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-5, atol=1e-7,
                                   msg=lambda m: f"{name}: {m}")


def test_label_smoothing_in_lms_loss_is_torchs_smoothed_cross_entropy():
    model, _, _, (x, y) = _lm()
    logits = model(x)
    plain = lm_loss(model, x, y)
    smoothed = lm_loss(model, x, y, label_smoothing=0.1)
    # by hand: (1 - ε)·NLL + ε·mean over the vocabulary of -log p
    logp = logits.log_softmax(-1)
    nll = -logp.gather(-1, y.unsqueeze(-1)).mean()
    uniform = -logp.mean(-1).mean()
    torch.testing.assert_close(plain, nll)
    torch.testing.assert_close(smoothed, 0.9 * nll + 0.1 * uniform)


@pytest.mark.slow
def test_train_seconds_rise_on_every_row_and_leave_validation_out(tmp_path, monkeypatch):
    """Each validation is made to last 100 s more on the loop's clock: the training seconds
    of the log must not count them (6 validations: 600 s)."""
    import time

    from attnlab.training.clock import TrainClock

    validation = [0.0]  # the seconds the validations took, as the clock sees them
    validate = engine.Loop.validate

    def slow(loop):
        validation[0] += 100.0
        return validate(loop)

    monkeypatch.setattr(engine.Loop, "validate", slow)
    monkeypatch.setattr(engine, "TrainClock", lambda before=0.0: TrainClock(
        before, now=lambda: time.perf_counter() + validation[0]))
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "12", "--val-every", "2",
                 "--train-size", "64", "--val-size", "8", "--test-size", "8", "--model-dim",
                 "8", "--num-heads", "1", "--batch-size", "8", "--threads", "1"]) == 0
    rows = list(csv.DictReader(open(out / "logs" / "metrics.csv")))
    seconds = [float(r["train_seconds"]) for r in rows]
    assert all(r["train_seconds"] for r in rows) and seconds == sorted(seconds)
    assert sum(1 for r in rows if r["val_loss"]) == 6 and validation[0] == 600.0
    assert 0 < seconds[-1] < 100  # none of the 600 s of validation


@pytest.mark.slow
def test_a_run_with_the_new_settings_resumes_to_the_weights_of_one_never_killed(tmp_path,
                                                                              monkeypatch):
    args = ["--max-steps", "12", "--checkpoint-every", "4", "--val-every", "6",
            "--train-size", "96", "--val-size", "8", "--test-size", "8", "--model-dim", "16",
            "--num-heads", "2", "--batch-size", "8", "--threads", "1", "--dropout", "0.1",
            "--accumulate", "3", "--schedule", "wsd", "--cooldown", "0.5", "--min-lr", "1e-4",
            "--warmup", "2", "--checkpoint-activations", "--beta1", "0.7"]
    out, whole = tmp_path / "killed", tmp_path / "whole"

    class Die:
        def on_train_batch_end(self, loop):
            if loop.step == 6:
                raise RuntimeError("killed")

    with monkeypatch.context() as m:
        probe_loop(m, Die())
        with pytest.raises(RuntimeError, match="killed"):
            main(["train", "reverse", "--out", str(out), *args])
    saved = torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == 4
    assert {g["betas"] for g in saved["optimizer"]["param_groups"]} == {(0.7, 0.999)}
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    assert main(["train", "reverse", "--out", str(whole), *args]) == 0
    resumed = load_file(out / "model.safetensors")
    uninterrupted = load_file(whole / "model.safetensors")
    for name in uninterrupted:  # bit-exact: the same batches, masks, rates and sums
        assert torch.equal(resumed[name], uninterrupted[name]), name
    # the clock goes on from the checkpoint's seconds (the rows after the checkpoint's step
    # are the resumed process's)
    rows = [r for r in csv.DictReader(open(out / "logs" / "metrics.csv"))
            if int(r["step"]) > saved["global_step"]]
    assert min(float(r["train_seconds"]) for r in rows) >= saved["train_seconds"] > 0
