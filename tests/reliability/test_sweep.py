"""A hyperparameter sweep: many `attnlab train` started at once (a shell loop with `&`, a SLURM
array), each a run of its own, then compared. No two runs share a directory; nothing one run
does removes another's files, and a corpus prepared by several of them at once is one
corpus."""
import errno
import os
import pathlib
import time

import pytest
import torch

from attnlab.cli import main
from attnlab.commands import preflight
from attnlab.data import corpus as corpus_module

from .conftest import TINY_REVERSE

fcntl = pytest.importorskip("fcntl")  # (Windows has no locks: a run there is unguarded)

SECOND = "20260101-120000"


def no_directory_locks(fd, operation):
    """``fcntl.flock`` of a directory on NFS, where every task of a SLURM array writes: an
    exclusive lock needs a file open for writing, which a directory cannot be."""
    raise OSError(errno.EBADF, "Bad file descriptor")


@pytest.mark.slow
def test_runs_started_in_the_same_second_without_locks_get_a_directory_each(
        tmp_path, monkeypatch, capsys):
    """Two tasks of a SLURM array (no --out) started in the same second on NFS both chose
    runs/reverse-<second>, both wrote into it and both exited 0: its config.yaml held one
    run's learning rate, its weights and metrics.json possibly the other's. The name is made
    by one process alone; the other takes the next one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt, *t: SECOND)
    monkeypatch.setattr(fcntl, "flock", no_directory_locks)
    first = tmp_path / "runs" / f"reverse-{SECOND}"
    real_check_cluster = preflight.check_cluster

    def the_other_run_makes_it_meanwhile(*args, **kwargs):
        # after this task chose the name, and seconds before it makes it (Lightning's import)
        first.mkdir(parents=True, exist_ok=True)
        return real_check_cluster(*args, **kwargs)

    monkeypatch.setattr(preflight, "check_cluster", the_other_run_makes_it_meanwhile)
    assert main(["train", "reverse", *TINY_REVERSE, "--max-steps", "2"]) == 0
    assert list(first.iterdir()) == []  # the other run's, left to it
    assert (tmp_path / "runs" / f"reverse-{SECOND}-2" / "model.safetensors").is_file()
    assert f"attnlab train reverse -> runs/reverse-{SECOND}-2" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_that_fails_at_once_leaves_the_run_started_beside_it(tmp_path, monkeypatch,
                                                                    capsys):
    """`--out sweep/lr1` and `--out sweep/lr2` started together, sweep/ made by whichever came
    first: the one that failed before its first checkpoint removed sweep/ as a directory it
    had made, the other run's checkpoint with it. Only its own directory goes, and the parents
    it made while they are empty."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words of text. " * 20)
    sweep = tmp_path / "sweep"
    other = sweep / "lr2"
    real_first_missing = preflight.first_missing

    def the_other_run_starts_meanwhile(path):
        made = real_first_missing(path)  # sweep/: it does not exist yet (when first asked)
        (other / "checkpoints").mkdir(parents=True, exist_ok=True)
        (other / "checkpoints" / "last.ckpt").write_bytes(b"the other run's step 10")
        return made

    monkeypatch.setattr(preflight, "first_missing", the_other_run_starts_meanwhile)
    # 420 bytes pass the checks made before the run directory, but as ~120 words they hold no
    # window of 41 tokens: found once the text is tokenised, in the run
    assert main(["train", "lm", "--data", str(corpus), "--out", str(sweep / "lr1"),
                 "--block-size", "40", "--tokenizer", "word", "--max-steps", "2"]) == 2
    assert f"removed {sweep / 'lr1'}, so the same command" in capsys.readouterr().err
    assert (other / "checkpoints" / "last.ckpt").read_bytes() == b"the other run's step 10"
    assert sorted(p.name for p in sweep.iterdir()) == ["lr2"]


def _the_sibling_fails_while_ours_is_made(sweep, monkeypatch):
    """(sweep/lr2, the list of what the sibling removed): `--out sweep/lr2` beside `--out
    sweep/lr1`, sweep/ made by the sibling; between this run making sweep/ (there already) and
    making sweep/lr2 in it, the sibling fails and removes sweep/ as an empty parent it made."""
    sibling = sweep / "lr1"
    sibling.mkdir(parents=True)
    ours = sweep / "lr2"
    real_mkdir = pathlib.Path.mkdir
    failed = []

    def the_sibling_fails_meanwhile(self, *args, **kwargs):
        if self == ours and not failed:
            failed.append(preflight.discard_unstarted(sibling, found="new", created=sweep))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "mkdir", the_sibling_fails_meanwhile)
    return ours, failed


