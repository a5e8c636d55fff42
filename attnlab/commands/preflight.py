"""Checks ``attnlab train`` makes before anything is written.

Every check here is cheap and imports neither torch nor Lightning, so a mistake in ``--out``,
``--resume`` or ``--num-nodes`` is reported in about a second, with exit 2, before a run
directory exists. The run directory itself is *provisional* until the first checkpoint: a run
that dies before it leaves nothing that would block the same command from starting again
(``discard_unstarted``).
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..paths import check_output, hold
from ..settings import as_typed

if TYPE_CHECKING:
    from ..run_config import RunSettings

__all__ = ["check_out", "resume_conflicts", "finished_message", "check_budget", "check_cluster",
           "check_memory", "has_checkpoint", "claim", "discard_unstarted", "first_missing",
           "available_memory", "cgroup_available", "check_resumed_precision", "PRECISION_ON_CPU",
           "RESUMABLE", "resume_notes", "check_epoch_processes", "kept_accumulate", "given_as"]

# Settings a --resume may change: how long, where and how fast a run trains, not what it
# learns. The step budget may grow; validation does not move the random state
# (engine.Loop.validate puts it back), so --val-every is free too. Anything else (the model's shape, the
# data, the schedule, the precision...) would continue a different run than the one saved.
RESUMABLE = frozenset({"max_steps", "epochs", "early_stop", "threads", "checkpoint_every",
                       "val_every", "devices", "num_nodes", "strategy", "accelerator", "out",
                       "resume", "config"})


def check_out(out: str | Path, *, resume: bool) -> Path:
    """``--out`` must be a directory this process can create files in, or a path where one can
    be made (``attnlab.paths.check_output``); and, unless resuming, empty."""
    run_dir = check_output(out, "--out", directory=True)
    if resume:
        return run_dir
    if run_dir.is_dir() and any(run_dir.iterdir()):
        if (run_dir / "config.yaml").is_file() and not has_checkpoint(run_dir):
            raise UsageError(f"--out {run_dir} holds a run that stopped before its first "
                             f"checkpoint; pass --resume to start it again, or choose another --out")
        raise UsageError(f"--out {run_dir} already holds files; pass --resume to continue that "
                         f"run, or choose another --out")
    return run_dir


def claim(run_dir: Path, *, resume: bool, new: bool = False
          ) -> tuple[int | None, Path | None]:
    """Make ``run_dir`` and hold it for this process: (``paths.hold``'s descriptor of its
    lock, the outermost directory made for it, None where it existed: ``_make``). A second
    ``attnlab train`` with the same ``--out`` started meanwhile is refused, naming it, instead
    of writing its files over the first one's (both checked an empty directory before either
    wrote to it); under the lock ``check_out`` is asked again, for a run that finished in
    between. The lock is None where there are no locks (``hold``): the run is then unguarded,
    as before, but for a ``new`` one.

    ``new``: ``run_dir`` did not exist when the run checked it (a default name,
    ``runs/TASK-<timestamp>``, never does). ``mkdir`` makes it in one step with that check;
    where another process made it meanwhile and no lock can tell whether that one writes
    there, ``FileExistsError``: the tasks of a SLURM array started in the same second on NFS,
    where a directory has no locks, all wrote into one and exited 0."""
    made = None
    try:
        made = _make(run_dir)
        another = False
    except FileExistsError:
        another = new  # (one that existed before the run is an --out the user gave)
    fd = hold(run_dir, "--out", "train")
    if fd is None:
        if another:
            raise FileExistsError(errno.EEXIST, "made by another process", str(run_dir))
        return None, made
    try:
        check_out(run_dir, resume=resume)
    except UsageError:
        os.close(fd)
        raise
    return fd, made


def _make(run_dir: Path, tries: int = 5) -> Path:
    """``mkdir`` of ``run_dir`` and its parents; returns the outermost directory made. A run
    beside it (``--out sweep/lr1`` beside ``sweep/lr2``) that fails between the two steps
    removes the shared parent while it is empty (``_remove_parents``), and ``run_dir.mkdir``
    then finds no parent: the parent is made again, a few times, instead of ending the run in
    a traceback, and counts as made by this run (a failure removes it while empty, as it does
    a parent made at first). ``FileExistsError`` where ``run_dir`` exists."""
    made = run_dir
    for left in reversed(range(tries)):
        top = first_missing(run_dir)
        if len(top.parts) < len(made.parts):
            made = top
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            run_dir.mkdir()
            return made
        except FileNotFoundError:
            if not left:
                raise
    return made  # (not reached: the last try returns or raises)


def has_checkpoint(run_dir: Path) -> bool:
    return (Path(run_dir) / "checkpoints" / "last.ckpt").is_file()


# the precision Fabric runs on a CPU instead of the one asked for, which config.yaml records
# (``training.hardware.check_hardware``): a CPU run started with --precision 16-mixed holds
# bf16-mixed, and its --resume with the same flags was refused as another precision
PRECISION_ON_CPU = {"16-mixed": "bf16-mixed"}


def _same(key: str, given: Any, saved: Any) -> bool:
    if given == "auto" and isinstance(saved, str):
        return True  # config.yaml records what 'auto' chose when the run started
    if key == "precision" and PRECISION_ON_CPU.get(str(given)) == saved:
        return True  # the same, where it runs on a CPU: check_resumed_precision, once known
    if isinstance(saved, str) and os.path.isabs(saved) and isinstance(given, str):
        return Path(given).resolve() == Path(saved).resolve()  # a data file named another way
    if isinstance(saved, str) and not isinstance(given, str):
        return str(given) == saved  # --precision 32 is saved as "32"
    return given == saved


def resume_conflicts(saved: dict[str, Any], given: dict[str, Any], defaults: dict[str, Any],
                     run_dir: Path, *, config_file: str | None = None,
                     from_file: frozenset[str] = frozenset()) -> None:
    """Refuse ``--resume`` with settings that differ from the run's ``config.yaml``, naming
    each (a different model shape would otherwise fail on loading the checkpoint, and a
    different learning rate or data file would silently continue another run): as its flag,
    or, for the settings in ``from_file`` (not given as flags), as the key of ``--config
    config_file``."""
    differ, keys = [], set()
    # a data file config.yaml holds the SHA-256 of may be given at another path (the data
    # moved, or the run went to another machine): the task then checks that its bytes are
    # the ones the run started on (``check_data_files``), which a path cannot say
    pinned = pinned_data(saved)
    for key, value in sorted(given.items()):
        # --accumulate may change with the processes, to the one value that keeps the run's
        # batches a step: kept_accumulate checks it against that
        if key in RESUMABLE or key in pinned or key == "accumulate" or value is None:
            continue
        saved_value = saved.get(key, defaults.get(key))
        if not _same(key, value, saved_value):
            had = as_typed(key, saved_value) if isinstance(saved_value, bool) else saved_value
            said = given_as(key, value, config_file if key in from_file else None)
            differ.append(f"{said} (the run has {'none' if had is None else had})")
            keys.add(key)
    if differ:
        what = "setting" if keys & from_file else "flag"
        raise UsageError(f"--resume: {'; '.join(differ)} — a run continues with the settings of "
                         f"{run_dir}/config.yaml: drop the {what}, or start a new run with "
                         f"another --out")


def given_as(key: str, value: Any, config_file: str | None = None) -> str:
    """A setting as the user gave it: its flag (``--accumulate 2``), or, from ``--config
    config_file``, its key there (``accumulate: 2 in --config run.yaml``)."""
    return f"{key}: {value} in --config {config_file}" if config_file else as_typed(key, value)


def check_resumed_precision(run_dir: Path, asked: str, runs: str, *,
                            config_file: str | None = None) -> None:
    """Refuse a ``--resume`` given a precision (``asked``: ``--precision``, or the key of
    ``--config config_file``) that this machine runs as another (``runs``, from
    ``check_hardware``) than the run's config.yaml holds: the CPU's bf16-mixed for 16-mixed
    passes ``resume_conflicts`` (a CPU run records bf16-mixed), and is known to be the same
    only once the device is. A --resume given no precision continues with the run's, as this
    machine runs it (``check_hardware`` says so in a note)."""
    from ..runs import read_yaml

    saved = str(read_yaml(Path(run_dir) / "config.yaml").get("precision"))
    if str(runs) != saved:
        said, what = ((f"precision: {asked} in --config {config_file}", "setting") if config_file
                      else (f"--precision {asked}", "flag"))
        raise UsageError(f"--resume: {said} runs as {runs} here (the run has {saved}) — a run "
                         f"continues with the settings of {run_dir}/config.yaml: drop the "
                         f"{what}, or start a new run with another --out")


# RESUMABLE settings that change how the numbers are added up (the order of a sum over threads
# or processes, each process's dropout masks): a run resumed with another value trains on, but
# no longer ends with the exact weights of one that never stopped (docs/cli.md, "Resume"); the
# batches of its steps stay the run's (where they cannot: ``ResumableBatches.dealing_note``)
REORDERING = ("threads", "devices", "num_nodes")


def resume_notes(saved: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """A note naming each ``REORDERING`` setting ``--resume`` is given another value of than
    the run trained with (allowed, as it is where or how fast a run trains, but not silent)."""
    changed = [f"{as_typed(key, given[key])} (the run had {saved[key]})" for key in REORDERING
               if given.get(key) is not None and saved.get(key) is not None
               and given[key] != saved[key]]
    if not changed:
        return []
    notes = [f"note: --resume: {', '.join(changed)}: the run trains on, but will not end with "
             f"the exact weights of one that never stopped (another number of threads or "
             f"processes adds the sums up in another order; each process draws its own dropout "
             f"masks)"]
    step = _step_note(saved, given)
    return [*notes, step] if step else notes


def processes_of(values: dict[str, Any]) -> int:
    """The training processes (``--devices`` × ``--num-nodes``) of ``values``: a run's
    config.yaml, or the settings asked now."""
    from types import SimpleNamespace

    from ..settings import processes

    return processes(SimpleNamespace(devices=values.get("devices"),
                                     num_nodes=values.get("num_nodes")))


def check_epoch_processes(saved: dict[str, Any], cfg: RunSettings,
                          run_dir: Path | None = None) -> None:
    """Refuse ``--resume`` of a run whose budget is ``--epochs`` on another number of processes
    (``--devices`` × ``--num-nodes``) than config.yaml's. Each step keeps the run's batches
    (``kept_accumulate``), but an epoch's steps are counted from each process's share of its
    batches (``settings.steps_of_epochs``), and the batches the new processes cannot share
    evenly are left out of it: there the steps done and those the epochs make do not add up
    (a run of 1 process, 2 batches a step, over 41 batches: 21 steps an epoch; on 2 processes:
    20). Whether they do is known only once the data is read, after the run directory is, so
    it is refused here, naming the way out: ``--max-steps`` in place of ``--epochs`` (a step
    budget, which another number of processes continues). A run made before
    ``epochs_of_all_processes`` counted each process's passes, a budget in steps that no
    number of processes changes: it passes."""
    from ..settings import processes

    if (not cfg.epochs or saved.get("devices") is None
            or not getattr(cfg, "epochs_of_all_processes", True)):
        return
    before, now = processes_of(saved), processes(cfg)
    if now == before:
        return
    flags = _moved_flags(saved, {key: getattr(cfg, key) for key in ("devices", "num_nodes")})
    done = steps_done(run_dir) if run_dir is not None else None
    raise UsageError(f"--resume: {flags} trains on {_processes(now)} where the run had "
                     f"{before}, and its budget, --epochs {cfg.epochs}, counts the steps of an "
                     f"epoch shared out to {_processes(before)}: on {now} the batches that do "
                     f"not share evenly are left out, so the steps done and those the epochs "
                     f"make may not add up; resume it on "
                     f"{_processes(before)}, or give --max-steps N in place of --epochs (the "
                     f"step to end at{f'; it has done {done}' if done is not None else ''})")


def step_batches(values: dict[str, Any]) -> int:
    """The batches one optimiser step takes over all processes (``--accumulate`` on each of
    ``--devices`` x ``--num-nodes``): what a step learns from. An epoch's batches are dealt out
    in turn (rank r takes every world-th, ``attnlab.data.resumable``), so a step of N batches
    takes the same N of them however they are shared between processes and passes."""
    return int(values.get("accumulate") or 1) * processes_of(values)


def kept_accumulate(saved: dict[str, Any], asked: dict[str, Any], given: Any = None, *,
                    said: str = "") -> int:
    """The ``--accumulate`` a ``--resume`` on ``asked``'s number of processes trains with: the
    one that keeps the run's ``step_batches`` (two processes resumed on one: twice the run's).
    A run resumed on another number of processes otherwise halved (or doubled) the examples
    of each step without a word, and trained on to other losses than it would have.

    Raises:
        UsageError: where those processes cannot share the run's batches a step evenly (a run
            of 1 batch a step resumed on 2: each step would learn from more examples, another
            recipe, which ``RESUMABLE`` does not allow), naming the numbers of processes that
            can; or where ``given`` (an ``--accumulate`` given now, ``said`` as the user wrote
            it: the flag, or the key of a --config file) is another value than the kept one.

    Examples:
        >>> kept_accumulate({"devices": 2, "accumulate": 1}, {"devices": 1})
        2
        >>> kept_accumulate({"devices": 1, "accumulate": 4}, {"devices": 2})
        2
    """
    before, now = step_batches(saved), processes_of(asked)
    whole, left = divmod(before, now)
    of = f"batch{'es' * (before > 1)} of {saved.get('batch_size')}"
    if left or not whole:
        fit = [str(n) for n in range(1, before + 1) if before % n == 0]
        fit_text = (f"{', '.join(fit[:-1])} or {fit[-1]}" if len(fit) > 1 else fit[0])
        init = f", from its weights with --init {asked.get('out')}" if "init" in saved else ""
        raise UsageError(
            f"--resume: {_moved_flags(saved, asked)} trains on {_processes(now)} where the run "
            f"had {processes_of(saved)}, which cannot share its {before} {of} a step "
            f"(--accumulate {int(saved.get('accumulate') or 1)} on "
            f"{_processes(processes_of(saved))}) evenly: each step would learn from another "
            f"number of examples than the run's; resume it on {fit_text} "
            f"process{'es' * (fit != ['1'])}, or start a new run with another --out{init}")
    if given is not None and str(given) != str(whole):
        raise UsageError(f"--resume: {said or f'--accumulate {given}'}: on {_processes(now)} this "
                         f"run goes on with --accumulate {whole}, so that each step takes its "
                         f"{before} {of} as the run's did; give {whole}, or leave it out")
    return whole


def _moved_flags(saved: dict[str, Any], asked: dict[str, Any]) -> str:
    """The --devices and --num-nodes of ``asked`` that differ from the run's ``saved``."""
    return " ".join(f"--{key.replace('_', '-')} {asked.get(key)}"
                    for key in ("devices", "num_nodes")
                    if (asked.get(key) or 1) != (saved.get(key) or 1))


