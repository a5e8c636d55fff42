"""Engine pieces that do not need a full run: early stopping at a target, the CSV log."""
from types import SimpleNamespace

import pytest
import torch

from attnlab.training import StopAtTarget


def _validate(callback, loop, value):
    loop.step += 10
    callback.on_validation_end(loop, {"val_seq_acc": value})
    return loop.should_stop


def test_stops_after_target_reached_twice_in_a_row():
    cb = StopAtTarget("val_seq_acc", 1.0, times=2)
    loop = SimpleNamespace(should_stop=False, step=0)
    assert not _validate(cb, loop, 1.0)
    assert not _validate(cb, loop, 0.99)  # the streak restarts
    assert not _validate(cb, loop, 1.0)
    assert _validate(cb, loop, 1.0)
    assert cb.stopped_at == 40


def test_a_missing_metric_never_stops():
    cb = StopAtTarget("val_seq_acc", 1.0, times=1)
    loop = SimpleNamespace(should_stop=False, step=0)
    cb.on_validation_end(loop, {"val_loss": 0.0})
    assert not loop.should_stop
    with pytest.raises(ValueError, match="mode"):
        StopAtTarget("val_loss", 0.1, mode="lowest")


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
    import lightning_fabric.plugins.io.torch_io as torch_io

    from attnlab.cli import main

    written = []
    save = torch_io.TorchCheckpointIO.save_checkpoint

    def counted(self, checkpoint, path, storage_options=None):
        written.append(checkpoint["global_step"])
        return save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(torch_io.TorchCheckpointIO, "save_checkpoint", counted)
    run = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(run), "--max-steps", "20",
                 "--checkpoint-every", "10", "--val-every", "10", "--no-early-stop",
                 "--train-size", "200", "--val-size", "32", "--test-size", "32",
                 "--model-dim", "16", "--num-layers", "1", "--threads", "1"]) == 0
    assert written == [10, 20]
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 20
