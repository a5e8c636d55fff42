"""User-facing errors. The CLI prints their message as one line on stderr and exits 2 (a
``UsageError``), 128 + the signal number (an ``Interrupted`` run, as a shell reports it) or
the status a ``RankFailed`` gives."""
import signal

# The signals that stop a command as ``Interrupted`` rather than killing it at once, so that it
# saves (train: the step's checkpoint) or undoes what it half wrote: SIGTERM (``kill``, a batch
# scheduler's stop) and SIGHUP (the terminal closed, an ssh session dropped; absent on
# Windows). SIGINT is Python's KeyboardInterrupt, which train's loop takes over too.
TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                    if hasattr(signal, name))


def first_few(names, shown: int = 3) -> str:
    """The first ``shown`` of ``names`` and how many more, as a one-line error lists missing
    columns or tensors.

    Examples:
        >>> first_few(["a", "b", "c", "d", "e"])
        'a, b, c and 2 more'
    """
    names = list(names)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{', '.join(names[:shown])}{more}"


class UsageError(Exception):
    """A usage or input error: a bad flag, value, file, column or run directory.

    The message must name the offending flag, file, column or value, e.g.
    ``UsageError("--model-dim (30) must be divisible by --num-heads (4)")``.
    """


class Interrupted(BaseException):
    """A command stopped by a signal (SIGINT from Ctrl-C, SIGTERM from a batch scheduler,
    SIGHUP from a closed terminal).

    The message is the one line the user reads, e.g. ``"interrupted at step 120 of 600;
    continue with: attnlab train reverse --out runs/r --resume"``; the process exits with
    ``128 + signum`` (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

    A ``BaseException``, as ``KeyboardInterrupt`` is: a SIGTERM that arrives while a reader's
    ``except Exception`` guards a load (a checkpoint, a tokenizer, a GGUF file) stops the
    command rather than being taken for that file's error, or swallowed.
    """

    def __init__(self, message: str, signum: int, *, checkpointed: bool = False,
                 quiet: bool = False) -> None:
        super().__init__(message)
        self.signum = int(signum)
        self.checkpointed = checkpointed  # a checkpoint of the interrupted step was written
        self.quiet = quiet  # exit with the code but print nothing (a DDP rank but rank 0)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class RankFailed(Exception):
    """Another process of a DDP run (a rank) ended in error: before it joined the others, or
    while the run trained (killed by a signal, or exited on an error of its own).

    Not the user's input: the CLI prints the message as one line and exits 1 (an internal
    fault: a bug, an import error, a kill for lack of memory; the rank's own traceback says
    which). Where the rank itself exited 2, its own line already named the usage error: the
    CLI then exits 2 and prints nothing more (``quiet``). ``quiet`` also on a process other
    than rank 0 (torchrun and srun start each process, and each hears of the death): rank 0
    says it, once.
    """

    def __init__(self, message: str, *, exit_code: int = 1, quiet: bool | None = None) -> None:
        super().__init__(message)
        self.exit_code = 2 if exit_code == 2 else 1
        self.quiet = self.exit_code == 2 if quiet is None else quiet  # said elsewhere, once