def _step_note(saved: dict[str, Any], given: dict[str, Any]) -> str | None:
    """What ``kept_accumulate`` did to the run's steps on the processes ``given``: each still
    takes the run's batches, with another --accumulate."""
    accumulate, had = int(given.get("accumulate") or 1), int(saved.get("accumulate") or 1)
    before = step_batches(saved)
    of = f"batch{'es' * (before > 1)} of {saved.get('batch_size')}"
    if accumulate != had:
        return (f"note: --resume: --accumulate {accumulate} in place of the run's {had}, so "
                f"that each step still takes its {before} {of} (the schedule and the data's "
                f"order go on as they were)")
    return None


def _processes(n: int) -> str:
    return f"{n} process{'es' * (n > 1)}"


def moved_data(saved: dict[str, Any], given: dict[str, Any]) -> dict[str, str]:
    """The data files ``--resume`` is given at another path than config.yaml's (those whose
    SHA-256 it holds: ``resume_conflicts`` lets them through, the task checks their bytes),
    made absolute as a new run records them, so that evaluate finds them from anywhere. A
    file at another path that is missing, or whose bytes are not the recorded ones, is refused
    here, naming the file the run started on (the task's own check would call it "gone" or
    "changed"); so is a prepared corpus given as a file, or one whose token files are not
    those its meta.json's digests name (read in full once, as the corpus moves)."""
    from ..data.corpus_meta import changed_token_files
    from ..runs import file_digest

    pinned, moved = pinned_data(saved), {}
    for key in (k for k in pinned if given.get(k)):
        new, old = Path(given[key]).resolve(), saved.get(key)
        if old is not None and new != Path(old).resolve():  # moved: it must be the file, found
            digest = pinned[key]
            record = ("data_sha256" if isinstance(digest, str) else
                      f"corpus_sha256, of its {' and '.join(digest)}")
            started = (f"the run started on {old} (its SHA-256 is config.yaml's {record}): "
                       f"give that {'file' if isinstance(digest, str) else 'corpus'} where it "
                       f"is now, or start a new run")
            if not new.exists():
                raise UsageError(f"--{key} {given[key]} not found; {started}")
            if not isinstance(digest, str) and not new.is_dir():
                raise UsageError(f"--{key} {given[key]} is not a prepared corpus (a directory "
                                 f"made by `attnlab prepare`); {started}")
            same = (file_digest(new) == digest if isinstance(digest, str) else
                    all((new / name).is_file() and file_digest(new / name) == held
                        for name, held in digest.items()))
            if not same:
                raise UsageError(f"--{key} {given[key]} is not the "
                                 f"{'file' if isinstance(digest, str) else 'corpus'} this run "
                                 f"started on: its bytes differ; {started}")
            changed = [] if isinstance(digest, str) else changed_token_files(new)
            if changed:  # meta.json is the run's, a token file is not what it was written as
                raise UsageError(f"--{key} {given[key]} holds the run's meta.json and "
                                 f"tokenizer.json, but its {' and '.join(changed)} "
                                 f"{'is' if len(changed) == 1 else 'are'} not what meta.json's "
                                 f"SHA-256 says `attnlab prepare` wrote (changed since?); "
                                 f"{started}")
        moved[key] = str(new)
    return moved


