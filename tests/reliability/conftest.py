"""Tiny trained runs shared by the reliability tests (trained once per worker): one bf16-mixed
run of each training task but reverse (``task_runs``; the reversal run, ``reverse_run``, is
tests/conftest.py's, shared with tests/cli)."""
import csv
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from attnlab.cli import main

# The environment's console script, the `attnlab` a user runs (Lightning relaunches it for rank 1)
ATTNLAB = Path(sys.executable).with_name("attnlab")

TINY_REVERSE = ["--max-steps", "30", "--train-size", "256", "--val-size", "32", "--test-size",
                "64", "--model-dim", "16", "--num-heads", "1", "--batch-size", "32",
                "--val-every", "10", "--checkpoint-every", "10"]

# Tiny settings per task (a width-16 model, a few dozen steps), for runs that only have to
# finish and write a valid run directory. {data} is the task's input file.
TINY = {
    "anomaly": "--train-sets 256 --val-sets 32 --test-sets 64 --set-size 5 --batch-size 16",
    "classify": "--data {data} --batch-size 16",
    "tag": "--data {data} --batch-size 16",
    "translate": "--max-number 1000 --test-size 40 --val-size 16 --num-layers 1 --batch-size 16",
    "lm": "--data {data} --num-layers 1 --batch-size 8 --block-size 16 --val-batches 2",
}
TINY_MODEL = "--model-dim 16 --num-heads 2 --dim-feedforward 32 --warmup 5 --threads 1"


def train_losses(run):
    """The training losses a run logged, in order (its logs/metrics.csv)."""
    with open(run / "logs" / "metrics.csv", newline="") as f:
        return [float(r["train_loss"]) for r in csv.DictReader(f) if r["train_loss"]]


def write_reviews(path, rows=120):
    """A two-class CSV (columns text, label) that a tiny classifier can learn."""
    rng = random.Random(0)
    words = {"pos": ["great", "lovely", "superb"], "neg": ["awful", "dull", "poor"]}
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for i in range(rows):
            label = ("pos", "neg")[i % 2]
            w.writerow([f"the film was {rng.choice(words[label])} {rng.choice(['', 'really'])}",
                        label])
    return path


def write_corpus(path):
    """A small text file for the lm task (a few thousand characters)."""
    line = "the quick brown fox jumps over the lazy dog; attention is all you need.\n"
    path.write_text(line * 60)
    return path


def write_people(path, sentences=120):
    """A CoNLL file for the tag task: sentences whose capitalised words are B-PER."""
    rng = random.Random(0)
    names, words = ["John", "Mary", "Rome", "Paris"], ["lives", "in", "the", "city", "and"]
    with open(path, "w") as f:
        for _ in range(sentences):
            for w in (rng.choice(names + words) for _ in range(rng.randint(2, 6))):
                f.write(f"{w} {'B-PER' if w[0].isupper() else 'O'}\n")
            f.write("\n")
    return path


def task_data(tmp):
    return {"classify": write_reviews(tmp / "reviews.csv"), "lm": write_corpus(tmp / "corpus.txt"),
            "tag": write_people(tmp / "people.conll")}


def tiny_args(task, data, *extra):
    return [*TINY[task].format(data=data.get(task)).split(), *TINY_MODEL.split(), *extra]


