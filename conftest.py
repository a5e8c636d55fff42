"""Settings of every pytest run in this repository: the tests in tests/ and the docstring
examples (``>>>``) of attnlab's modules, which ``make test`` also runs.

One thread. The tests and examples use tiny models: on a 2-core machine a second intra-op
thread only adds contention, and under pytest-xdist two workers with two threads each would
oversubscribe it (a 0.1 s Lightning fit then takes 5-10 s). So every test process, and every CLI
subprocess a test starts, uses one thread. This file is at the root, not in tests/, so that the
docstring examples get it too.

Docstring examples. Each runs in a fresh temporary working directory, so an example that reads
or writes files (``prepare(["input.txt"], "data")``, ``plot_attention(..., "attention.png")``)
writes nothing into the checkout; an example creates the input files it reads itself, so it can
be copied and run as it is. ``torch`` is in every example's namespace, as in a user's session.
Every library module's examples are collected.
"""
import os

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402  (after the environment, so the thread pools see it)

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _same_random_state():
    """Every test and example starts from seed 0 in torch's, Python's and NumPy's global
    generators. pytest-xdist hands a worker its tests as the workers free up, so which tests
    ran before one in its process, and the random state they left it, differ from run to run:
    a test that draws numbers without a seed of its own (``torch.randn`` for a model's input)
    checked different numbers each run, and a draw that fails it came one run in many. Now a
    failure reproduces, in any order (``--shuffle``), as tests/nn already did for its own."""
    import random

    import numpy

    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _doctest_in_tmp_path(request, doctest_namespace):
    if not isinstance(request.node, pytest.DoctestItem):
        return  # a test in tests/: no temporary directory is made for it
    doctest_namespace["torch"] = torch
    request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))


# Modules whose docstring examples draw figures, generate jets with Pythia or fit with
# Lightning's Trainer (seconds each, and the Trainer's import alone costs every worker seconds):
# ``make test`` runs their examples, ``make test-fast`` (``-m "not slow"``) does not collect them.
SLOW_EXAMPLES = ("attnlab/training/predictor.py", "attnlab/viz.py", "attnlab/tasks/jets/generate.py")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("markexpr", "") != "not slow":
        return None
    return True if any(str(collection_path).endswith(m) for m in SLOW_EXAMPLES) else None


# The typed run config (``attnlab.run_config.RunSettings``) is read by attribute. Its mapping
# methods (``cfg["lr"]``, ``cfg.get``, ``in``, ``keys``, ``items``) are a reading convenience for
# users' scripts and notebooks; a call from an attnlab module fails the test that makes it. A plain
# settings dict (what the checks of ``attnlab train`` read before the config is frozen, a
# ``--config`` file's values) is not the typed config, and may be read by key anywhere.
MAPPING_METHODS = ("__getitem__", "get", "__contains__", "keys", "items")


def _guard_mapping_reads(cls) -> None:
    import functools
    import sys

    def guarded(method):
        @functools.wraps(method)
        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("attnlab."):
                raise AssertionError(f"{caller} reads the typed run config as a mapping "
                                     f"({method.__name__}{args!r}); read its attributes")
            return method(self, *args, **kwargs)
        return read

    for name in MAPPING_METHODS:
        setattr(cls, name, guarded(getattr(cls, name)))


def pytest_configure(config):
    from attnlab.run_config import RunSettings

    _guard_mapping_reads(RunSettings)


# ---- a suite that passes every time (make test-stress) -------------------------------------
# `--shuffle SEED` runs the tests in an order drawn from SEED, to find a test that passes only
# after (or fails only after) another. Every pytest-xdist worker draws the same order from the
# same seed, as xdist requires; `--shuffle 0` is the order as written.
def pytest_addoption(parser):
    parser.addoption("--shuffle", type=int, default=0, metavar="SEED",
                     help="run the tests in an order drawn from SEED (0: as written)")


def pytest_report_header(config):
    seed = config.getoption("shuffle")
    return f"test order: shuffled with seed {seed}" if seed else None


def pytest_collection_modifyitems(config, items):
    seed = config.getoption("shuffle")
    if seed:
        import random

        random.Random(seed).shuffle(items)


@pytest.fixture
def spawn():
    """``spawn(argv, **popen_kwargs)`` (``subprocess.Popen``'s arguments) starts a process that
    the test ends whatever happens: at the test's end each one still running is killed and
    reaped, so a failed assertion leaves no server or training run behind to load the machine
    for the tests after it. Every test that starts a process it does not wait for at once starts
    it with this. A process started in a session of its own (``start_new_session=True``) is
    ended with every process of its group, such as the other ranks of a DDP run.

    The process gets Ctrl-C as a terminal's foreground job does, SIGINT at its default, even
    when the suite itself runs with SIGINT ignored: a shell without job control (a script's
    ``make test &``, ``nohup``, some CI runners) starts a background job so, every process it
    starts inherits that, and Python then installs no KeyboardInterrupt, so a test's "Ctrl-C"
    would reach nothing. ``ctrl_c=False`` starts it with SIGINT ignored, as such a job."""
    yield from _spawning()


@pytest.fixture(scope="session")
def spawn_session():
    """``spawn`` for a process that serves a worker's whole session (a fork server of
    tests/forkserver.py: tests/conftest.py's ``forks``, tests/test_notebooks.py's ``kernel``):
    ended at the session's end."""
    yield from _spawning()


def _spawning():
    """The processes of ``spawn`` and ``spawn_session``."""
    import signal
    import subprocess

    started: list[subprocess.Popen] = []
    own_group: dict[int, bool] = {}

    def start(*args, ctrl_c: bool = True, **kwargs):
        # A handler set here is reset to the default in the new program (exec keeps only an
        # ignored signal ignored); only the main thread may set one, as pytest's tests run.
        previous = signal.signal(signal.SIGINT,
                                 signal.default_int_handler if ctrl_c else signal.SIG_IGN)
        try:
            proc = subprocess.Popen(*args, **kwargs)
        finally:
            signal.signal(signal.SIGINT, previous)
        started.append(proc)
        own_group[proc.pid] = bool(kwargs.get("start_new_session")
                                   or kwargs.get("process_group") == 0)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        if own_group[proc.pid]:  # every process of its group (DDP's other ranks), also
            try:                 # when the first has exited
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate()  # reaps it and closes its pipes