def pinned_data(saved: dict[str, Any]) -> dict[str, str | dict[str, str]]:
    """The data settings of a run whose bytes its config.yaml pins, by name: each file of
    ``data_sha256`` (its SHA-256), and an lm run's prepared corpus given as --data (its
    ``corpus_sha256``: the SHA-256 of its meta.json and tokenizer.json, by name). ``--resume``
    may be given one at another path (it moved, or the run went to another machine): its
    bytes, not its path, say whether it is the one the run started on."""
    pinned: dict[str, str | dict[str, str]] = dict(saved.get("data_sha256") or {})
    if saved.get("corpus_sha256") and "data" not in pinned:
        pinned["data"] = dict(saved["corpus_sha256"])
    return pinned


def record_moved_data(run_dir: Path, record: dict[str, Any]) -> None:
    """--resume given a data file at its new path (``moved_data``: its bytes are the recorded
    ones): ``run_dir``'s config.yaml names the new path now, not only when the run finishes,
    so a run interrupted again resumes, and ``evaluate --checkpoint last`` reads, without the
    flag. ``record``: the resumed run's settings (``cfg.record()``)."""
    from ..runs import read_yaml, write_yaml

    path = run_dir / "config.yaml"
    saved = read_yaml(path)
    moved = {k: record[k] for k in pinned_data(saved)
             if record.get(k) and record[k] != saved.get(k)}
    if moved:
        write_yaml(path, {**saved, **moved})


