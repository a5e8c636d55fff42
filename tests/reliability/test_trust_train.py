"""`attnlab train`: no lost work, no silent wrong result, no crash on an advertised flag. Each
section names the promise it holds to."""
import argparse
import csv
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from attnlab.cli import build_parser, main
from attnlab.commands import preflight
from attnlab.tasks import get_task

from .conftest import TINY_REVERSE, _through_the_fork_server

TRACEBACK = "Traceback"


def checksums(root: Path) -> dict[str, str]:
    """Every file under ``root`` with its SHA-256 (to show nothing was touched)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("attnlab: error:")]
    assert len(lines) == 1 and TRACEBACK not in err, err
    return lines[0]


# ---- SIGINT / SIGTERM save the step and resume exactly --------------------------------------

BUDGET = 400
SIGNAL_ARGS = ["--max-steps", str(BUDGET), "--no-early-stop", "--checkpoint-every", "100000",
               "--val-every", "100000", "--dropout", "0.1", "--train-size", "512", "--val-size",
               "32", "--test-size", "64", "--model-dim", "16", "--num-heads", "1",
               "--dim-feedforward", "16", "--batch-size", "16", "--threads", "1"]


def _train(out, *extra, forks=None) -> dict:
    """The arguments of ``subprocess.run`` or ``spawn`` for ``attnlab train reverse``; with
    ``forks`` (the ``forks`` fixture), started by the worker's fork server, as a run that no
    test signals can be (its import of torch and Lightning paid once)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("ATTNLAB_RUN_DIR", None)
    command = [sys.executable, "-m", "attnlab", "train", "reverse", "--out", str(out),
               *SIGNAL_ARGS, *extra]
    if forks is not None:
        command, env = _through_the_fork_server(command, env, forks)
    return dict(args=command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=env)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, forks):
    out = tmp_path_factory.mktemp("signal") / "whole"
    proc = subprocess.run(**_train(out, forks=forks), timeout=300)  # killed if it outlives that
    assert proc.returncode == 0, proc.stderr
    return load_file(out / "model.safetensors")


@pytest.mark.slow
@pytest.mark.parametrize("signum,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_saves_the_current_step_and_resume_ends_where_an_uninterrupted_run_does(
        tmp_path, uninterrupted, signum, status, spawn, forks):
    out = tmp_path / "run"
    proc = spawn(**_train(out))
    # wait until it has trained a while (progress lines every BUDGET/10 steps), then signal
    seen = ""
    while "step 80/" not in seen and proc.poll() is None:
        seen += proc.stderr.readline()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    err = seen + err
    assert proc.returncode == status, err
    assert TRACEBACK not in err, err
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1, err
    m = re.search(rf"interrupted at step (\d+) of {BUDGET}; continue with: "
                  rf"attnlab train reverse --out (\S+) --resume$", lines[0])
    assert m and Path(m.group(2)) == out, lines[0]
    step = int(m.group(1))
    assert 80 <= step < BUDGET
    # the checkpoint holds that very step (no periodic checkpoint was due: nothing else to lose)
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == step
    assert not (out / "metrics.json").exists()

    resumed = spawn(**_train(out, "--resume", forks=forks))
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert json.loads((out / "metrics.json").read_text())["steps"] == BUDGET
    weights = load_file(out / "model.safetensors")
    assert weights.keys() == uninterrupted.keys()
    for name in weights:
        torch.testing.assert_close(weights[name], uninterrupted[name], rtol=1e-5, atol=1e-6)


KEEP_BEST = [*TINY_REVERSE, "--keep-best", "--dropout", "0.1", "--lr", "0.05", "--threads", "1"]


def _outcome(out: Path) -> tuple[dict, dict, list[int]]:
    """What a finished run shows: metrics.json but its clock, the weights, and the steps its
    logs (every part of them) hold a validation row of."""
    metrics = json.loads((out / "metrics.json").read_text())
    metrics.pop("train_seconds")
    rows = [row for log in sorted((out / "logs").glob("metrics*.csv"))
            for row in csv.DictReader(log.open())]
    validated = sorted({int(row["step"]) for row in rows if row.get("val_loss")})
    return metrics, load_file(out / "model.safetensors"), validated


@pytest.fixture(scope="module")
def keep_best_run(tmp_path_factory) -> tuple[dict, dict, list[int]]:
    out = tmp_path_factory.mktemp("keep_best") / "whole"
    assert main(["train", "reverse", "--out", str(out), *KEEP_BEST]) == 0
    return _outcome(out)


@pytest.mark.slow
@pytest.mark.parametrize("step", [20, 30])
def test_a_signal_at_a_step_that_validates_is_validated_on_resume(tmp_path, monkeypatch,
                                                                 keep_best_run, step):
    """A signal during a step that validates (every 10th here) stopped the run before that
    validation, and the resumed run never made it: a best at that step was lost (--keep-best
    kept another step's weights) and, at the last step, metrics.json lacked its val_* numbers.
    Now the resumed run validates that step first: it ends as the uninterrupted run does."""
    from ..training.loop_probe import probe_loop

    class SignalAt:
        def on_train_batch_end(self, loop):
            if loop.step == step:
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the step is saved, then stop

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        probe_loop(m, SignalAt())
        assert main(["train", "reverse", "--out", str(out), *KEEP_BEST]) == 130
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == step
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    metrics, weights, validated = _outcome(out)
    whole_metrics, whole_weights, whole_validated = keep_best_run
    assert validated == whole_validated == [10, 20, 30]
    assert metrics == whole_metrics
    for name in whole_weights:
        torch.testing.assert_close(weights[name], whole_weights[name], rtol=1e-5, atol=1e-6)


