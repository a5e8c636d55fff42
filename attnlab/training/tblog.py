"""The training log as TensorBoard event files, in the run's ``logs/`` beside ``metrics.csv``.

Every number of a CSV row is a scalar at the row's step, its tag the column's name grouped
the way TensorBoard shows groups (``tag``): ``val_loss`` is ``val/loss``, ``train_loss``
``train/loss``, and the other numbers of a training row (``lr``, ``grad_norm``,
``samples_per_second`` ...) ``train/lr`` and so on. ``train_seconds`` stays in the CSV: the
event files carry their own wall time. TensorBoard keeps a scalar as a float32.

``tensorboard --logdir runs`` then shows every run directory under ``runs`` as a run of its
own (``reverse-.../logs``), so runs compare side by side.

A resumed run writes a new event file (TensorBoard reads a folder's files in name order, as one
run). Its first event says that it starts after the checkpoint's step (TensorBoard's "session
start" at ``purge_step``): TensorBoard then hides what the interrupted process logged after
its checkpoint, which the resumed process logs again, so no step shows twice.

``torch.utils.tensorboard`` is imported when training starts: commands that do not train never
load it.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from ..runs import naming

__all__ = ["TensorBoardLog", "tag"]

GROUPS = ("train", "val")  # column prefixes that become TensorBoard's groups
EVENT_FILES = "events.out.tfevents.*"


def tag(column: str) -> str:
    """The TensorBoard tag of a CSV column: ``val_NAME`` -> ``val/NAME``, ``train_NAME`` ->
    ``train/NAME``, any other column (a number of the training step) -> ``train/COLUMN``.

    Examples:
        >>> tag("val_seq_acc"), tag("train_loss"), tag("grad_norm")
        ('val/seq_acc', 'train/loss', 'train/grad_norm')
    """
    group, _, name = column.partition("_")
    return f"{group}/{name}" if group in GROUPS and name else f"train/{column}"


class TensorBoardLog:
    """Rows written as TensorBoard scalars to a new event file in ``log_dir``, made at ``begin``
    (or the first row) and flushed after each row (a killed run keeps every row logged before
    it, as the CSV does).

    Args:
        log_dir: the run's ``logs/`` folder.
    """

    def __init__(self, log_dir: str | Path) -> None:
        self.log_dir = Path(log_dir)
        self.first_step = 0
        self._writer = None
        self._failed = False

    def begin(self, step: int) -> None:
        """This process trains from ``step``: a resumed run's earlier event files show nothing
        after it. The file is made now, before the training clock starts (importing
        TensorBoard takes a moment that is not training)."""
        self.first_step = step
        self._writer or self._open()

    def write(self, step: int, metrics: dict[str, float], *, seconds: float) -> None:
        """The numbers of a row at ``step`` (``seconds`` is the CSV's, not written here)."""
        writer = self._writer or self._open()
        try:
            for column, value in metrics.items():
                writer.add_scalar(tag(column), value, step)
            writer.flush()
        except OSError as e:  # a full disk: raised by TensorBoard's writer thread, unnamed
            self._failed = True
            raise naming(e, self._file()) from None

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except OSError as e:
                if not self._failed:  # (else said already, by the write that failed)
                    raise naming(e, self._file(writer)) from None

    def _open(self):
        from torch.utils.tensorboard import SummaryWriter

        _after_earlier_files(self.log_dir)
        _quiet_writer_threads()
        # purge_step: events of earlier files at this step or later are hidden (the steps of an
        # interrupted process after its checkpoint, which this one trains again)
        try:
            self._writer = SummaryWriter(str(self.log_dir), purge_step=self.first_step + 1)
        except OSError as e:
            raise naming(e, self.log_dir) from None
        return self._writer

    def _file(self, writer=None) -> Path:
        """The event file being written (the folder, should TensorBoard's internals change)."""
        writer = writer or self._writer
        name = getattr(getattr(getattr(writer, "file_writer", None), "event_writer", None),
                       "_file_name", None)
        return Path(name) if name else self.log_dir


def _quiet_writer_threads() -> None:
    """TensorBoard writes events from a thread of its own, whose ``OSError`` (a full disk)
    printed that thread's traceback, and is then raised again in the training thread at the
    next flush, where the command line says it in one line, naming the file. Other threads'
    errors print as before."""
    hook = threading.excepthook
    if getattr(hook, "_attnlab_tensorboard", False):
        return

    def excepthook(args) -> None:
        if not (issubclass(args.exc_type, OSError)
                and type(args.thread).__name__ == "_AsyncWriterThread"):
            hook(args)

    excepthook._attnlab_tensorboard = True
    threading.excepthook = excepthook


def _after_earlier_files(log_dir: Path) -> None:
    """Wait until a new event file's name sorts after every earlier one in ``log_dir``.

    TensorBoard reads a run's files in name order, and a name starts with the second the file
    was made (``events.out.tfevents.<seconds>.<host>.<pid>...``): of two files made in the
    same second, the resumed one could be read first, and its purge would then come before
    the events it hides. Only a resume within a second of the interruption waits (tests do).
    """
    made = [int(p.name.split(".")[3]) for p in log_dir.glob(EVENT_FILES)
            if p.name.split(".")[3].isdecimal()]
    while made and int(time.time()) <= max(made):
        time.sleep(0.05)