def finished_message(run_dir: Path, saved: dict[str, Any], given: RunSettings) -> str | None:
    """For ``--resume`` of a finished run (``metrics.json`` written) whose step budget is not
    raised: the line that says there is nothing to do; otherwise None (train on). ``saved``
    is the run's ``config.yaml`` as read, ``given`` the typed config about to train."""
    metrics_path = Path(run_dir) / "metrics.json"
    if not metrics_path.is_file():
        return None
    budget_keys = ("max_steps", "epochs", "early_stop")
    if any(given.recorded(k) is not None and not _same(k, given.recorded(k), saved.get(k))
           for k in budget_keys):
        return None
    import json

    try:
        steps = json.loads(metrics_path.read_text()).get("steps")
    except (OSError, ValueError):
        steps = None
    done = f" after {int(steps)} steps" if isinstance(steps, (int, float)) else ""
    budget = (f"--epochs {saved['epochs']}" if saved.get("epochs")
              else f"--max-steps {saved.get('max_steps')}")
    return (f"{run_dir} is a finished run{done} (budget {budget}); nothing was trained or "
            f"rewritten — raise the budget to train further")


def steps_done(run_dir: Path) -> int | None:
    """The optimiser steps a run's ``checkpoints/last.ckpt`` has done (its "global_step"), or
    None without a readable one (``--resume`` itself then reports a broken checkpoint). Only
    ``--resume`` calls this, so only it imports torch here; the file is memory-mapped, so its
    weights are not read (``partial_copy.checkpoint_state``)."""
    from .partial_copy import checkpoint_state

    state = checkpoint_state(run_dir)
    return None if state is None else state["global_step"]