@pytest.mark.slow
def test_a_run_whose_shared_parent_a_failed_sibling_removes_meanwhile_still_starts(
        tmp_path, monkeypatch):
    """This run died in a traceback (exit 1) instead of training; it makes the parent
    again."""
    sweep = tmp_path / "sweep"
    ours, failed = _the_sibling_fails_while_ours_is_made(sweep, monkeypatch)
    assert main(["train", "reverse", "--out", str(ours), *TINY_REVERSE, "--max-steps", "2"]) == 0
    assert failed == [sweep]  # the sibling did remove the shared parent in between
    assert (ours / "checkpoints" / "last.ckpt").is_file()
    assert (ours / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_failed_run_removes_the_shared_parent_it_had_to_make_again(tmp_path, monkeypatch,
                                                                      capsys):
    """This run made sweep/ again, then failed too, before its first checkpoint: it left
    sweep/ behind, empty, where a run that made sweep/ at first removes it."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a few words of text. " * 20)
    sweep = tmp_path / "sweep"
    ours, failed = _the_sibling_fails_while_ours_is_made(sweep, monkeypatch)
    # ~120 words hold no window of 41 tokens: found once the text is tokenised, in the run
    assert main(["train", "lm", "--data", str(corpus), "--out", str(ours), "--block-size", "40",
                 "--tokenizer", "word", "--max-steps", "2"]) == 2
    assert failed == [sweep]  # the sibling did remove the shared parent in between
    assert f"removed {sweep}, so the same command" in capsys.readouterr().err
    assert not sweep.exists()


# ---- prepare: one corpus, prepared by tasks started together ---------------------------------

def test_a_prepare_of_an_out_another_prepare_is_writing_is_refused(tmp_path, capsys):
    """Three `attnlab prepare corpus.txt --out P` started together wrote into the same
    temporary files; the first said "prepared P", and the others' commits removed its
    meta.json (no corpus left) and ended in a traceback. P is held while a prepare writes it:
    another is refused in one line and leaves it as it was."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be\n" * 20)
    out = tmp_path / "P"
    out.mkdir()  # by the other prepare, still fitting its tokenizer: nothing written yet
    held = os.open(out, os.O_RDONLY)  # what the prepare writing there holds
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["prepare", str(corpus), "--out", str(out)]) == 2
    finally:
        os.close(held)
    err = capsys.readouterr().err
    assert err.splitlines() == [f"attnlab: error: --out {out} is in use by another attnlab "
                                f"prepare running now; wait for it to end, or choose another "
                                f"--out"], err
    assert list(out.iterdir()) == []  # nothing of this one's mixed into the other's