# a reversal of 4 symbols of 4 that a width-32 model learns in about 130 steps: reverse's early
# stop ends it at its third validation in a row with every validation sequence right
EARLY_STOP = ["--max-steps", "400", "--num-categories", "4", "--seq-len", "4", "--model-dim",
              "32", "--num-heads", "2", "--num-layers", "1", "--train-size", "512",
              "--val-size", "64", "--test-size", "64", "--batch-size", "32", "--val-every", "5",
              "--checkpoint-every", "1000", "--lr", "0.003", "--threads", "1", "--early-stop"]


@pytest.mark.slow
def test_a_resumed_run_stops_early_at_the_step_an_uninterrupted_run_does(tmp_path, monkeypatch):
    """The early stop's count of validations in a row at its target was not in the checkpoint:
    a run interrupted after two of the three started again from none and trained 10 steps
    more than one that never stopped, with other weights and numbers."""
    from ..training.loop_probe import probe_loop

    whole = tmp_path / "whole"
    assert main(["train", "reverse", "--out", str(whole), *EARLY_STOP]) == 0
    expected = json.loads((whole / "metrics.json").read_text())
    assert "stopped_early" in expected and expected["steps"] < 400, expected
    after_two = expected["steps"] - 4  # a step after the second validation of the three

    class SignalAt:
        def on_train_batch_end(self, loop):
            if loop.step == after_two:
                os.kill(os.getpid(), signal.SIGINT)

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        probe_loop(m, SignalAt())
        assert main(["train", "reverse", "--out", str(out), *EARLY_STOP]) == 130
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == expected["steps"]
    assert metrics["stopped_early"] == expected["stopped_early"]


def _second_ctrl_c_while_saving(monkeypatch, step):
    """Ctrl-C after ``step``, and Ctrl-C again while that step's checkpoint is being written:
    the second signal arrives inside ``torch.save``, as a user pressing twice may send it."""
    from ..training.loop_probe import probe_loop

    pressed = []

    class SignalAt:
        def on_train_batch_end(self, loop):
            if loop.step == step:
                pressed.append(step)
                os.kill(os.getpid(), signal.SIGINT)

    real_save = torch.save

    class File:  # the file torch.save writes to, pressing Ctrl-C at its third write
        def __init__(self, f):
            self.f, self.writes = f, 0

        def write(self, data):
            self.writes += 1
            if self.writes == 3 and pressed and len(pressed) < 2:
                pressed.append("again")
                os.kill(os.getpid(), signal.SIGINT)
            return self.f.write(data)

        def flush(self):
            self.f.flush()

    probe_loop(monkeypatch, SignalAt())
    monkeypatch.setattr(torch, "save", lambda obj, f, **kw: real_save(obj, File(f), **kw))


@pytest.mark.slow
@pytest.mark.parametrize("every,last", [
    (5, "interrupted again (SIGINT) before the step's checkpoint was written; the last "
        "checkpoint is kept; continue with: attnlab train reverse --out {out} --resume"),
    (1000, "interrupted (SIGINT) before the first checkpoint; removed {out}, so the same "
           "command can run again"),
])
def test_a_second_ctrl_c_during_a_checkpoint_write_stops_in_one_line(tmp_path, monkeypatch,
                                                                     capsys, every, last):
    """Ctrl-C, then Ctrl-C again while the step's checkpoint was being written, ended in a
    traceback (torch.save's RuntimeError "unexpected pos ...") with exit status 1 and no word
    of how to continue. Now: exit 130 and one line; the run resumes from the checkpoint before
    (step 5), or, with none before, is removed as a run that never started (not kept with a
    line that promised a checkpoint)."""
    out = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(out), *TINY_REVERSE, "--max-steps", "20",
            "--checkpoint-every", str(every), "--val-every", "1000", "--no-early-stop"]
    with monkeypatch.context() as m:
        _second_ctrl_c_while_saving(m, 7)
        capsys.readouterr()
        assert main(argv) == 130
    err = capsys.readouterr().err
    assert TRACEBACK not in err, err
    assert err.splitlines()[-1] == f"attnlab: {last.format(out=out)}"
    if every > 7:
        assert not out.exists()
        return
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["last.ckpt"]
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 5
    assert main([*argv, "--resume"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 20


# ---- resuming a finished run is a no-op ------------------------------------------------------

@pytest.mark.slow
def test_resuming_a_finished_run_rewrites_nothing(reverse_run, tmp_path, capsys):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reverse_run, out)
    before = checksums(out)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "finished run" in err and "nothing was trained or rewritten" in err, err
    assert checksums(out) == before


@pytest.mark.slow
def test_a_finished_run_with_a_larger_budget_trains_on(reverse_run, tmp_path, capsys):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reverse_run, out)
    steps = json.loads((out / "metrics.json").read_text())["steps"]
    assert main(["train", "reverse", "--out", str(out), "--resume", "--no-early-stop",
                 "--max-steps", str(steps + 20)]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == steps + 20


@pytest.mark.slow
def test_a_budget_raised_on_resume_stretches_the_schedule_to_it(reverse_run, tmp_path, capsys):
    """A finished 30-step run resumed with --max-steps 50 kept its schedule's end at step 30:
    the course's cosine climbed back up from 0 past it, while config.yaml said 50. Now the
    decay ends at the new budget, as config.yaml says, and the command says so."""
    import shutil

    import yaml

    from attnlab.schedulers import schedule_lr

    out = tmp_path / "run"
    shutil.copytree(reverse_run, out)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", "--max-steps", "50"]) == 0
    err = capsys.readouterr().err
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["max_steps"] == 50 and cfg["schedule"] == "cosine"
    rows, first = ([(int(row["step"]), float(row["lr"]))
                    for row in csv.DictReader((out / "logs" / name).open()) if row.get("lr")]
                   for name in ("metrics.csv", "metrics.part1.csv"))
    assert [step for step, _ in rows] == sorted({step for step, _ in rows})  # each step once
    # the 30 steps it had trained are logged as the first process logged them
    assert first and [(step, lr) for step, lr in rows if step <= 30] == first
    logged = [(step, lr) for step, lr in rows if step > 30]  # the resumed process's steps
    assert logged and logged[-1][0] == 50
    rates = [lr for _, lr in logged]
    assert rates == sorted(rates, reverse=True)  # decaying, not climbing back up
    for step, lr in logged:  # the rate a step trains at is the schedule's after step - 1
        expected = schedule_lr("cosine", step - 1, lr=cfg["lr"], warmup=cfg["warmup"],
                               max_iters=50)
        assert lr == pytest.approx(expected, rel=1e-6), step
    assert ("note: --resume: the learning-rate schedule now ends at step 50, with the budget (it "
            "ended at step 30)") in err


class _Crash(Exception):
    """Stands in for the process dying mid-run."""


def crash_after(monkeypatch, step: int, argv: list[str]) -> None:
    """Run ``attnlab`` with ``argv`` and let it die (``_Crash``) once ``step`` is done."""
    from ..training.loop_probe import probe_loop

    class CrashAt:
        def on_train_batch_end(self, loop):
            if loop.step == step:
                raise _Crash(f"died after step {step}")

    with monkeypatch.context() as m:
        probe_loop(m, CrashAt())
        with pytest.raises(_Crash):
            main(argv)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "config"])
