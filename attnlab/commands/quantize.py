"""``--quantize int8`` of ``generate``, ``translate`` and ``evaluate`` (lm and translate runs):
run the trained model with int8 weights in every linear layer (``attnlab.nn.quantize``).

Measured by ``benchmarks/quantize_int8.py`` (numbers in benchmarks/RESULTS.md): greedy
generation at batch 1 several times faster than float32 on the same weights, with validation
perplexity within 1%. ``evaluate --quantize int8`` shows what it costs on your own run.
"""
from __future__ import annotations

from ..errors import UsageError

QUANTIZE_CHOICES = ("int8",)
QUANTIZE_TASKS = ("lm", "translate")


def add_quantize_flag(parser) -> None:
    parser.add_argument(
        "--quantize", choices=QUANTIZE_CHOICES, metavar="int8",
        help="run the model with int8 weights in its linear layers (CPU; faster decoding, "
             "slightly different numbers: `evaluate --quantize int8` measures them)")


def quantize_refusal(kind: str | None, task: str, run_dir) -> str | None:
    """Why ``kind`` cannot apply to a run of ``task`` (to follow the option's name), or None."""
    if kind is None or task in QUANTIZE_TASKS:
        return None
    return f"is for {' and '.join(QUANTIZE_TASKS)} runs; {run_dir} is a {task} run"


def check_quantize(kind: str | None, task: str, run_dir) -> None:
    """A UsageError naming --quantize when ``kind`` is set for a run of another task."""
    why = quantize_refusal(kind, task, run_dir)
    if why:
        raise UsageError(f"--quantize {why}")
