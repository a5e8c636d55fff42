"""Benchmarks: timing and memory scripts, not tests. Run them all with ``python -m benchmarks``."""
