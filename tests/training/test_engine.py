"""Engine pieces that do not need a full run: early stopping at a target, the CSV log; and the
step's behaviours on small runs: the stop condition, the clipping of the gradients."""
import math
from types import SimpleNamespace

import pytest
import torch

from attnlab.training import StopAt


def _validate(stop_at, loop, value):
    loop.step += 10
    loop.hits = stop_at.streak(loop.hits, {"val_seq_acc": value})
    return loop.hits >= stop_at.times


def test_stops_after_target_reached_twice_in_a_row():
    stop_at = StopAt("val_seq_acc", 1.0, times=2)
    loop = SimpleNamespace(hits=0, step=0)
    assert not _validate(stop_at, loop, 1.0)
    assert not _validate(stop_at, loop, 0.99)  # the streak restarts
    assert not _validate(stop_at, loop, 1.0)
    assert _validate(stop_at, loop, 1.0)
    assert loop.step == 40


def test_a_missing_metric_never_stops():
    stop_at = StopAt("val_seq_acc", 1.0, times=1)
    assert stop_at.streak(0, {"val_loss": 0.0}) == 0
    with pytest.raises(ValueError, match="mode"):
        StopAt("val_loss", 0.1, mode="lowest")


class _Scripted(torch.nn.Module):
    """A regression whose validation reports ``val_hit`` from ``script``, one value per
    validation (the validation batch is one batch)."""

    def __init__(self, script):
        super().__init__()
        self.linear, self.script, self.validations = torch.nn.Linear(4, 1), script, 0


def _module(net, cfg, max_steps, *, scale=1.0):
    from attnlab.training import TaskModule

    class Regression(TaskModule):
        def loss(self, batch):
            x, y = batch
            loss = scale * torch.nn.functional.mse_loss(self.model.linear(x), y)
            if self.training:
                return loss, {}
            hit = self.model.script[min(self.model.validations, len(self.model.script) - 1)]
            self.model.validations += 1
            return loss, {"hit": torch.tensor(float(hit))}

    return Regression(net, cfg, max_steps)


def _data():
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    return [(x[i:i + 8], y[i:i + 8]) for i in range(0, 64, 8)], [(x[:8], y[:8])]


def _cfg(**kw):
    from attnlab.tasks import get_task

    return get_task("reverse").config(**{"lr": 1e-2, "warmup": 2, "model_dim": 4,
                                         "checkpoint_every": 100, **kw})


@pytest.mark.parametrize("mode, script, stops_at", [
    ("max", [1, 0, 1, 1, 1], 8),   # the 3rd and 4th validations reach 1: stops at step 8
    ("max", [1, 0] * 10, 20),      # never twice in a row: the whole budget
    ("min", [1, 0, 0, 1, 1], 6),   # "min": at most 0, at the 2nd and 3rd
])
def test_fit_stops_where_stop_at_is_reached_and_says_why(tmp_path, capsys, mode, script,
                                                        stops_at):
    from attnlab.training import fit

    train, val = _data()
    cfg = _cfg()
    module = _module(_Scripted(script), cfg, 20)
    target = StopAt("val_hit", 1.0 if mode == "max" else 0.0, times=2, mode=mode)
    result = fit(module, train, val, cfg, tmp_path, max_steps=20, val_check_interval=2,
                 stop_at=target)
    assert result.steps == stops_at
    state = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["global_step"] == stops_at  # the final checkpoint is of the step it stopped at
    said = f"stopped early at step {stops_at}/20: val_hit reached" in capsys.readouterr().err
    assert said == (stops_at < 20)