def check_budget(run_dir: Path, cfg: RunSettings) -> None:
    """``--resume`` with a ``--max-steps`` below the steps the run has done is refused: it
    would stop at once, test the model and record the smaller budget in place of the run's."""
    budget = cfg.recorded("max_steps")
    if budget is None or cfg.epochs:  # --epochs is the budget: max_steps is not used
        return
    done = steps_done(run_dir)
    if done is not None and budget < done:
        raise UsageError(f"--max-steps {budget} is below the {done} steps this run has done; "
                         f"give at least {done}, or start a new run with another --out")


# The variables Lightning's cluster environments read (lightning.fabric.plugins.environments):
# torchrun/TorchElastic, SLURM, LSF, Kubeflow/PyTorchJob, MPI, and the manual rendezvous.
_CLUSTER_MARKERS = (("TORCHELASTIC_RUN_ID",), ("SLURM_NTASKS",), ("LSB_JOBID",),
                    ("KUBERNETES_PORT", "MASTER_ADDR", "RANK"), ("OMPI_COMM_WORLD_SIZE",),
                    ("PMI_SIZE",), ("MASTER_ADDR", "NODE_RANK"))


def check_cluster(cfg: RunSettings, environ: dict[str, str] | None = None) -> None:
    """``--num-nodes N`` > 1 needs a cluster environment; without one every node would wait for
    the others forever (a silent hang)."""
    env = os.environ if environ is None else environ
    if cfg.num_nodes <= 1:
        return
    if any(all(env.get(name) for name in marker) for marker in _CLUSTER_MARKERS):
        return
    raise UsageError(f"--num-nodes {cfg.num_nodes} needs a cluster environment, and none was "
                     f"found: launch under SLURM (srun) or torchrun, or set MASTER_ADDR, "
                     f"MASTER_PORT and NODE_RANK on every node (docs/scale.md)")


