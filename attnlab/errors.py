"""User-facing errors. The CLI prints their message as one line on stderr and exits 2."""


class UsageError(Exception):
    """A usage or input error: a bad flag, value, file, column or run directory.

    The message must name the offending flag, file, column or value, e.g.
    ``UsageError("--model-dim (30) must be divisible by --num-heads (4)")``.
    """
