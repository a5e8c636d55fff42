"""Engine pieces that do not need a full run: early stopping at a target."""
from types import SimpleNamespace

import pytest
import torch

from attnlab.training import StopAtTarget


def _validate(callback, trainer, value):
    trainer.callback_metrics = {"val_seq_acc": torch.tensor(value)}
    trainer.global_step += 10
    callback.on_validation_end(trainer, None)
    return trainer.should_stop


def test_stops_after_target_reached_twice_in_a_row():
    cb = StopAtTarget("val_seq_acc", 1.0, times=2)
    trainer = SimpleNamespace(sanity_checking=False, should_stop=False, global_step=0, callback_metrics={})
    assert not _validate(cb, trainer, 1.0)
    assert not _validate(cb, trainer, 0.99)  # the streak restarts
    assert not _validate(cb, trainer, 1.0)
    assert _validate(cb, trainer, 1.0)
    assert cb.stopped_at == 40


def test_missing_metric_or_sanity_check_never_stops():
    cb = StopAtTarget("val_seq_acc", 1.0, times=1)
    trainer = SimpleNamespace(sanity_checking=True, should_stop=False, global_step=0,
                              callback_metrics={"val_seq_acc": torch.tensor(1.0)})
    cb.on_validation_end(trainer, None)
    trainer.sanity_checking, trainer.callback_metrics = False, {}
    cb.on_validation_end(trainer, None)
    assert not trainer.should_stop
    with pytest.raises(ValueError, match="mode"):
        StopAtTarget("val_loss", 0.1, mode="lowest")


def _logged_steps(trainer, steps: int) -> list[int]:
    """The step counts (after the step) at which ``training_step`` would ``self.log``."""
    from attnlab.training.module import logs_this_step

    module = SimpleNamespace(_trainer=trainer, global_step=0)
    out = []
    for done in range(1, steps + 1):
        module.global_step = done - 1
        if logs_this_step(module):
            out.append(done)
    return out


def test_training_logs_only_the_steps_the_logger_writes_and_the_progress_lines_print():
    # one self.log costs Lightning 0.1-0.7 ms (benchmarks/train_loop.py): with a logger and no
    # progress bar, log where the CSV gets a row (every 7 steps here) and where a progress line
    # prints train_loss (every 15 of 150, and the last), so that line shows that step's loss
    from attnlab.training.engine import _PrintProgress

    trainer = SimpleNamespace(progress_bar_callback=None, loggers=["csv"], log_every_n_steps=7,
                              callbacks=[_PrintProgress(150)])
    logged = _logged_steps(trainer, 150)
    assert logged == sorted({*range(7, 151, 7), *range(15, 151, 15), 150})
    # a live progress bar, or no logger, reads every step
    assert _logged_steps(SimpleNamespace(progress_bar_callback=object(), loggers=["csv"],
                                         log_every_n_steps=7, callbacks=[]), 5) == [1, 2, 3, 4, 5]
    assert _logged_steps(SimpleNamespace(progress_bar_callback=None, loggers=[],
                                         log_every_n_steps=7, callbacks=[]), 3) == [1, 2, 3]


def test_auto_precision_is_bf16_only_on_a_bf16_cpu_for_a_wide_enough_model(monkeypatch):
    import attnlab.training.engine as engine

    monkeypatch.setattr(engine, "cpu_has_bf16", lambda: True)
    assert engine.auto_precision("cpu", 128) == "bf16-mixed"
    assert engine.auto_precision("cpu", 64) == "32"     # 1.5x slower in bf16 when this small
    assert engine.auto_precision("gpu", 512) == "32"
    monkeypatch.setattr(engine, "cpu_has_bf16", lambda: False)
    assert engine.auto_precision("cpu", 512) == "32"    # emulated bf16 is slower than float32


@pytest.mark.slow
@pytest.mark.parametrize("bf16_cpu, extra, expected", [
    (True, [], "bf16-mixed"), (False, [], "32"), (True, ["--precision", "32"], "32"),
])
def test_lm_runs_in_the_precision_auto_chose_and_says_so(tmp_path, monkeypatch, capsys, bf16_cpu,
                                                         extra, expected):
    import attnlab.training.engine as engine
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
    import attnlab.training.engine as engine
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