# where Linux shows the process's control groups (a container's memory limit is one)
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
# cgroup v1 writes "no limit" as the largest page-aligned int64, 9223372036854771712
_V1_UNLIMITED = 2**62


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation, or None: the machine's (Linux:
    MemAvailable) or, less, what the process's memory cgroup leaves it (``cgroup_available``:
    a container given 4 GiB on a 24 GiB host is killed past 4 GiB)."""
    known = [n for n in (_machine_available(), cgroup_available()) if n is not None]
    return min(known) if known else None


def _machine_available() -> int | None:
    """The machine's MemAvailable (else its free pages), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def cgroup_available(root: Path | None = None, own: Path | None = None) -> int | None:
    """Bytes the memory limits of the process's cgroup and those above it leave, the least of
    them: limit - (usage - inactive file pages, which the kernel reclaims before the limit
    counts as reached); None where no limit is set or none can be read (not Linux).

    cgroup v2 (``own``, /proc/self/cgroup, says ``0::/PATH``): ``memory.max`` ("max": none),
    ``memory.current`` and ``memory.stat``'s ``inactive_file`` of ``root``/PATH and its
    parents; v1 (``N:...memory...:/PATH``): ``memory.limit_in_bytes`` (near 2**63: none),
    ``memory.usage_in_bytes`` and ``total_inactive_file`` under ``root``/memory. A PATH not
    under ``root`` (a container that sees the host's path but mounts its own cgroup at the
    root) is read at the root.
    """
    root, own = root or CGROUP_ROOT, own or PROC_CGROUP
    try:
        lines = own.read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:
            found += _limits(root, path, ("memory.max", "memory.current", "inactive_file"))
        elif "memory" in controllers.split(","):
            found += _limits(root / "memory", path, ("memory.limit_in_bytes",
                                                     "memory.usage_in_bytes",
                                                     "total_inactive_file"))
    return max(0, min(found)) if found else None


def _limits(mount: Path, path: str, names: tuple[str, str, str]) -> list[int]:
    """What each limited cgroup from ``mount``/``path`` up to ``mount`` leaves (``names``: its
    limit file, usage file and memory.stat key of inactive file pages)."""
    here = mount / path.strip("/")
    if not here.is_dir():
        here = mount
    left = []
    for directory in [here, *here.parents]:
        limit = _read_int(directory / names[0])
        if limit is not None and limit < _V1_UNLIMITED:
            usage = _read_int(directory / names[1]) or 0
            left.append(limit - max(0, usage - _stat(directory / "memory.stat", names[2])))
        if directory == mount:
            break
    return left


