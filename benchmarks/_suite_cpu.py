"""A pytest plugin (a helper, not a benchmark) that records each test's CPU seconds, for sizing
the suite on a busy machine.

    SUITE_CPU_OUT=/tmp/cpu python -m pytest -q -n 2 -m "not slow" -p benchmarks._suite_cpu
    sort -rn /tmp/cpu/*.tsv | head -50

Why CPU and not ``--durations``: on the shared 2-core machine, with other jobs running, a test's
wall time swings tenfold with their load, while the CPU seconds it spends (its own process and
the child processes it waited for) stay close to what it costs on an idle machine. A test whose
CPU seconds are large is slow anywhere; ``--durations`` cannot tell that test from one that
merely waited.

Each pytest-xdist worker appends ``cpu_s<TAB>wall_s<TAB>node id`` lines to ``WORKER.tsv``
(module and session fixtures count in the test that first asks for them, as in ``--durations``),
its CPU seconds before collection to ``WORKER.start`` and at the end to ``WORKER.end`` (so the
collection's cost is the first test's start minus ``.start``), and to ``WORKER.imports`` the
test after which each of a few heavy packages was first found imported in that worker.
"""
from __future__ import annotations

import os
import resource
import sys
import time

import pytest

OUT = os.environ.get("SUITE_CPU_OUT", "suite_cpu")
HEAVY = ("lightning", "torch._dynamo", "transformers", "matplotlib", "sklearn")
_seen: set[str] = set()


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _write(suffix: str, text: str, mode: str = "a") -> None:
    os.makedirs(OUT, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(OUT, worker + suffix), mode, encoding="utf-8") as f:
        f.write(text)


def pytest_sessionstart(session):
    _write(".start", f"{_cpu():.3f}\n", "w")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.perf_counter()
    yield
    _write(".tsv", f"{_cpu() - cpu:.3f}\t{time.perf_counter() - wall:.3f}\t{item.nodeid}\n")
    for name in HEAVY:
        if name not in _seen and name in sys.modules:
            _seen.add(name)
            _write(".imports", f"{name}\t{item.nodeid}\n")


def pytest_sessionfinish(session):
    _write(".end", f"{_cpu():.3f}\n", "w")