def test_resume_with_a_budget_below_the_steps_done_is_refused(tmp_path, capsys, monkeypatch, how):
    """An interrupted run resumed with --max-steps below its steps is refused: it once finished
    at once, tested the model and recorded the smaller budget in config.yaml, losing the run's
    own."""
    out = tmp_path / "run"
    crash_after(monkeypatch, 12, ["train", "reverse", "--out", str(out), *TINY_REVERSE,
                                  "--max-steps", "30", "--checkpoint-every", "11"])
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 11
    before = checksums(out)
    config = tmp_path / "budget.yaml"
    config.write_text("max_steps: 5\n")
    lower = ["--max-steps", "5"] if how == "flag" else ["--config", str(config)]
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", *lower]) == 2
    assert one_line_error(capsys) == ("attnlab: error: --max-steps 5 is below the 11 steps this "
                                      "run has done; give at least 11, or start a new run with "
                                      "another --out")
    assert checksums(out) == before  # config.yaml keeps max_steps: 30
    assert main(["train", "reverse", "--out", str(out), "--resume", "--max-steps", "20"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 20


@pytest.mark.slow
def test_an_epochs_run_records_no_max_steps_and_refuses_fewer_epochs_than_done(
        tmp_path, capsys, monkeypatch):
    """A run trained with --epochs once recorded the default max_steps beside it (600 for
    reverse), which never governed it; and --resume with fewer --epochs than it had done
    finished at once and recorded the smaller budget, as --max-steps below the steps did."""
    from attnlab.runs import read_yaml

    out = tmp_path / "run"
    tiny = [a for a in TINY_REVERSE if a not in ("--max-steps", "30")]
    # 256 training sequences in batches of 32: 8 steps an epoch
    crash_after(monkeypatch, 21, ["train", "reverse", "--out", str(out), *tiny, "--epochs", "4",
                                  "--no-early-stop"])
    saved = read_yaml(out / "config.yaml")
    assert saved["epochs"] == 4 and "max_steps" not in saved
    assert torch.load(out / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 20
    before = checksums(out)
    capsys.readouterr()
    assert main(["train", "reverse", "--out", str(out), "--resume", "--epochs", "2"]) == 2
    assert one_line_error(capsys) == ("attnlab: error: --epochs 2 (16 steps) is below the 20 "
                                      "steps this run has done (an epoch is 8 steps); give at "
                                      "least --epochs 3, or start a new run with another --out")
    assert checksums(out) == before  # config.yaml keeps epochs: 4
    assert main(["train", "reverse", "--out", str(out), "--resume", "--epochs", "3"]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 24
    saved = read_yaml(out / "config.yaml")
    assert saved["epochs"] == 3 and "max_steps" not in saved


def test_epochs_is_refused_when_resuming_a_run_whose_budget_is_max_steps(tmp_path, capsys):
    from attnlab.runs import write_yaml

    out = tmp_path / "run"
    write_yaml(out / "config.yaml", {"task": "reverse", "max_steps": 600})
    before = checksums(out)
    assert main(["train", "reverse", "--out", str(out), "--resume", "--epochs", "5"]) == 2
    assert one_line_error(capsys) == ("attnlab: error: --epochs 5: this run's budget is "
                                      "--max-steps 600 (its config.yaml); give --max-steps to "
                                      "change it")
    assert checksums(out) == before


def test_the_budget_check_reads_the_checkpoints_step_and_leaves_epoch_budgets_alone(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    torch.save({"global_step": 700}, tmp_path / "checkpoints" / "last.ckpt")
    preflight.check_budget(tmp_path, get_task("reverse").config(max_steps=700))
    # an --epochs run records the default max_steps too, which its steps may pass
    preflight.check_budget(tmp_path, get_task("reverse").config(max_steps=600, epochs=2))
    with pytest.raises(Exception, match=r"^--max-steps 600 is below the 700 steps this run has "
                                        r"done"):
        preflight.check_budget(tmp_path, get_task("reverse").config(max_steps=600))


@pytest.mark.parametrize("flags,config", [
    (["--epochs", "1", "--max-steps", "5"], None),
    ([], "epochs: 1\nmax-steps: 5\n"),
])
def test_epochs_and_max_steps_together_are_refused(tmp_path, capsys, flags, config):
    """--epochs with --max-steps is refused: with both, --max-steps was once ignored (it ran 100
    steps of an epoch) and config.yaml recorded both. (A budget flag over a --config file's
    budget wins, as a flag wins over any key: tests/cli/test_config_file.py.)"""
    out = tmp_path / "run"
    if config:
        (tmp_path / "c.yaml").write_text(config)
        flags = [*flags, "--config", str(tmp_path / "c.yaml")]
    assert main(["train", "reverse", "--out", str(out), *flags]) == 2
    assert one_line_error(capsys) == ("attnlab: error: --epochs 1 and --max-steps 5: give one "
                                      "budget, not both (--epochs N trains N passes over the "
                                      "training data)")
    assert not out.exists()


def test_max_steps_is_refused_when_resuming_a_run_whose_budget_is_epochs(tmp_path, capsys):
    from attnlab.runs import write_yaml

    out = tmp_path / "run"
    write_yaml(out / "config.yaml", {"task": "reverse", "epochs": 2, "max_steps": 600})
    before = checksums(out)
    assert main(["train", "reverse", "--out", str(out), "--resume", "--max-steps", "5"]) == 2
    assert one_line_error(capsys) == ("attnlab: error: --max-steps 5: this run's budget is "
                                      "--epochs 2 (its config.yaml); give --epochs to change it")
    assert checksums(out) == before


# ---- a run that dies before its first checkpoint does not block the retry ---------------------

@pytest.mark.slow
def test_a_run_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words of text. " * 20)
    out = tmp_path / "lm"
    # 420 bytes pass the check made before the run directory (a tenth of them holds a window
    # of 41), but as ~120 words they do not: found once the text is tokenised, in the run
    argv = ["train", "lm", "--data", str(corpus), "--out", str(out), "--block-size", "40",
            "--tokenizer", "word", "--max-steps", "2", "--model-dim", "16", "--num-heads", "2",
            "--num-layers", "1"]
    assert main(argv) == 2
    line = one_line_error(capsys)
    assert "--block-size" in line and f"removed {out}" in line
    assert not out.exists()
    argv[argv.index("40")] = "4"
    assert main(argv) == 0  # the same --out works at once


def test_an_empty_out_directory_the_user_made_stays(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words of text. " * 20)
    out = tmp_path / "mine"
    out.mkdir()
    assert main(["train", "lm", "--data", str(corpus), "--out", str(out), "--block-size",
                 "40", "--tokenizer", "word", "--max-steps", "2"]) == 2  # found in the run
    assert f"removed what it wrote in {out}, so the same command" in capsys.readouterr().err
    assert out.is_dir() and not any(out.iterdir())  # once said "removed" of it


def test_the_parents_a_failed_run_made_for_its_out_go_with_it(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words of text. " * 20)
    out = tmp_path / "a" / "b" / "run"
    assert main(["train", "lm", "--data", str(corpus), "--out", str(out), "--block-size",
                 "40", "--tokenizer", "word", "--max-steps", "2"]) == 2
    assert f"removed {tmp_path / 'a'}, so the same command" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_a_run_killed_before_its_first_checkpoint_says_how_to_start_again(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text("task: reverse\n")
    assert main(["train", "reverse", "--out", str(out)]) == 2
    assert "stopped before its first checkpoint; pass --resume" in one_line_error(capsys)


# ---- a bad --out is refused at once, without importing Lightning --------------------------

def _train_in_subprocess(*argv):
    code = ("import sys\nfrom attnlab.cli import main\nrc = main(sys.argv[1:])\n"
            "print('lightning imported' if 'lightning' in sys.modules else 'no lightning')\n"
            "sys.exit(rc)")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120)
    return proc, time.perf_counter() - start


@pytest.mark.slow
@pytest.mark.parametrize("make,named", [
    (lambda t: (t / "f").write_text("x") and t / "f", "is a file"),
    (lambda t: (t / "f").write_text("x") and t / "f" / "run", "which is a file"),
    (lambda t: Path("/proc/self/attnlab-run"), "cannot create files in /proc/self"),
])
def test_an_unusable_out_exits_2_before_lightning_is_imported(tmp_path, make, named):
    out = make(tmp_path)
    proc, _ = _train_in_subprocess("train", "reverse", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and f"--out {out}" in proc.stderr
    assert proc.stderr.count("\n") == 1 and TRACEBACK not in proc.stderr
    assert proc.stdout.strip() == "no lightning"


def test_out_through_a_symlink_loop_exits_2(tmp_path, capsys):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert main(["train", "reverse", "--out", str(tmp_path / "loop" / "run")]) == 2
    assert "--out" in one_line_error(capsys)


# ---- a length the machine cannot hold is refused with the numbers ---------------------------

def test_a_long_seq_len_the_machine_cannot_hold_is_refused_with_the_memory_it_needs(tmp_path,
                                                                                  capsys):
    # the longest --seq-len the model takes (its 5,000 positions; a longer one is refused
    # for that: tests/tasks/test_sequence_edges.py), over ten million sequences
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--seq-len", "5000",
                 "--train-size", "10000000"]) == 2
    line = one_line_error(capsys)
    assert "--seq-len 5,000" in line and "GB" in line and "available" in line
    assert not out.exists()


def test_a_huge_num_categories_is_refused_with_the_memory_it_needs(tmp_path, capsys):
    # the estimate counted the blocks alone: --num-categories 1000000000 passed, and the run
    # went on to build input and output layers of 10^9 x D weights and one-hot batches of
    # B x T x 10^9
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--num-categories", "1000000000"]) == 2
    line = one_line_error(capsys)
    assert "--num-categories 1,000,000,000" in line and "available" in line
    assert not out.exists()


@pytest.mark.parametrize("args, error", [
    (["lm", "--data", "{data}", "--block-size", "-100000", "--attention-dropout", "0.1"],
     "--block-size must be an integer >= 2, got -100000"),
    (["reverse", "--seq-len", "100000000"], "--seq-len must be at most 5,000"),
    (["anomaly", "--model-dim", "-100000"], "--model-dim must be a positive integer, got -100000"),
    (["anomaly", "--val-sets", "-100000000"], "--val-sets must be a positive integer"),
])
def test_a_value_out_of_range_is_named_before_the_memory_check(tmp_path, capsys, monkeypatch,
                                                                args, error):
    """The memory check ran on the settings before their ranges were checked: a negative
    --block-size "needed about 25.6 TB", --seq-len 100000000 "40.1 PB"."""
    monkeypatch.setattr(preflight, "available_memory", lambda: 8 * 2**30)
    data = tmp_path / "corpus.txt"
    data.write_text("some text to model\n" * 50)
    out = tmp_path / "run"
    assert main(["train", *[a.format(data=data) for a in args], "--accelerator", "cpu",
                 "--out", str(out)]) == 2
    line = one_line_error(capsys)
    assert line.startswith(f"attnlab: error: {error}"), line
    assert not out.exists()


def test_memory_check_compares_the_estimate_with_what_is_available():
    preflight.check_memory([("data", 1e9)], available=2 * 10**9)  # fits: no error
    with pytest.raises(Exception, match=r"about 3\.0 GB \(2\.0 GB for b \+ 1\.0 GB for a\); "
                                        r"this machine has 2\.0 GB available"):
        preflight.check_memory([("a", 1e9), ("b", 2e9)], available=2 * 10**9)


def test_a_huge_estimate_is_said_in_a_unit_that_fits_it():
    """The size is in the largest unit that reads well: the graph of 10^8 nodes once needed
    "about 330,000,000.0 GB"."""
    with pytest.raises(Exception, match=r"^these settings need about 330\.0 PB \(320\.0 PB for b "
                                        r"\+ 10\.0 PB for a\); this machine has 2\.0 GB "
                                        r"available \(the count is a lower bound: only what is "
                                        r"sure to be allocated\)$"):
        preflight.check_memory([("a", 1e16), ("b", 3.2e17)], available=2 * 10**9)


def test_a_config_that_is_a_directory_is_called_one(tmp_path, capsys):
    """`--config DIR` says it is a directory (it once said "file not found")."""
    out = tmp_path / "run"
    assert main(["train", "reverse", "--config", str(tmp_path), "--out", str(out)]) == 2
    assert one_line_error(capsys) == (f"attnlab: error: --config: {tmp_path} is a directory, "
                                      f"not a YAML file")
    assert not out.exists()


# ---- --resume with other settings names each one ------------------------------------------

@pytest.mark.slow
def test_resume_with_other_settings_names_each_and_changes_nothing(reverse_run, tmp_path, capsys):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reverse_run, out)
    (out / "metrics.json").unlink()  # as if interrupted: a resume would train
    before = checksums(out)
    assert main(["train", "reverse", "--out", str(out), "--resume", "--model-dim", "64",
                 "--lr", "0.5", "--threads", "1"]) == 2
    line = one_line_error(capsys)
    assert "--model-dim 64 (the run has 16)" in line and "--lr 0.5 (the run has 0.01)" in line
    assert "--threads" not in line  # how fast it runs may change
    assert checksums(out) == before


@pytest.mark.slow
def test_resume_with_another_thread_count_says_the_weights_will_differ(tmp_path, capsys):
    """--threads may change on --resume, but the run then no longer ends with the weights of
    one that never stopped (float sums in another order), and nothing said so."""
    out = tmp_path / "run"
    argv = ["train", "reverse", "--out", str(out), *TINY_REVERSE, "--no-early-stop"]
    assert main([*argv, "--max-steps", "4", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main([*argv, "--resume", "--max-steps", "6", "--threads", "2"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "(the run had" in line]
    assert notes == ["note: --resume: --threads 2 (the run had 1): the run trains on, but will "
                     "not end with the exact weights of one that never stopped (another number "
                     "of threads or processes adds the sums up in another order; each process "
                     "draws its own dropout masks)"]
    assert main([*argv, "--resume", "--max-steps", "8", "--threads", "2"]) == 0
    assert "(the run had" not in capsys.readouterr().err  # config.yaml now records 2


@pytest.mark.slow
def test_resume_with_a_config_file_that_differs_is_refused_too(reverse_run, tmp_path, capsys):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reverse_run, out)
    (out / "metrics.json").unlink()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("num-layers: 3\n")
    assert main(["train", "reverse", "--out", str(out), "--resume", "--config", str(cfg)]) == 2
    # named where it was given (it was named as a flag no one typed)
    assert f"num_layers: 3 in --config {cfg} (the run has 1)" in one_line_error(capsys)


@pytest.mark.slow
def test_resume_and_out_in_a_config_file_continue_the_run_as_the_flags_do(tmp_path, capsys):
    """`resume: true` in --config once skipped the run's config.yaml (the run went on with
    the task's defaults, or failed naming --config) and its budget went unread."""
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--max-steps", "4", "--model-dim", "16",
                 "--num-heads", "2", "--no-early-stop", "--threads", "1"]) == 0
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"resume: true\nout: {out}\nmax_steps: 8\n")
    assert main(["train", "reverse", "--config", str(cfg)]) == 0
    assert json.loads((out / "metrics.json").read_text())["steps"] == 8
    assert "model_dim: 16" in (out / "config.yaml").read_text()
    cfg.write_text(f"resume: true\nout: {tmp_path / 'nowhere'}\n")
    capsys.readouterr()
    assert main(["train", "reverse", "--config", str(cfg)]) == 2
    assert one_line_error(capsys).startswith("attnlab: error: --resume: ")


# ---- several nodes need a cluster -----------------------------------------------------------

def test_num_nodes_without_a_cluster_environment_exits_2(tmp_path, capsys, monkeypatch):
    for name in ("MASTER_ADDR", "NODE_RANK", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), "--num-nodes", "2"]) == 2
    line = one_line_error(capsys)
    assert "--num-nodes 2 needs a cluster environment" in line and "MASTER_ADDR" in line
    assert not out.exists()


@pytest.mark.slow
def test_processes_started_by_torchrun_without_out_are_refused(tmp_path, capsys, monkeypatch):
    """torchrun starts every process itself, and without --out each took its own default
    runs/TASK-<time>: rank 1, a second later, made a directory of its own (with lm, a second
    copy of the prepared corpus) that nothing used. Refused, naming --out, before anything is
    written; with --out the same processes share the run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")  # what torchrun gives rank 0 (LOCAL_RANK 0)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert main(["train", "reverse", "--max-steps", "2", *TINY_REVERSE[2:]]) == 2
    assert one_line_error(capsys) == ("attnlab: error: 2 processes started by torchrun need "
                                      "--out DIR: each would choose its own default run "
                                      "directory")
    assert list(tmp_path.iterdir()) == []


def test_a_cluster_environment_is_recognised():
    cfg = get_task("reverse").config(num_nodes=2)
    preflight.check_cluster(cfg, {"MASTER_ADDR": "10.0.0.1", "NODE_RANK": "1"})
    preflight.check_cluster(cfg, {"SLURM_NTASKS": "8"})
    preflight.check_cluster(cfg, {"TORCHELASTIC_RUN_ID": "x"})
    with pytest.raises(Exception, match="cluster environment"):
        preflight.check_cluster(cfg, {"MASTER_ADDR": "10.0.0.1"})


# ---- a warm-up that does not fit the budget is said ----------------------------------------

@pytest.mark.slow
def test_a_warmup_longer_than_the_budget_is_warned_about(tmp_path, capsys):
    assert main(["train", "reverse", "--out", str(tmp_path / "r"), *TINY_REVERSE,
                 "--warmup", "1000", "--max-steps", "10", "--no-early-stop"]) == 0
    err = capsys.readouterr().err
    m = re.search(r"warning: --warmup 1000 with a 10-step budget: the learning rate peaks at "
                  r"(0\.\d\d) x --lr 0\.01", err)
    assert m and float(m.group(1)) < 0.02, err


@pytest.mark.slow
def test_the_warmup_warning_names_the_step_the_runs_log_peaks_at(tmp_path, capsys):
    """The warning counted steps from 0, as the schedule's formula does, and the run's own log
    counts steps done: it said "(step 17)" where logs/metrics.csv's lr peaked at step 18."""
    out = tmp_path / "r"
    assert main(["train", "reverse", "--out", str(out), *TINY_REVERSE, "--warmup", "100",
                 "--max-steps", "40", "--no-early-stop"]) == 0
    m = re.search(r"the learning rate peaks at (0\.\d\d) x --lr 0\.01 \(step (\d+)\)",
                  capsys.readouterr().err)
    with open(out / "logs" / "metrics.csv") as f:
        rates = {int(row["step"]): float(row["lr"]) for row in csv.DictReader(f) if row["lr"]}
    top = max(rates, key=rates.__getitem__)
    assert len(rates) == 20 and top not in (min(rates), max(rates)), rates  # a peak, logged
    assert m and int(m.group(2)) == top, (m and m.group(0), top)
    assert float(m.group(1)) == pytest.approx(rates[top] / 0.01, abs=0.005)


def test_the_default_schedules_are_not_warned_about():
    from attnlab.tasks import available_tasks
    from attnlab.tasks.base import SHARED_DEFAULTS
    from attnlab.training.engine import warmup_note

    for name, task in available_tasks().items():
        cfg = {**SHARED_DEFAULTS, **task.defaults}
        assert warmup_note(cfg, cfg["max_steps"]) is None, name


# ---- every boolean flag has its --no- form; one prefix in messages --------------------------

def test_every_boolean_training_flag_has_its_no_form():
    parser = build_parser()
    train = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    tasks = next(a for a in train.choices["train"]._actions
                 if isinstance(a, argparse._SubParsersAction))
    for name, task_parser in tasks.choices.items():
        for action in task_parser._actions:
            if isinstance(action, (argparse._StoreConstAction, argparse._StoreTrueAction)):
                pytest.fail(f"train {name} {action.option_strings}: no --no- form")


@pytest.mark.slow
def test_no_norm_first_on_lm_is_accepted_and_recorded(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog. " * 20)
    out = tmp_path / "lm"
    assert main(["train", "lm", "--data", str(corpus), "--out", str(out), "--no-norm-first",
                 "--max-steps", "2", "--block-size", "8", "--model-dim", "16", "--num-heads",
                 "2", "--num-layers", "1", "--val-batches", "1", "--warmup", "1"]) == 0
    assert "norm_first: false" in (out / "config.yaml").read_text()


def test_a_usage_error_has_one_prefix(capsys):
    assert main(["train", "lm", "--no-such-flag"]) == 2
    line = one_line_error(capsys)
    assert line.count("attnlab") == 1, line


# ---- what will really run is said and recorded -----------------------------------------------

@pytest.mark.slow
def test_16_mixed_on_cpu_says_and_records_what_runs(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["train", "reverse", "--out", str(out), *TINY_REVERSE, "--max-steps", "3",
                 "--precision", "16-mixed", "--accelerator", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "--precision 16-mixed is not available on cpu; running bf16-mixed" in err
    assert "precision: bf16-mixed" in (out / "config.yaml").read_text()


# ---- the rest of the kind: values at the edge of their range ---------------------------------

@pytest.mark.parametrize("flag,value,named", [
    ("--seed", "99999999999999999999999", "--seed must be in 0..4294967295"),
    ("--seed", "-1", "--seed must be in 0..4294967295"),
    ("--dim-feedforward", "100000000000", "the model's weights, gradients and optimiser state"),
])
def test_values_past_what_can_run_exit_2_before_anything_is_written(tmp_path, capsys, flag,
                                                                     value, named):
    out = tmp_path / "run"
    assert main(["train", "reverse", "--out", str(out), flag, value]) == 2
    assert named in one_line_error(capsys)
    assert not out.exists()


def test_a_batch_size_above_the_training_examples_is_noted_where_a_loader_knows_them():
    from attnlab.data import SequenceDataset, batch_loader, numbered_batches
    from attnlab.data.resumable import ShuffledBatches
    from attnlab.training.engine import batch_note

    loaders = [batch_loader(SequenceDataset("reverse", 5, 4, 64), 100, shuffle=True),
               ShuffledBatches(lambda shuffle, seed: [], 64, 100, seed=0)]
    for loader in loaders:
        assert batch_note(loader, 100) == ("--batch-size 100 is more than the 64 training "
                                           "examples: each step trains on all 64")
        assert batch_note(loader, 64) is None
    assert batch_note(numbered_batches(lambda i: i, 10), 10**6) is None  # an endless supply


@pytest.mark.slow  # trains a step
def test_train_notes_a_batch_size_above_its_training_split(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "reverse", "--train-size", "64", "--val-size", "16", "--test-size",
                 "16", "--batch-size", "1000", "--max-steps", "1", "--model-dim", "16",
                 "--num-heads", "2", "--num-layers", "1", "--out", str(out)]) == 0
    assert ("note: --batch-size 1000 is more than the 64 training examples: each step trains "
            "on all 64") in capsys.readouterr().err.splitlines()


def test_a_huge_budget_does_not_hang_the_warmup_check():
    from attnlab.training.engine import warmup_note

    # CPU seconds: a busy shared machine stretches the wall time of its few milliseconds of
    # work toward the bound, and a hang is what the bound is for
    start = time.process_time()
    note = warmup_note({"warmup": 10**8, "lr": 1e-3}, 10**11)
    assert time.process_time() - start < 1.0
    assert note is None  # a warm-up of 0.1% of the run reaches ~--lr


# ---- metrics.json is strict JSON -----------------------------------------------------------

def _refuse(constant):
    raise ValueError(f"not strict JSON: {constant}")


def test_a_nan_metric_is_written_as_null(tmp_path):
    """Python's json wrote `NaN`, which JSON.parse, jq and Go's encoding/json refuse."""
    from attnlab.runs import write_metrics

    write_metrics(tmp_path / "metrics.json", {"val_loss": float("nan"), "val_perplexity":
                                              float("inf"), "steps": 3, "test_accuracy": 0.5})
    text = (tmp_path / "metrics.json").read_text()
    assert json.loads(text, parse_constant=_refuse) == {
        "val_loss": None, "val_perplexity": None, "steps": 3, "test_accuracy": 0.5}


@pytest.mark.slow
def test_evaluate_prints_a_nan_metric_as_null(reverse_run, monkeypatch, capsys):
    from attnlab.tasks import get_task

    runtime = get_task("reverse").runtime()
    monkeypatch.setattr(runtime, "evaluate", lambda *a, **k: {"test_token_accuracy":
                                                              float("nan")})
    capsys.readouterr()
    assert main(["evaluate", str(reverse_run)]) == 0
    assert json.loads(capsys.readouterr().out, parse_constant=_refuse) == {
        "test_token_accuracy": None}


@pytest.mark.parametrize("key, value, says", [
    ("model_dim", "abc", "model_dim must be an integer, got 'abc'"),
    ("lr", "fast", "lr must be a number, got 'fast'"),
    ("norm_first", "maybe", "norm_first must be true or false, got 'maybe'"),
])
def test_resume_names_a_bad_value_in_the_runs_config_yaml(tmp_path, capsys, key, value, says):
    """#37: `--resume` of a run whose config.yaml holds `model_dim: abc` said "--model-dim
    must be an integer", a flag the user never typed; generate and evaluate name the file."""
    from attnlab.runs import write_yaml

    out = tmp_path / "run"
    write_yaml(out / "config.yaml", {"task": "reverse", "max_steps": 10, "model_dim": 8,
                                     "num_heads": 2, key: value})
    before = checksums(out)
    assert main(["train", "reverse", "--out", str(out), "--resume"]) == 2
    assert one_line_error(capsys) == f"attnlab: error: {out / 'config.yaml'}: {says}"
    assert checksums(out) == before


def test_a_config_file_names_its_own_bad_value(tmp_path, capsys):
    """A --config value is named as the file spells it; a flag given instead is the flag's."""
    config, out = tmp_path / "c.yaml", tmp_path / "run"
    config.write_text("num_layers: 0\n")
    assert main(["train", "reverse", "--config", str(config), "--out", str(out)]) == 2
    assert one_line_error(capsys) == (f"attnlab: error: --config {config}: num_layers must be a "
                                      f"positive integer, got 0")
    assert main(["train", "reverse", "--config", str(config), "--out", str(out),
                 "--num-layers", "-1"]) == 2
    assert one_line_error(capsys) == ("attnlab: error: --num-layers must be a positive "
                                      "integer, got -1")
    assert not out.exists()


@pytest.mark.parametrize("command", ["resume", "predict", "load", "config"])
def test_an_empty_config_yaml_is_named_as_empty(tmp_path, capsys, command):
    """#37: an empty config.yaml once said "holds a None run" (--resume), "has no 'task'
    setting" (predict, load), and an empty --config file trained the defaults unsaid."""
    import attnlab
    from attnlab.errors import UsageError

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("# nothing here\n")
    (run / "model.safetensors").write_bytes(b"")
    argv = {"resume": ["train", "reverse", "--out", str(run), "--resume"],
            "predict": ["predict", str(run), "--input", "1 2"],
            "config": ["train", "reverse", "--config", str(run / "config.yaml"),
                       "--out", str(tmp_path / "new")]}
    if command == "load":
        with pytest.raises(UsageError, match=f"^run directory: {run / 'config.yaml'} is empty"):
            attnlab.load(run)
        return
    assert main(argv[command]) == 2
    what = {"resume": "--resume", "predict": "predict", "config": "--config"}[command]
    assert one_line_error(capsys) == (f"attnlab: error: {what}: {run / 'config.yaml'} is empty: "
                                      f"it holds no settings")
    assert not (tmp_path / "new").exists()


def test_resume_names_a_boolean_flag_as_typed(tmp_path, capsys):
    """#37: a boolean that differs from the run's was reported as `--norm-first True`."""
    from attnlab.runs import write_yaml

    out = tmp_path / "run"
    write_yaml(out / "config.yaml", {"task": "reverse", "max_steps": 10, "model_dim": 8,
                                     "num_heads": 2, "norm_first": False})
    assert main(["train", "reverse", "--out", str(out), "--resume", "--norm-first"]) == 2
    assert "--norm-first (the run has --no-norm-first)" in one_line_error(capsys)


@pytest.mark.slow
@pytest.mark.parametrize("resume", [False, True])
def test_a_second_train_of_an_out_in_use_is_refused_and_writes_nothing(reverse_run, tmp_path,
                                                                       capsys, resume):
    """Two `attnlab train --out DIR` started together both found DIR empty and both wrote
    into it: the second's files over the first's. The run directory is held (``flock``) while
    a run trains; another run of it, new or --resume, is refused in one line and leaves it
    as it was."""
    import fcntl
    import shutil

    out = tmp_path / "run"
    if resume:
        shutil.copytree(reverse_run, out)
    else:
        out.mkdir()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    held = os.open(out, os.O_RDONLY)  # what a run training there holds
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        argv = ["train", "reverse", "--out", str(out), *TINY_REVERSE, "--max-steps", "40"]
        assert main(argv + (["--resume"] if resume else [])) == 2
    finally:
        os.close(held)
    assert one_line_error(capsys) == (f"attnlab: error: --out {out} is in use by another "
                                      f"attnlab train running now; wait for it to end, or "
                                      f"choose another --out")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_a_run_without_out_started_in_the_same_second_as_another_gets_its_own_directory(
        tmp_path, monkeypatch, capsys):
    """The default run directory is named by the second the run starts: a second run started
    within it was refused, told to --resume the first one's run. It now takes the next free
    name, and the first run is left as it was."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *t: "20260101-120000")
    first = tmp_path / "runs" / "reverse-20260101-120000"
    first.mkdir(parents=True)
    (first / "config.yaml").write_text("task: reverse\n")
    assert main(["train", "reverse", *TINY_REVERSE, "--max-steps", "2"]) == 0
    assert (first / "config.yaml").read_text() == "task: reverse\n"
    assert sorted(p.name for p in first.iterdir()) == ["config.yaml"]
    assert (tmp_path / "runs" / "reverse-20260101-120000-2" / "model.safetensors").is_file()
    assert "attnlab train reverse -> runs/reverse-20260101-120000-2" in capsys.readouterr().err


@pytest.mark.slow
def test_a_default_run_directory_taken_after_it_was_chosen_is_passed_over(tmp_path, monkeypatch,
                                                                          capsys):
    """Two runs started together without --out both chose the free name of their second; the
    one that made it first holds it (locked, still empty while its model is built), and the
    other was refused, told to choose another --out it never gave. It takes the next name."""
    fcntl = pytest.importorskip("fcntl")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *t: "20260101-120000")
    first = tmp_path / "runs" / "reverse-20260101-120000"
    real_claim = preflight.claim

    def the_other_run_claims_first(run_dir, **kw):
        if Path(run_dir).resolve() == first and not first.exists():
            first.mkdir(parents=True)  # the other run, between this one's choice and claim
            fcntl.flock(held := os.open(first, os.O_RDONLY), fcntl.LOCK_EX)
            the_other_run_claims_first.held = held
        return real_claim(run_dir, **kw)

    monkeypatch.setattr(preflight, "claim", the_other_run_claims_first)
    try:
        assert main(["train", "reverse", *TINY_REVERSE, "--max-steps", "2"]) == 0
    finally:
        os.close(the_other_run_claims_first.held)
    assert list(first.iterdir()) == []
    assert (tmp_path / "runs" / "reverse-20260101-120000-2" / "model.safetensors").is_file()
    assert "attnlab train reverse -> runs/reverse-20260101-120000-2" in capsys.readouterr().err


@pytest.mark.parametrize("key", ["LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID",
                                 "JSM_NAMESPACE_RANK"])
def test_a_process_a_launcher_started_with_another_rank_claims_no_run_directory(key, tmp_path,
                                                                                monkeypatch):
    """srun and torchrun start every process themselves: the ones of rank 1 and up have no
    LOCAL_RANK/NODE_RANK of Lightning's launcher, and each took the run directory's lock, to
    be refused as 'in use' by rank 0's (and the rest then waited for them forever)."""
    from attnlab.commands import train as train_command

    for other in train_command.RANK_KEYS:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(key, "0")
    assert not train_command._is_child()
    monkeypatch.setenv(key, "1")
    assert train_command._is_child()
    monkeypatch.setattr(preflight, "claim", lambda *a, **k: pytest.fail("claimed"))
    cfg = argparse.Namespace(resume=False, out=str(tmp_path / "run"), task="reverse")
    assert train_command._claimed(cfg, tmp_path / "run")[1] is None