def _applied_gradient_norms(tmp_path, monkeypatch, **settings):
    """The global gradient norm each optimiser step of a small run applies (read inside the
    optimiser's step, so after any clipping)."""
    from attnlab.training import engine, fit

    norms = []

    class Recording(torch.optim.SGD):
        def step(self, closure=None):
            grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
            norms.append(float(torch.linalg.vector_norm(torch.stack(
                [torch.linalg.vector_norm(g.float()) for g in grads]))))
            return super().step(closure)

    def make_optimizer(params, cfg, **_):
        opt = Recording(params, lr=1e-3)
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)

    monkeypatch.setattr(engine, "make_optimizer", make_optimizer)
    train, _ = _data()
    cfg = _cfg(**settings)
    fit(_module(_Scripted([0]), cfg, 8, scale=1000.0), train, None, cfg, tmp_path,
        max_steps=8)
    return norms


@pytest.mark.parametrize("precision", ["32", "bf16-mixed", "64"])
def test_the_gradients_applied_are_clipped_to_grad_clip(tmp_path, monkeypatch, precision):
    """--grad-clip 0.5: every step applies gradients of global norm at most 0.5 (the loss is
    scaled up so that each would be far larger); --grad-clip 0: the gradients as computed."""
    clipped = _applied_gradient_norms(tmp_path / "on", monkeypatch, grad_clip=0.5,
                                      precision=precision)
    free = _applied_gradient_norms(tmp_path / "off", monkeypatch, grad_clip=0.0,
                                   precision=precision)
    assert len(clipped) == len(free) == 8
    assert all(n <= 0.5 * 1.001 for n in clipped), clipped
    assert min(free) > 10, free


def test_auto_precision_is_bf16_only_on_a_bf16_cpu_for_a_wide_enough_model(monkeypatch):
    import attnlab.training.hardware as engine

    monkeypatch.setattr(engine, "cpu_has_bf16", lambda: True)
    assert engine.auto_precision("cpu", 128) == "bf16-mixed"
    assert engine.auto_precision("cpu", 64) == "32"     # slower in bf16 when this small
    assert engine.auto_precision("gpu", 512) == "32"
    monkeypatch.setattr(engine, "cpu_has_bf16", lambda: False)
    assert engine.auto_precision("cpu", 512) == "32"    # emulated bf16 is slower than float32


@pytest.mark.slow
@pytest.mark.parametrize("bf16_cpu, extra, expected", [
    (True, [], "bf16-mixed"), (False, [], "32"), (True, ["--precision", "32"], "32"),
])
def test_lm_runs_in_the_precision_auto_chose_and_says_so(tmp_path, monkeypatch, capsys, bf16_cpu,
                                                         extra, expected):
    import attnlab.training.hardware as engine
    from attnlab.cli import main
    from attnlab.runs import read_yaml

    from ..reliability.conftest import write_corpus

    monkeypatch.setattr(engine, "cpu_has_bf16", lambda: bf16_cpu)
    out = tmp_path / "lm"
    assert main(["train", "lm", "--data", str(write_corpus(tmp_path / "c.txt")), "--out", str(out),
                 "--model-dim", "128", "--num-heads", "2", "--num-layers", "1", "--block-size",
                 "16", "--batch-size", "4", "--max-steps", "2", "--warmup", "1",
                 "--val-batches", "1", "--threads", "1", *extra]) == 0
    assert read_yaml(out / "config.yaml")["precision"] == expected
    said = "note: --precision auto: bf16-mixed on this cpu" in capsys.readouterr().err
    assert said == (expected == "bf16-mixed")


