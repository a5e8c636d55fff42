"""``--quantize int8`` of ``generate``, ``translate`` and ``evaluate`` (lm and translate runs):
run the trained model with int8 weights in every linear layer (``attnlab.nn.quantize``).

Where it is faster depends on the model's width and, for ``translate``, on how many texts it
is given (measured by ``benchmarks/quantize_where.py``; the numbers are in
benchmarks/RESULTS.md, "quantize_where"): int8 weights save reading bytes, which
pays only once the matrix products dominate a decoding step, while a narrower model's step is
mostly Python and small kernels, and the int8 layer's per-call quantisation of its input costs
more than it saves. ``translate --quantize int8`` decodes one text at a time (its rounding is
by each call's range, so a batch would make a text's translation depend on its neighbours),
while float32 decodes them all as one batch, so several texts are slower in int8 at any width.
Each task declares its side of that rule (``Capabilities.int8_faster_from``,
``Capabilities.int8_one_at_a_time``)
and ``int8_slower`` states it once; ``generate`` and ``translate`` print its one-line note on
stderr. ``evaluate --quantize int8`` shows what int8 costs in
accuracy on your own run.
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..loading import quantize_refusal
from ..tasks import get_task

if TYPE_CHECKING:
    from ..run_config import RunSettings

QUANTIZE_CHOICES = ("int8",)


def add_quantize_flag(parser) -> None:
    parser.add_argument(
        "--quantize", choices=QUANTIZE_CHOICES, metavar="int8",
        help="run the model with int8 weights in its linear layers (CPU; faster decoding of "
             "one sequence from about 256 model dims (lm) or 384 (translate), slower below "
             "and for several texts to translate; slightly different numbers: `evaluate "
             "--quantize int8` measures them)")


def check_quantize(kind: str | None, task: str, run_dir) -> None:
    """A UsageError naming --quantize when ``kind`` is set for a run of another task."""
    why = quantize_refusal(kind, task, run_dir)
    if why:
        raise UsageError(f"--quantize {why}")



def int8_slower(task: str, width: int, texts: int = 1) -> str | None:
    """Why ``--quantize int8`` will likely be slower than float32 for a model of the task
    named ``task``, ``width`` wide, decoding ``texts`` inputs (the texts float32 would batch
    where int8 decodes them one at a time: ``Capabilities.int8_one_at_a_time``), as a note to
    print; None where int8 was measured faster (from ``Capabilities.int8_faster_from``).

    Examples:
        >>> int8_slower("lm", 384) is None
        True
        >>> int8_slower("lm", 128)  # doctest: +ELLIPSIS
        '... this model is 128 wide, and int8 decoding was faster only from 256 wide ...'
    """
    can = get_task(task).capabilities
    if can.int8_one_at_a_time and texts > 1:
        return (f"--quantize int8 is likely slower than float32 here: it translates the "
                f"{texts} texts one at a time, float32 in one batch (int8 was slower for "
                f"several texts at every width measured: benchmarks/RESULTS.md, quantize_where)")
    least = can.int8_faster_from
    if least is not None and width < least:
        return (f"--quantize int8 is likely slower than float32 here: this model is {width} "
                f"wide, and int8 decoding was faster only from {least} wide "
                f"(benchmarks/RESULTS.md, quantize_where)")
    return None


def note_if_slower(kind: str | None, task: str, cfg: RunSettings, texts: int = 1) -> None:
    """Print ``int8_slower``'s note on stderr when ``--quantize`` is set and it applies
    (``cfg``: the run's typed config, whose ``model_dim`` is the width)."""
    why = int8_slower(task, int(cfg.model_dim or 0), texts) if kind else None
    if why:
        print(f"note: {why}", file=sys.stderr, flush=True)