def test_a_prepare_that_finished_while_another_read_the_text_is_not_replaced(tmp_path,
                                                                              monkeypatch,
                                                                              capsys):
    """Both found P empty; the one that finished first left a word corpus, and the other
    replaced it with its own without --force (runs trained on the first then refuse to
    evaluate). The one that comes second is refused as P holds a corpus now."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be\n" * 20)
    out = tmp_path / "P"
    real_count = corpus_module._count_characters

    def the_other_prepare_finishes_meanwhile(*args, **kwargs):
        counted = real_count(*args, **kwargs)
        monkeypatch.setattr(corpus_module, "_count_characters", real_count)
        corpus_module.prepare([corpus], out, tokenizer="word")
        return counted

    monkeypatch.setattr(corpus_module, "_count_characters", the_other_prepare_finishes_meanwhile)
    assert main(["prepare", str(corpus), "--out", str(out), "--tokenizer", "char"]) == 2
    assert (f"attnlab: error: --out {out} already holds a prepared corpus; add --force"
            in capsys.readouterr().err)
    assert corpus_module.read_meta(out)["tokenizer"] == "word"


@pytest.mark.slow
def test_a_new_out_another_run_made_meanwhile_without_locks_is_refused(tmp_path, monkeypatch,
                                                                       capsys):
    """Array tasks given one --out (a base --config that sets `out:`), started together on
    NFS: each found it missing, each made it (`mkdir` of one that exists is no error) and all
    trained into it. The check and the `mkdir` are one step: the one that comes second is
    refused in one line and writes nothing there."""
    monkeypatch.setattr(fcntl, "flock", no_directory_locks)
    out = tmp_path / "sweep"
    real_check_cluster = preflight.check_cluster

    def the_other_run_makes_it_meanwhile(*args, **kwargs):
        # after this run found --out free, and seconds before it makes it (Lightning's import)
        (out / "logs").mkdir(parents=True, exist_ok=True)
        return real_check_cluster(*args, **kwargs)

    monkeypatch.setattr(preflight, "check_cluster", the_other_run_makes_it_meanwhile)
    assert main(["train", "reverse", "--out", str(out), *TINY_REVERSE, "--max-steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("attnlab: error:") == 1, err
    assert err.splitlines()[-1] == (f"attnlab: error: --out {out} was made by another process "
                                    f"as this run started (another attnlab train with the same "
                                    f"--out?); choose another --out"), err
    assert [p.name for p in out.iterdir()] == ["logs"]  # the other run's, as it left it


# ---- a SLURM array: one process a task, not one job of many processes -------------------------

ARRAY_TASK = {"SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "2",
              "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "0",
              "SLURM_ARRAY_TASK_MAX": "3", "SLURM_JOB_ID": "102", "SLURM_JOB_NAME": "sweep",
              "SLURM_NTASKS": "1", "SLURM_NPROCS": "1", "SLURM_PROCID": "0",
              "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NNODES": "1",
              "SLURM_JOB_NUM_NODES": "1", "SLURM_NTASKS_PER_NODE": "1",
              "SLURM_TASKS_PER_NODE": "1", "SLURM_NODELIST": "n1", "SLURM_JOB_NODELIST": "n1"}
SRUN_STEP = {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_NUM_NODES": "1",
             "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_STEP_NODELIST": "n1"}


@pytest.mark.slow
@pytest.mark.parametrize("step", [{}, SRUN_STEP], ids=["sbatch-shell", "srun"])
def test_a_slurm_array_task_trains_what_a_run_started_by_hand_does(tmp_path, monkeypatch, step):
    """Task 2 of an array of 4 is one process with the whole training set: were it taken for
    rank 2 of 4 processes, it would train on a quarter of the data (or wait for the others).
    Its weights are those of the same command started by hand, to the bit."""
    from safetensors.torch import load_file

    argv = ["train", "reverse", *TINY_REVERSE, "--max-steps", "3", "--seed", "5"]
    assert main([*argv, "--out", str(tmp_path / "by-hand")]) == 0
    for key, value in {**ARRAY_TASK, **step}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 0  # the default run directory: one process, not a job of four
    (task,) = (tmp_path / "runs").iterdir()
    by_hand, in_array = (load_file(d / "model.safetensors") for d in (tmp_path / "by-hand", task))
    assert by_hand.keys() == in_array.keys()
    for name in by_hand:
        assert torch.equal(by_hand[name], in_array[name]), name


# ---- comparing the runs: the table of docs/cli.md ---------------------------------------------

def test_the_sweep_table_of_the_docs_lines_up_real_run_names_and_skips_other_tasks(
        tmp_path, monkeypatch, capsys):
    """The loop in docs/cli.md, "Compare the runs of a sweep", padded names to 6 characters
    (runs/reverse-20261201-165510-2 pushed its row's columns out of line) and ended in a
    KeyError at a run of another task in runs/, whose metrics.json has no
    test_sequence_accuracy. Each column now starts where its header does, and that run shows
    '-'."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    section = page[page.index("### Compare the runs of a sweep"):]
    start = section.index("```python\n") + len("```python\n")
    loop = section[start:section.index("```", start)]
    runs = {"reverse-20261201-165510-2": ("0.001", '{"steps": 120, '
                                                   '"test_sequence_accuracy": 0.98}'),
            "r": ("0.01", '{"steps": 30, "test_sequence_accuracy": 1.0}'),
            "lm-20261201-170000": ("0.0003", '{"steps": 3000, "test_perplexity": 41.2}')}
    for name, (lr, metrics) in runs.items():
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "config.yaml").write_text(f"lr: {lr}\n")
        (tmp_path / "runs" / name / "metrics.json").write_text(metrics)
    (tmp_path / "runs" / "still-training").mkdir()
    monkeypatch.chdir(tmp_path)
    exec(compile(loop, "docs/cli.md", "exec"), {})
    header, *rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows] == ["lm-20261201-170000", "r",
                                                 "reverse-20261201-165510-2"]
    for column in ("lr", "steps"):  # right-aligned under their headers
        end = header.index(column) + len(column)
        assert all(row[end - 1] != " " and row[end] == " " for row in rows), (header, rows)
    assert rows[0].split()[-1] == "-" and rows[2].split()[-1] == "0.98"