@pytest.mark.slow
def test_auto_given_again_on_resume_keeps_the_precision_the_run_has(tmp_path, monkeypatch,
                                                                    capsys):
    """A float32 run resumed with --precision auto stays float32 (auto once resolved it
    anew, and a bf16 CPU switched the run to bf16-mixed and rewrote config.yaml)."""
    import attnlab.training.hardware as engine
    from attnlab.cli import main
    from attnlab.runs import read_yaml

    from ..reliability.conftest import write_corpus

    monkeypatch.setattr(engine, "cpu_has_bf16", lambda: True)
    out = tmp_path / "lm"
    argv = ["train", "lm", "--out", str(out), "--model-dim", "128", "--num-heads", "2",
            "--num-layers", "1", "--block-size", "16", "--batch-size", "4", "--warmup", "1",
            "--val-batches", "1", "--threads", "1"]
    assert main([*argv, "--data", str(write_corpus(tmp_path / "c.txt")), "--max-steps", "2",
                 "--precision", "32"]) == 0
    capsys.readouterr()
    assert main([*argv, "--resume", "--max-steps", "3", "--precision", "auto"]) == 0
    assert "note: --precision auto" not in capsys.readouterr().err
    assert read_yaml(out / "config.yaml")["precision"] == "32"
    assert main([*argv, "--resume", "--max-steps", "4", "--precision", "32"]) == 0


@pytest.mark.slow
def test_a_refused_resume_of_an_lm_run_leaves_its_config_yaml_as_it_was(tmp_path, capsys):
    """lm records its corpus's digests in config.yaml when the run starts; a --resume that is
    then refused (a checkpoint that no longer fits) must not have rewritten the file."""
    from attnlab.cli import main

    from ..reliability.conftest import write_corpus

    out = tmp_path / "lm"
    assert main(["train", "lm", "--data", str(write_corpus(tmp_path / "c.txt")), "--out",
                 str(out), "--model-dim", "32", "--num-heads", "2", "--num-layers", "1",
                 "--block-size", "16", "--batch-size", "4", "--max-steps", "2", "--warmup",
                 "1", "--val-batches", "1", "--threads", "1"]) == 0
    config = out / "config.yaml"
    config.write_text(config.read_text().replace("model_dim: 32", "model_dim: 64"))
    edited = config.read_bytes()
    capsys.readouterr()
    assert main(["train", "lm", "--out", str(out), "--resume", "--max-steps", "4"]) == 2
    assert "does not fit" in capsys.readouterr().err
    assert config.read_bytes() == edited


@pytest.mark.slow
def test_a_checkpoint_that_does_not_fit_the_model_is_refused_in_one_line(tmp_path, capsys):
    """--resume rebuilds the model from config.yaml; when that no longer matches the checkpoint
    (an edited file, or an 'auto' setting that now chooses otherwise) the user gets exit 2 and
    the first tensor that does not fit, not Lightning's traceback, and the run is untouched."""
    from attnlab.cli import main

    run = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "4", "--model-dim", "16",
                 "--num-heads", "2", "--threads", "1", "--no-early-stop"]) == 0
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("model_dim: 16", "model_dim: 32"))
    kept = sorted(p.name for p in run.rglob("*"))
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(run), "--resume", "--max-steps", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("attnlab: error: --resume: ") and "does not fit" in err
    assert "input_net.1.weight is (16, 10) there, (32, 10) here (and 17 more)" in err
    assert sorted(p.name for p in run.rglob("*")) == kept


