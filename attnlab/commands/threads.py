"""``--threads N`` of the commands that run a trained model: ``predict``, ``evaluate``,
``translate``, ``generate``, ``view`` and ``plot attention``.

torch starts one thread per core, which is not what these commands want. Measured with
``benchmarks/inference_threads.py`` for causal language models of 0.15 M to 57 M parameters on
a 2-core machine, two threads against one (the numbers: benchmarks/RESULTS.md,
"inference_threads"):

- a forward pass over a batch (16 windows of 128 tokens: ``evaluate``, many inputs of a
  classifier) is faster on two threads at every size, when the machine is otherwise idle;
- decoding 16 sequences together token by token (many inputs of ``translate``) is faster on
  two threads from 3 M parameters up, but not below 1 M: the products are too small to share
  out;
- decoding one sequence (``generate``, one input) gains nothing from a second thread at any
  size;
- with another process busy on one core, two threads are slower at everything: the threads
  wait for each other.

So without ``--threads``: one thread on a busy machine (the 1-minute load average leaves less
than one core idle) or for one sequence; one per idle core (two on an idle 2-core machine) for a
batched forward pass, and for batched decoding of a model of at least ``DECODE_PARAMETERS``
parameters (read from the run's metrics.json). Only one and two threads were measured: on a
larger machine the idle cores are a guess that keeps torch's own default when nothing else runs.

Nothing here imports torch until a number is applied, so argument errors stay fast.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..settings import MAX_THREADS, ModelRunSettings, add_flags, check

DECODE_PARAMETERS = 2_000_000  # between the sizes measured: 0.9 M (no gain), 3.4 M (a gain)
WORK = ("one", "forward", "decode")  # one sequence; a batched forward pass; batched decoding


def add_threads_flag(parser) -> None:
    add_flags(parser, ModelRunSettings)


def check_threads(value: int | None) -> None:
    """A UsageError naming --threads unless it is absent or 1..MAX_THREADS (its declaration,
    ``attnlab.settings.threads_setting``, which ``attnlab train --threads`` checks too)."""
    check(ModelRunSettings, {"threads": value})


def run_parameters(run_dir: Path) -> int | None:
    """The parameter count a run recorded in metrics.json, or None if it has none."""
    try:
        value = json.loads((Path(run_dir) / "metrics.json").read_text()).get("parameters")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def default_threads(work: str, parameters: int | None = None, *, cores: int | None = None,
                    load: float | None = None) -> int:
    """The thread count for ``work`` (one of ``WORK``) with a model of ``parameters``, on
    ``cores`` cores at ``load`` (the 1-minute load average; both default to this machine's).

    Examples:
        >>> default_threads("forward", cores=2, load=0.1)
        2
        >>> default_threads("one", cores=2, load=0.1)  # token by token
        1
        >>> default_threads("decode", 900_000, cores=2, load=0.1), default_threads(
        ...     "decode", 3_000_000, cores=2, load=0.1)
        (1, 2)
        >>> default_threads("forward", cores=2, load=1.5)  # another job holds a core
        1
        >>> default_threads("forward", cores=16, load=4.2)  # twelve cores idle
        12
    """
    if work not in WORK:
        raise ValueError(f"work must be one of {WORK}, got {work!r}")
    cores = cores if cores is not None else (os.cpu_count() or 1)
    load = load if load is not None else os.getloadavg()[0]
    idle = cores - load
    if idle < 1.0 or work == "one":
        return 1
    if work == "decode" and (parameters is None or parameters < DECODE_PARAMETERS):
        return 1
    return max(1, min(cores, round(idle)))


def use_threads(args, work: str, run_dir: Path) -> int:
    """Apply ``args.threads`` (checked), or the default for ``work`` with the run in
    ``run_dir``; returns the number of threads torch now uses."""
    import torch

    check_threads(args.threads)
    threads = args.threads or default_threads(work, run_parameters(run_dir))
    torch.set_num_threads(threads)
    return threads