def _ddp_command(task, out, *args):
    """The command and environment of ``attnlab train TASK`` with two DDP processes on CPU: the
    environment's ``attnlab`` console script, as a user runs it, so that Lightning starts the
    second process as it does a user's (``python ATTNLAB ...``, not ``python -m attnlab``)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("ATTNLAB_RUN_DIR", None)
    return ([str(ATTNLAB), "train", task, "--out", str(out), "--devices", "2",
             "--strategy", "ddp", "--accelerator", "cpu", *args], env)


# How train_ddp gets the worker's fork server (tests/conftest.py's ``forks``), for the test
# that runs (``_fork_server``): started at the first DDP run of the worker, not before.
_forks = None


@pytest.fixture(autouse=True)
def _fork_server(request):
    global _forks
    _forks = lambda: request.getfixturevalue("forks")  # noqa: E731
    yield
    _forks = None


def train_ddp(task, out, *args):
    """``attnlab train TASK`` with two DDP processes on CPU (gloo), in real processes forked
    from the worker's fork server (tests/forkserver.py), so that neither pays for the imports
    (most of such a run's time); each process still runs the command as a fresh ``attnlab``
    would, Lightning starting the second with ``python ATTNLAB ...`` (the server's shim). A cold
    start of both, Lightning relaunching the console script as it does a user's, is
    ``start_ddp``'s, which signals the ranks of a run of its own."""
    command, env = _through_the_fork_server(*_ddp_command(task, out, *args))
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def _through_the_fork_server(command, env, where=None):
    """``attnlab ...`` (the console script, or ``python -m attnlab``) as the fork server's
    ``attnlab`` (``where``: the ``forks`` fixture's directory, for a fixture to pass; else the
    running test's); left as it is when the server is gone (killed, crashed: a warning names its log), so that one lost server does not
    fail every DDP test after it."""
    from .. import forkserver

    if where is None:
        if _forks is None:
            return command, env
        where = _forks()
    if not forkserver.serving(where):
        warnings.warn(f"the fork server has stopped (its log: {os.path.join(where, 'server.log')})"
                      "; DDP runs start as the plain `attnlab`")
        return command, env
    env = dict(env, PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]))
    # the arguments after the console script, or after `python -m attnlab`
    args = command[3:] if list(command[1:3]) == ["-m", "attnlab"] else command[1:]
    return [os.path.join(where, "attnlab"), *args], env


def start_ddp(spawn, task, out, *args):
    """``attnlab train TASK`` with two DDP processes, started by the ``spawn`` fixture, not
    waited for: in a session of its own, so that the test's end kills both ranks whatever
    happened; its stderr a pipe of text. Both processes start cold, as a user's do: the console
    script, then Lightning's ``python ATTNLAB ...`` for the second (the DDP path DESIGN.md
    says is tested here)."""
    command, env = _ddp_command(task, out, *args)
    return spawn(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                 start_new_session=True)


@pytest.fixture(scope="session")
def task_runs(tmp_path_factory):
    """{task: run directory} of a finished --precision bf16-mixed run of each task but reverse."""
    tmp = tmp_path_factory.mktemp("task_runs")
    data = task_data(tmp)
    runs = {}
    for task in TINY:
        runs[task] = tmp / task
        argv = ["train", task, "--out", str(runs[task]), "--precision", "bf16-mixed",
                "--max-steps", "40", *tiny_args(task, data)]
        assert main(argv) == 0, argv
    return runs


# root without the capabilities that let it read, list and write past a directory's mode:
# what any other owner of the files is
AS_AN_OWNER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner",
               "--inh-caps=-all"]


def as_an_owner(tmp_path, *argv):
    """``attnlab ARGV`` in a process of its own run as an owner other than root (``setpriv``
    dropping root's capabilities; a user not root already is one): its completed process,
    stdout and stderr text. Skips where ``setpriv`` is missing or cannot drop them."""
    closed = tmp_path / "as-an-owner"
    closed.mkdir(mode=0)
    try:
        probe = subprocess.run([*AS_AN_OWNER, sys.executable, "-c",
                                f"import os; os.listdir({str(closed)!r})"],
                               capture_output=True, text=True)
    except OSError:
        pytest.skip("no setpriv here")
    finally:
        closed.rmdir()
    if probe.returncode == 0:
        pytest.skip("setpriv cannot drop root's capabilities here")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        os.environ.get("PYTHONPATH")]))}
    env.pop("ATTNLAB_RUN_DIR", None)
    return subprocess.run([*AS_AN_OWNER, sys.executable, "-m", "attnlab", *argv],
                          capture_output=True, text=True, env=env)
