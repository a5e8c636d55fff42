"""The other DDP processes of a run that Lightning's launcher starts from this one, and how they end.

``attnlab train --devices N`` on one machine is rank 0; at ``launch`` Lightning starts ranks 1 to
N-1 as copies of the same command (``subprocess.Popen``) and a thread that watches them
(``_ChildProcessObserver``): when one of them exits with an error, it kills the others and this
process with SIGKILL, since a rank that is gone leaves the rest waiting in their next collective.
That watch could not tell a rank that failed from one that rank 0 itself stopped: a SIGTERM to
rank 0 while the ranks were starting (``kill``, a scheduler's stop) ended rank 0, rank 1 then
failed to join (a traceback), and the watch killed rank 0 in the middle of removing its
half-made run directory (exit 137, a ``config.yaml`` left for ``--resume`` to take for a run).

Here rank 0 ends the others itself whenever it stops (``end``), before it reports or cleans up,
and the watch stands aside from then on. A rank that fails on its own is still Lightning's
case: the others and rank 0 are killed, as before.

A rank that dies while the run trains (``kill -9``, killed for memory) breaks the collective rank
0 is in: gloo raised its "Connection reset by peer" traceback, which names no rank, or
Lightning's watch, polling, got there first and killed rank 0 without a word (exit 137). Both
ways now end in the one line of ``_failure``, the step and where to go on from in it
(``where``), exit 1: rank 0's broken collective (``failed``, which looks only at an error of
torch's collectives, ``broken_collective``: an error every rank raised is rank 0's own to
say), or the watch, after giving rank 0 ``DEATH_GRACE`` seconds to say it first (NCCL can
wait in a broken collective for good).

Nor could rank 0 hear a signal while it waited for the others to join: torch's join waits in
C++, where Python's signal handlers do not run, so a SIGTERM to every process (a scheduler's
stop) killed a rank that was still starting, and rank 0, deaf until that rank joined, which it
never would, was killed by the watch. Rank 0 now waits, in Python, until each rank says it is
about to join (``joining``) or has ended, and only then joins.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..errors import Interrupted, RankFailed
from ..settings import later_process

__all__ = ["launching", "joining", "end", "agreed", "quiet", "failed", "elsewhere", "where", "after",
           "broken_collective", "ENDING_GRACE", "DEATH_GRACE", "JOINING"]

# seconds the other ranks get to end by themselves after a stop all ranks agreed on (a signal
# in the loop: every rank saved the step and leaves): they have nothing left to write
ENDING_GRACE = 30.0
# seconds rank 0 has, once a rank is seen dead, to hear it from its collective and say it (the
# watch says it otherwise); and its broken collective to see the rank's process reaped (the
# connection breaks as the process dies, a moment before it can be)
DEATH_GRACE = 5.0
RANK_ZERO_TIMEOUT = 1800.0  # seconds: torch's own default wait for the processes of a group

_LOCK = threading.Lock()  # held while the watch looks at the ranks, and while rank 0 ends them
_ENDING = threading.Event()  # rank 0 is ending the run: a rank that exits is not a failure
_PROCS: list[subprocess.Popen] = []  # the ranks Lightning's launcher started from this process
_WHERE: list = [lambda: ""]  # what the line of a dead rank adds: the step, where to go on from
_AFTER: list = [lambda failure: failure]  # what the watch does before it says that line
# the variable naming the folder (private to this launch, on this machine) in which each rank
# Lightning's launcher starts says, by a file named by its LOCAL_RANK, that it is joining
JOINING = "ATTNLAB_JOINING"


def _watch(child_processes: list[subprocess.Popen]) -> None:
    """Lightning's ``_launch_process_observer`` in its place: its watch, which stands aside once
    rank 0 ends the run itself (``end``)."""
    script = importlib.import_module("lightning_fabric.strategies.launchers.subprocess_script")

    class Watch(script._ChildProcessObserver):
        def _run(self) -> bool:
            return _look(self._child_processes, super()._run)

    _ENDING.clear()
    _PROCS[:] = child_processes
    _until_joining(child_processes, os.environ.get(JOINING))
    Watch(main_pid=os.getpid(), child_processes=child_processes).start()


def _look(procs: list[subprocess.Popen], theirs) -> bool:
    """One look of the watch at the ranks; True once it has nothing more to watch. A rank
    that died: rank 0 gets ``DEATH_GRACE`` seconds to say it (``failed``) or to be ending
    anyway (``end``); else it waits in a collective that will not end, and the watch says it,
    in the same words, and ends the run (``_stop_all``). Else Lightning's look (``theirs``)."""
    with _LOCK:
        if _ENDING.is_set():
            return True
        dead = _dead(procs)
        if dead is None:
            return theirs()
    if _ENDING.wait(DEATH_GRACE):
        return True
    with _LOCK:
        if _ENDING.is_set():
            return True
        _ENDING.set()
    _stop_all(procs, _failure(*dead))
    return True