@pytest.mark.slow
def test_attnlab_train_imports_neither_lightnings_trainer_nor_torchmetrics(tmp_path):
    """The loop runs on Lightning Fabric alone: Lightning's Trainer and torchmetrics (which
    imports transformers and scipy.signal: the largest part of start-up, benchmarks/RESULTS.md,
    "startup") stay out of a training process."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from attnlab.cli import main\n"
        f"code = main(['train', 'reverse', '--out', {str(tmp_path / 'run')!r}, '--max-steps', '3',"
        " '--model-dim', '8', '--num-heads', '1', '--train-size', '64', '--val-size', '8',"
        " '--test-size', '8', '--threads', '1'])\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'pytorch_lightning',"
        " 'torchmetrics', 'transformers'} | {m for m in sys.modules if m.startswith("
        "'lightning.')})\n"
        "print(code, 'lightning_fabric' in sys.modules, loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "0 True []", out.stdout + out.stderr[-2000:]


@pytest.mark.slow
def test_the_last_steps_checkpoint_is_written_once(tmp_path, monkeypatch):
    """A --checkpoint-every that divides --max-steps: the last step's checkpoint is the final
    one, written once (a model's weights and AdamW's two moments: three times its size, a
    second write of which a user waits for at the end of every such run)."""
    from attnlab.cli import main

    written = []
    save = torch.save

    def counted(obj, f, *args, **kwargs):
        if isinstance(obj, dict) and "global_step" in obj:
            written.append(obj["global_step"])
        return save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", counted)
    run = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "20",
                 "--checkpoint-every", "10", "--val-every", "10", "--no-early-stop",
                 "--train-size", "200", "--val-size", "32", "--test-size", "32",
                 "--model-dim", "16", "--num-layers", "1", "--threads", "1"]) == 0
    assert written == [10, 20]
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 20


DDP_STEPS = '''
import sys, tempfile
import torch
from lightning_fabric import Fabric
from attnlab.tasks import get_task
from attnlab.training import TaskModule, engine, fit


class Regression(TaskModule):
    def loss(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.model(x), y), {}


def work(fabric):
    engine.make_fabric = lambda cfg: fabric       # the two spawned processes' Fabric
    engine.launch = lambda built, cfg: None       # ... launched already
    torch.manual_seed(0)
    module = Regression(torch.nn.Linear(4, 1), None, 3)
    torch.manual_seed(fabric.global_rank + 1)     # each rank its own batches
    loader = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    cfg = get_task("reverse").config(lr=1e-1, warmup=1, model_dim=4, checkpoint_every=100)
    fit(module, loader, None, cfg, sys.argv[1], max_steps=3)
    weights = fabric.all_gather(torch.cat([p.detach().flatten() for p in module.parameters()]))
    if fabric.global_rank == 0:
        print("equal" if torch.equal(weights[0], weights[1]) else f"differ: {weights}")


if __name__ == "__main__":  # two processes forked from this one: its imports paid once
    Fabric(accelerator="cpu", devices=2, strategy="ddp_fork").launch(work)
'''


@pytest.mark.slow  # two processes
def test_under_ddp_the_steps_loss_goes_through_ddp_and_the_ranks_stay_equal(tmp_path):
    """Each rank trains on its own batches; the step calls the task's loss through DDP's
    forward (``mark_forward_method``), so the gradients are averaged and both ranks end with
    the same weights (called on the bare module, each rank would train its own model)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "ddp_steps.py"
    script.write_text(DDP_STEPS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        os.getcwd(), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "equal", out.stdout + out.stderr[-2000:]


def test_the_summary_shows_a_small_number_not_zero(capsys):
    from attnlab.training.engine import print_summary

    # a regression in years that vary by thousandths: its test_mse is 1.6e-07, not "0.0000"
    print_summary("classify", "runs/years", {"test_mse": 1.55028e-07, "test_r2": 0.9955,
                                             "test_loss": 0.0, "steps": 1500})
    first, *rest = capsys.readouterr().out.splitlines()
    assert first == "classify run: runs/years"  # first: `| head -1` names the run
    lines = dict(line.split() for line in rest)
    assert lines == {"test_mse": "1.55e-07", "test_r2": "0.9955", "test_loss": "0.0000",
                     "steps": "1,500"}


def test_the_summary_prints_a_number_that_is_not_finite_as_null(capsys):
    """A diverged lm run's summary printed "val_perplexity  inf" right above the note saying
    val_perplexity is null (metrics.json's value)."""
    from attnlab.training.engine import print_summary

    print_summary("lm", "runs/diverged", {"val_loss": 800.0, "val_perplexity": math.inf,
                                          "test_loss": math.nan, "steps": 5})
    _, *rest = capsys.readouterr().out.splitlines()
    assert dict(line.split() for line in rest) == {
        "val_loss": "800.0000", "val_perplexity": "null", "test_loss": "null", "steps": "5"}