def _read_int(path: Path) -> int | None:
    """The integer a cgroup file holds, None for "max" or a file that cannot be read."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _stat(path: Path, key: str) -> int:
    """The value of ``key`` in a cgroup's memory.stat, 0 where it has none."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _gb(n: float) -> str:
    """Bytes in the largest decimal unit, from GB up, that keeps the number below 1,000
    (``3.3e17`` bytes is "330.0 PB", not "330,000,000.0 GB"); past that, in powers of ten.

    Examples:
        >>> _gb(2e9), _gb(3.3e17), _gb(4e8), _gb(5e24)
        ('2.0 GB', '330.0 PB', '0.4 GB', '5.0e+24 bytes')
    """
    for unit, size in (("GB", 1e9), ("TB", 1e12), ("PB", 1e15), ("EB", 1e18)):
        if n < 1000 * size:  # 999.96 GB rounds to "1,000.0 GB": rare, and still readable
            return f"{n / size:,.1f} {unit}"
    return f"{n:.1e} bytes"


def check_memory(parts: list[tuple[str, float]], *, available: int | None = None) -> None:
    """Refuse a run whose known allocations (``parts``: (what, bytes), from the task's
    ``memory_estimate``: the weights, the data, one training step's activations) exceed the
    memory this machine has available, before anything is written. The parts are named
    largest first, so the first one is what to make smaller; those under a hundredth of the
    total are left out of the line. Each part counts only what is sure to be allocated (the
    runs measured peak higher: docs/scale.md, "Memory"), so a run that fits is not refused,
    which the message says.

    Examples:
        >>> check_memory([("the data", 1e9)], available=2 * 10**9)  # fits: nothing said
    """
    total = sum(size for _, size in parts)
    available = available_memory() if available is None else available
    if not parts or available is None or total <= available:
        return
    shown = sorted((part for part in parts if part[1] >= total / 100), key=lambda p: -p[1])
    what = " + ".join(f"{_gb(size)} for {name}" for name, size in shown)
    if (left := len(parts) - len(shown)) > 0:
        what += f" + {left} smaller part{'s' if left > 1 else ''}"
    raise UsageError(f"these settings need about {_gb(total)} ({what}); {_who_has(available)} "
                     f"(the count is a lower bound: only what is sure to be allocated)")


def _who_has(available: int) -> str:
    """Where the refusal's ``available`` bytes come from: the limit of the process's memory
    cgroup (a container's) where that is less than the machine has, so that a user on a
    machine with more free does not read the number as wrong."""
    machine = _machine_available()
    if cgroup_available() == available and (machine is None or available < machine):
        return f"this container's memory limit (its cgroup) leaves {_gb(available)}"
    return f"this machine has {_gb(available)} available"


def first_missing(path: Path) -> Path:
    """The outermost directory of ``path`` that does not exist yet: what making ``path``
    creates (``path`` itself when its parent exists)."""
    top = Path(path)
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    return top


def discard_unstarted(run_dir: Path, *, found: str, created: Path | None = None
                      ) -> Path | None:
    """Remove what a run wrote if it died before its first checkpoint (nothing in it can be
    resumed, and the same command can then simply run again). ``found`` is what ``--out`` was
    before the run: ``"new"`` (the directory goes, with the parents the run made for it, from
    ``created`` down, while they are empty: ``_remove_parents``), ``"empty"`` (its contents
    go; the directory the user made stays) or ``"run"`` (``--resume`` of an existing run:
    nothing goes). Returns the outermost directory removed (``run_dir`` for "empty"), or None
    where nothing was."""
    run_dir = Path(run_dir)
    if found == "run" or has_checkpoint(run_dir) or not run_dir.is_dir():
        return None
    if found == "new":
        shutil.rmtree(run_dir, ignore_errors=True)
        return _remove_parents(run_dir, created)
    for child in run_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    return run_dir


def _remove_parents(run_dir: Path, created: Path | None) -> Path:
    """Remove the parents of the removed ``run_dir`` that its run made (up to ``created``),
    each only while empty: a run started at the same moment (``--out sweep/lr1`` beside
    ``--out sweep/lr2``, ``sweep/`` made by whichever came first) may hold its own directory
    in one, which removing the whole tree from ``created`` down took with it. Returns the
    outermost directory removed."""
    gone = run_dir
    for parent in run_dir.parents:
        if created is None or created not in (parent, *parent.parents):
            break
        try:
            parent.rmdir()
        except OSError:  # not empty: another run's
            break
        gone = parent
    return gone