def _stop_all(procs: list[subprocess.Popen], failure: RankFailed) -> None:
    """The watch's end of a run whose rank 0 cannot hear that a rank died: the other ranks
    killed, what the run leaves done (``after``: a run with nothing saved is removed, as where
    rank 0 hears it), ``failure``'s line (none where it is ``quiet``: a rank that said its own
    usage error, as the CLI leaves it), and this process's exit with its status (where
    Lightning's watch killed rank 0 with SIGKILL, without a word)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    try:
        failure = _AFTER[0](failure)
    finally:  # whatever went wrong there, the line is said and the run ends
        if not failure.quiet:
            print(f"attnlab: {failure}", file=sys.stderr, flush=True)
        os._exit(failure.exit_code)


def after(done) -> None:
    """``done(failure)``: what rank 0 does with a run whose rank died, before its line is said
    (``attnlab train`` removes a run with nothing saved), and the ``RankFailed`` it says then;
    the watch calls it where rank 0, waiting in a collective, cannot."""
    _AFTER[0] = done


def _how(code: int) -> str:
    """How a process ended, from its exit status (``Popen.returncode``)."""
    return (f"was killed by {signal.Signals(-code).name}" if code < 0
            else f"exited with status {code}")


def _dead(procs: list[subprocess.Popen]) -> tuple[int, subprocess.Popen] | None:
    """(rank, process) of the rank of ``procs`` (rank 1, 2, ...) that has ended in error: the
    first killed by a signal, the one that died (the others may since have exited with status
    1 on the collective its death broke), else the first in order."""
    ended = [(rank, proc) for rank, proc in enumerate(procs, start=1) if proc.poll()]
    return min(ended, key=lambda ended: ended[1].returncode > 0, default=None)


def _failure(rank: int, proc: subprocess.Popen) -> RankFailed:
    """The one line of a rank that ended while the run trained, whichever way rank 0 learns
    of it (its broken collective, ``failed``; the watch); exit 1, or 2 where the rank exited
    2 having said its usage error (``RankFailed.quiet``). A rank killed by a signal: the step
    and the command that continues the run (``where``); one that exited on its own error:
    that error, above, says what to fix before any --resume."""
    if proc.returncode > 0:
        return RankFailed(f"rank {rank} of this run (process {proc.pid}) "
                          f"{_how(proc.returncode)} during training (its error is above); the "
                          f"others were stopped", exit_code=proc.returncode)
    return RankFailed(f"rank {rank} of this run (process {proc.pid}) {_how(proc.returncode)} "
                      f"during training{_WHERE[0]()}", exit_code=proc.returncode)


def where(said) -> None:
    """``said()``: what the line of a rank that died adds (the loop's step and its last
    checkpoint), asked when the line is said."""
    _WHERE[0] = said


def broken_collective(error: BaseException) -> bool:
    """Whether ``error`` is one of torch's collectives failing on another process's end
    (NCCL's ``DistBackendError``; gloo's ``RuntimeError`` of its TCP transport, "Connection
    reset by peer"): only such an error may be a rank's death, never the task's own.

    Examples:
        >>> broken_collective(RuntimeError("[third_party/gloo/gloo/transport/tcp/pair.cc:537] "
        ...                                "Read error: Connection reset by peer"))
        True
        >>> broken_collective(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
        False
    """
    import torch.distributed as dist

    return (isinstance(error, getattr(dist, "DistError", ()))
            or isinstance(error, RuntimeError) and "gloo/transport" in str(error))


def failed(error: BaseException, *, grace: float = DEATH_GRACE) -> RankFailed | None:
    """In rank 0, after ``error`` stopped its training: the ``RankFailed`` of a rank launched
    from here that died, when ``error`` is the collective its death broke
    (``broken_collective``) and the rank is seen ended within ``grace`` seconds; else None
    (the error is rank 0's to report as it is). The watch stands aside from then on. Where
    torchrun or srun started the processes (none launched from here to look at):
    ``elsewhere``."""
    if not _PROCS or not broken_collective(error):
        return None
    deadline = time.monotonic() + grace
    while (dead := _dead(_PROCS)) is None:
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    with _LOCK:
        if _ENDING.is_set():  # the watch said it, and ends this process
            return None
        _ENDING.set()
    return _failure(*dead)


def elsewhere(error: BaseException, launch: str | None) -> RankFailed | None:
    """The ``RankFailed`` of a process that torchrun or srun started with this one (``launch``:
    ``hardware.launch_id``, None where they did not) and that ended while the run trained,
    when ``error`` is the collective its end broke; else None. Which process, and how it
    ended, only the launcher knows (it names them in its own lines, and stops the others):
    gloo's "Connection closed by peer" traceback, all rank 0 said, named neither.

    Examples:
        >>> elsewhere(RuntimeError("mat1 and mat2 shapes cannot be multiplied"), "srun job 7")
        >>> elsewhere(RuntimeError("gloo/transport/tcp/pair.cc: Connection closed"), None)
    """
    if launch is None or _PROCS or not broken_collective(error):
        return None
    return RankFailed(f"another process of this run ended during training (its collective "
                      f"broke; {launch.split()[0]} names which, and how){_WHERE[0]()}")


def _until_joining(procs: list[subprocess.Popen], folder: str | None, poll: float = 0.1,
                   timeout: float | None = None) -> None:
    """Wait, where a signal raises, until each of ``procs`` (rank 1, 2, ...) says that it is
    joining (a file named by its rank in ``folder``); a ``RankFailed`` naming a rank that ended
    before: exit 1 (it crashed, or was killed), or 2 where the rank exited 2, having said the
    usage error in its own line; or one that has not said it within ``timeout`` seconds
    (default ``RANK_ZERO_TIMEOUT``, torch's own wait for a join): a rank hanging before it
    joins left an unattended job waiting forever."""
    timeout = RANK_ZERO_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while folder:
        said = set(os.listdir(folder))
        for rank, proc in enumerate(procs, start=1):
            code = proc.poll()
            if str(rank) not in said and code is not None:
                raise RankFailed(f"rank {rank} of this run (process {proc.pid}) {_how(code)} "
                                 f"before it joined the others", exit_code=code)
        late = [rank for rank in range(1, len(procs) + 1) if str(rank) not in said]
        if not late:
            return
        if time.monotonic() > deadline:
            proc = procs[late[0] - 1]
            raise RankFailed(f"rank {late[0]} of this run (process {proc.pid}) did not join the "
                             f"others within {timeout:g} s")
        time.sleep(poll)


def joining() -> None:
    """In a rank that Lightning's launcher started from rank 0 (``launching``): say that it is
    joining, so that rank 0 joins too."""
    folder, rank = os.environ.get(JOINING), os.environ.get("LOCAL_RANK", "0")
    if folder and rank != "0":
        with contextlib.suppress(OSError):  # rank 0 has ended meanwhile: it hears no more
            Path(folder, rank).touch()


@contextlib.contextmanager
def launching(others: bool = True):
    """While Lightning launches the other ranks: they are watched by ``_watch``; and if this
    process stops before all have joined (a signal, a port in use), they are ended with it.
    ``others``: whether this launch starts other processes at all; one process makes no
    folder for them (a full or unusable $TMPDIR stops no run of one process)."""
    script = importlib.import_module("lightning_fabric.strategies.launchers.subprocess_script")
    theirs = script._launch_process_observer
    script._launch_process_observer = _watch
    folder = (tempfile.mkdtemp(prefix="attnlab-joining-") if others and not later_process()
              else None)
    if folder:
        os.environ[JOINING] = folder  # the ranks started inherit it
    try:
        yield
    except BaseException:
        end()
        raise
    finally:
        script._launch_process_observer = theirs
        if folder:
            os.environ.pop(JOINING, None)
            shutil.rmtree(folder, ignore_errors=True)


def end(grace: float = 0.0) -> None:
    """End the ranks this process launched (none where it launched none: one process, or
    torchrun's and srun's, which start every rank themselves), waiting up to ``grace`` seconds
    for them to end by themselves: after a stop that all ranks agreed on, they leave; after one
    that only this process knows of, they would wait for it in a collective, or fail to join,
    each printing its traceback. A rank killed here prints nothing."""
    with _LOCK:
        _ENDING.set()
    deadline = time.monotonic() + grace
    try:
        for proc in _PROCS:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:  # a second Ctrl-C while waiting: the rest now
        for proc in _PROCS:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _PROCS.clear()


def agreed(error: BaseException) -> bool:
    """Whether ``error`` is a stop that every rank agreed on (a signal in the loop, the step
    saved: ``_Signals.stopped`` marks it), after which the other ranks end by themselves."""
    return bool(getattr(error, "agreed", False))


def quiet(error: BaseException) -> BaseException:
    """``error`` as a process other than rank 0 ends with it: an interruption (Ctrl-C, which the
    terminal sends to every rank; SIGTERM, which a scheduler sends to every task) or another
    process's death (``elsewhere``: under torchrun or srun every process hears of it) with its
    exit status but without its line, which rank 0 says, once; any other error as it is.

    Examples:
        >>> quiet(KeyboardInterrupt()).quiet, quiet(KeyboardInterrupt()).exit_code
        (True, 130)
        >>> quiet(RankFailed("another process of this run ended")).quiet
        True
        >>> quiet(ValueError("x"))
        ValueError('x')
    """
    if isinstance(error, KeyboardInterrupt):
        return Interrupted("interrupted", signal.SIGINT, quiet=True)
    if isinstance(error, Interrupted) and not error.quiet:
        return Interrupted(str(error), error.signum, checkpointed=error.checkpointed, quiet=True)
    if isinstance(error, RankFailed) and not error.quiet:
        return RankFailed(str(error), exit_code=error.exit_code, quiet=True)
    return error
