"""Where a run trains: Lightning Fabric from the run's settings, checked before anything runs.

``--accelerator``, ``--devices``, ``--num-nodes``, ``--strategy`` and ``--precision`` go to
``lightning_fabric.Fabric`` as they are; ``check_hardware`` builds one (a Fabric only configures
until ``launch``) to refuse what this machine cannot run, in one line, before the run directory
exists, and records what will really run.

Fabric is imported from the ``lightning_fabric`` package, not ``lightning.fabric``: the
``lightning`` package's ``__init__`` imports Lightning's Trainer, which ``attnlab train`` does not
use. And it is imported without torchmetrics (``fabric``), which it reads only for its version
number and which, with what it imports in turn (transformers, scipy.signal), was the largest
part of what a run's start spent beyond a bare PyTorch script's (benchmarks/RESULTS.md,
"startup").
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..settings import later_process, processes
from .ranks import RANK_ZERO_TIMEOUT

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from ..run_config import RunSettings

__all__ = ["fabric", "make_fabric", "sums_in", "check_hardware", "auto_precision", "cpu_has_bf16",
           "AUTO_BF16_WIDTH", "processes", "single_process_ddp", "launch",
           "run_dir_checkpoint_io", "launched", "check_launch",
           "launch_id", "wait_for_rank_zero", "compile_options",
           "emulated_bf16_note", "check_port"]


def _quiet_lightning() -> None:
    """Lightning's start-up chatter (GPU/TPU availability, "LOCAL_RANK", "Using bfloat16
    Automatic Mixed Precision (AMP)" once per Fabric built, so twice a run) says nothing a user
    of this CLI can act on; what attnlab changes of what was asked it says itself
    (``check_hardware``). Set again after ``lightning_fabric`` is imported: its ``__init__``
    sets its logger to INFO, which left the AMP line printed twice a run."""
    logging.getLogger("lightning_fabric").setLevel(logging.WARNING)


_quiet_lightning()


@contextlib.contextmanager
def _no_rank_zero_info():
    """Lightning's ``rank_zero_info`` (the AMP line, DDP's banner) held back while attnlab
    builds and launches a Fabric, whichever logger it writes to: importing the ``lightning``
    package (``TransformerPredictor``'s Trainer) points it at ``lightning.fabric``'s, which
    ``_quiet_lightning`` does not reach."""
    from lightning_utilities.core import rank_zero

    log = rank_zero.log
    level = log.level
    log.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        log.setLevel(level)


def fabric():
    """The ``lightning_fabric`` module, imported without importing torchmetrics.

    lightning_fabric imports torchmetrics at its own import only to compare its version
    (``lightning_fabric.utilities.imports``). A stand-in module that has just the installed
    version answers that, and is removed again at once, so a later ``import torchmetrics``
    (by a user's code, or Fabric's FSDP support) gets the real package.
    """
    if "lightning_fabric" in sys.modules:
        _quiet_lightning()  # imported by someone else, who left its logger at INFO
        return sys.modules["lightning_fabric"]
    stand_in = None
    if "torchmetrics" not in sys.modules:
        try:
            version = importlib.metadata.version("torchmetrics")
        except importlib.metadata.PackageNotFoundError:
            version = None
        if version:
            stand_in = types.ModuleType("torchmetrics")
            stand_in.__version__ = version
            sys.modules["torchmetrics"] = stand_in
    try:
        import lightning_fabric
    finally:
        if stand_in is not None and sys.modules.get("torchmetrics") is stand_in:
            del sys.modules["torchmetrics"]
    _quiet_lightning()
    return lightning_fabric


def _hardware(cfg: RunSettings) -> dict[str, Any]:
    """The Fabric settings that depend on the machine (``TrainSettings`` declares them), by
    ``Fabric``'s argument name, as the run gives them."""
    return {"accelerator": cfg.accelerator, "devices": cfg.devices, "num_nodes": cfg.num_nodes,
            "strategy": cfg.strategy, "precision": cfg.precision}


def single_process_ddp(cfg: RunSettings) -> bool:
    """``--strategy ddp`` with one process in all, which trains on the single-device strategy.

    DDP on one process averages each gradient with itself; all it adds is cost: a process
    group, a wrapper, an all-reduce a step, and, on a CPU, most of all Fabric's launcher
    setting torch's threads over ``--threads`` (``launch`` now puts them back), which made a
    small model's run many times slower on a busy machine (benchmarks/RESULTS.md,
    "ddp_one_process"). A run resumed with ``--devices 1`` after two keeps ``strategy: ddp``
    in its config.yaml, so this is decided from the processes each time a run starts, never
    recorded. FSDP is left as asked: on a CPU it is refused (``check_hardware``), and on one
    GPU it is the way to try its sharded path before a run on several."""
    return str(cfg.strategy) == "ddp" and processes(cfg) == 1


def _strategy(cfg: RunSettings):
    """``--strategy`` for Fabric: FSDP writes its checkpoints whole (one file, on rank 0), as
    every other strategy does, so ``last.ckpt`` is one file whatever trained it; DDP on one
    process is the single-device strategy (``single_process_ddp``)."""
    if single_process_ddp(cfg):
        return "auto"
    if cfg.strategy == "fsdp":
        return fabric().strategies.FSDPStrategy(state_dict_type="full")
    return str(cfg.strategy)


def make_fabric(cfg: RunSettings):
    """A ``Fabric`` with the run's ``--accelerator --devices --num-nodes --strategy
    --precision`` (``cfg``: the typed run config)."""
    settings = _hardware(cfg)
    settings["strategy"] = _strategy(cfg)
    settings["precision"] = _precision(str(settings["precision"]))
    if isinstance(settings["strategy"], str):  # FSDP's full checkpoint is torch.save'd on rank 0
        settings["plugins"] = [run_dir_checkpoint_io()]
    with warnings.catch_warnings(), _no_rank_zero_info():
        warnings.simplefilter("ignore")  # the substitutions are reported by check_hardware
        return fabric().Fabric(**settings)


def run_dir_checkpoint_io():
    """Fabric's checkpoint writer, writing the checkpoint straight to the path it is given.

    Lightning's own (``TorchCheckpointIO``) serialises the whole checkpoint into memory, writes
    it to a new file in ``$TMPDIR`` and then moves that file: with a small ``/tmp`` (a tmpfs of a
    few GiB on many machines and clusters) the first checkpoint of a run whose directory has
    room failed with "No space left on device" naming a ``/tmp`` file, and the run was lost. The
    caller (``engine.Loop.save``) already writes to a temporary name in the run directory and
    renames it, so nothing here needs another copy; it also syncs the file before that rename
    (a crash of the machine cannot leave a renamed ``last.ckpt`` whose data never reached the
    disk), whatever strategy wrote it."""
    import torch

    class RunDirCheckpointIO(fabric().plugins.TorchCheckpointIO):
        def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
            if storage_options is not None:
                raise TypeError("storage_options are not supported")
            with open(path, "wb") as f:
                torch.save(checkpoint, f)

    return RunDirCheckpointIO()


def launch(built, cfg: RunSettings) -> None:
    """``built.launch()`` (DDP and FSDP: start the other processes, join the process group),
    keeping ``--threads``: Fabric's launcher sets torch's threads to the cores over the
    processes on this node, over what the run asked (it leaves them only when
    ``OMP_NUM_THREADS`` is set). Where torchrun or srun started the processes, rank 0 first
    lets the others start their run (``wait_for_rank_zero``), and once all joined (or the
    join failed) removes the note that let them."""
    import torch

    threads = torch.get_num_threads()
    note = _launch_note(cfg.out) if _external_rank() == 0 else None
    if note is not None:
        from ..runs import atomic_write

        atomic_write(note, launch_id() or "")
    from .ranks import joining, launching

    joining()  # a rank Lightning's launcher started: rank 0 waits for this before it joins
    try:
        # a join that failed ends the ranks started
        with _no_rank_zero_info(), launching(others=processes(cfg) > 1):
            built.launch()
    finally:  # a join that failed leaves no note for the next launch's processes to take
        if note is not None:
            note.unlink(missing_ok=True)
    if cfg.threads:
        torch.set_num_threads(threads)


def launch_id(environ: dict[str, str] | None = None) -> str | None:
    """This launch's name, the same in every process of it, where torchrun (with more than
    one process) or srun started them all; None otherwise (Lightning's own launcher starts
    the others only at ``launch``)."""
    env = os.environ if environ is None else environ
    found = launched(env)
    if found is None or found[2] < 2:
        return None
    if env.get("TORCHELASTIC_RUN_ID"):
        restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
        return (f"torchrun {env['TORCHELASTIC_RUN_ID']} {env.get('MASTER_ADDR')}:"
                f"{env.get('MASTER_PORT')} restart {restart}")
    if found[0] == "srun":
        return f"srun job {env.get('SLURM_JOB_ID')} step {env.get('SLURM_STEP_ID')}"
    return None


def _external_rank() -> int | None:
    """This process's rank where torchrun or srun started it (``launch_id``), else None."""
    if launch_id() is None:
        return None
    return int(os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or 0)


def _launch_note(run_dir: str | None):
    """The file by which rank 0 tells the other processes of its launch that it has prepared
    the run (``launch``)."""
    from pathlib import Path

    return Path(str(run_dir)) / ".launched" if run_dir else None




def wait_for_rank_zero(run_dir, *, timeout: float | None = None, poll: float = 0.2) -> None:
    """In a process above rank 0 that torchrun or srun started at the same time as rank 0:
    wait until rank 0 has prepared the run and is launching (``launch``), as the processes
    Lightning's own launcher starts only then. Without it every process ran the run's
    preparation at once: two processes of ``train lm --data FILE`` wrote RUN_DIR/data's
    files together and one stopped on the other's renamed file. ``timeout``: seconds
    (default ``RANK_ZERO_TIMEOUT``); then a ``UsageError``."""
    import time

    expected = launch_id()
    if expected is None or _external_rank() == 0:
        return
    note = _launch_note(run_dir)
    timeout = RANK_ZERO_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if note.read_text() == expected:
                return
        except OSError:
            pass
        time.sleep(poll)
    raise UsageError(f"rank 0 of this launch ({expected}) did not start the run in {run_dir} "
                     f"within {timeout:.0f} s")


def compile_options(device: str) -> dict[str, Any]:
    """``torch.compile``'s options for ``--compile`` on ``device`` (a ``torch.device.type``).

    On a CPU, dropout draws its masks from torch's own generator, as eager does
    (inductor's ``fallback_random``): inductor's generator gave other masks, so a compiled
    run of a model with dropout (graph attention's, the language model's) logged other
    losses than the eager run of the same seed, where a model without dropout agrees to
    float32's rounding, and a user comparing them could not tell a fault from another draw
    (tests/reliability/test_compile.py). On
    a GPU inductor keeps its own generator, fused into its kernels, for speed (the same
    seed still gives the same run; benchmarks/gpu_lm.py compiles with dropout 0.2).

    Examples:
        >>> compile_options("cpu"), compile_options("cuda")
        ({'options': {'fallback_random': True}}, {})
    """
    return {"options": {"fallback_random": True}} if device == "cpu" else {}


def _precision(value: str) -> str:
    """attnlab's ``--precision`` (32, 64, bf16-mixed ...) as Fabric spells it."""
    return {"32": "32-true", "64": "64-true", "16": "16-mixed"}.get(value, value)


def sums_in(fabric) -> torch.dtype:
    """The dtype a step's batch shares and summed loss are kept in: ``fabric``'s run of
    ``--precision 64`` float64 (float32 would round its accumulated step to float32), any
    other float32."""
    import torch

    return torch.float64 if fabric.strategy.precision.precision == _precision("64") else (
        torch.float32)


AUTO_BF16_WIDTH = 128  # from this model width bf16 autocast pays on a CPU with bf16 instructions


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    r"""Whether this CPU computes bfloat16 natively, read from ``cpuinfo`` (the text of
    /proc/cpuinfo, read when None): AVX-512 BF16 or AMX in x86's ``flags`` line, ``bf16`` in
    aarch64's ``Features`` line (Graviton3/4, Neoverse V1/V2); without /proc/cpuinfo False:
    emulated bfloat16 is slower than float32.

    Examples:
        >>> cpu_has_bf16("flags\t\t: fpu sse avx512f avx512_bf16\n")
        True
        >>> cpu_has_bf16("Features\t: fp asimd sve bf16 i8mm\n")
        True
        >>> cpu_has_bf16("Features\t: fp asimd evtstrm aes\nflags : fpu avx2\n")
        False
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            return False
    found = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            found.update(value.split())
    return bool(found & {"avx512_bf16", "amx_bf16", "bf16"})


def emulated_bf16_note(precision: str) -> str | None:
    """The note for a run on a CPU in ``precision`` (as it runs: ``16-mixed`` has become
    ``bf16-mixed``) where bfloat16 has no instructions of its own (``cpu_has_bf16``); None
    where there is nothing to say. Without one, torch computes bfloat16 by converting to and
    from float32, and a user who asked for bfloat16 to train faster trained several times
    slower, unsaid (benchmarks/RESULTS.md, precision_compile, for a CPU that has them).

    Examples:
        >>> emulated_bf16_note("32") is None
        True
    """
    if not precision.startswith("bf16") or cpu_has_bf16():
        return None
    return (f"note: --precision {precision}: no bfloat16 instructions found on this CPU "
            f"(AVX-512 BF16, AMX or Arm's bf16 in /proc/cpuinfo), so bfloat16 is likely "
            f"emulated, which trains slower than --precision 32, often several times")


def auto_precision(device: str, model_dim: int) -> str:
    """``--precision auto``: ``bf16-mixed`` on a CPU with bf16 instructions for a model at least
    ``AUTO_BF16_WIDTH`` wide, else ``32``. Measured (benchmarks/RESULTS.md, nanogpt): a
    128-wide language model's step faster with the same validation loss; a 32-wide model
    slower, its products too small to pay for the casts; a GPU keeps 32.

    Examples:
        >>> auto_precision("gpu", 512), auto_precision("cpu", 64)
        ('32', '32')
    """
    if device == "cpu" and model_dim >= AUTO_BF16_WIDTH and cpu_has_bf16():
        return "bf16-mixed"
    return "32"


def launched(environ: dict[str, str] | None = None) -> tuple[str, str, int] | None:
    """(the launcher, the variable, how many processes it started in all) where a launcher
    starts every process itself: torchrun, or any rendezvous by environment variables, sets
    ``WORLD_SIZE``; srun sets the step's ``SLURM_STEP_NUM_TASKS`` and (unless ``--export`` or
    ``-E`` keep the job's) ``SLURM_NTASKS`` to the step's tasks, which Lightning takes as the
    processes (``SLURMEnvironment``; not under a job named ``bash`` or ``interactive``, which
    Lightning leaves to other launchers). None for a process started by hand (Lightning's own
    launcher starts the others with ``WORLD_SIZE`` too, as many as the run's flags ask), and
    for the shell of an ``sbatch`` script or ``salloc`` (the job's ``SLURM_NTASKS``, no step's
    variables): one process, whatever tasks its job has (``check_launch``).

    Examples:
        >>> launched({"WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x"})
        ('torchrun', 'WORLD_SIZE', 2)
        >>> launched({"SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "4", "SLURM_JOB_NAME": "t"})
        ('srun', 'SLURM_NTASKS', 4)
        >>> launched({"SLURM_NTASKS": "4", "SLURM_JOB_NAME": "train"}) is None  # sbatch's shell
        True
    """
    env = os.environ if environ is None else environ
    if env.get("WORLD_SIZE"):  # torchrun's has priority over SLURM's, as Lightning's does
        return "torchrun", "WORLD_SIZE", _count(env, "WORLD_SIZE")
    if _slurm_job(env) and env.get("SLURM_STEP_NUM_TASKS"):
        return "srun", "SLURM_NTASKS", _count(env, "SLURM_NTASKS")
    return None


# the job names under which Lightning takes a SLURM job for an interactive shell, and not
# SLURM's tasks for the run's processes (``SLURMEnvironment.detect``)
_INTERACTIVE_JOBS = ("bash", "interactive")


def _slurm_job(env) -> bool:
    """Whether Lightning takes SLURM's tasks as the run's processes (``SLURMEnvironment``)."""
    return bool(env.get("SLURM_NTASKS")) and env.get("SLURM_JOB_NAME") not in _INTERACTIVE_JOBS


def _count(env, name: str) -> int:
    """The whole number a launcher's variable holds, or a ``UsageError`` naming it."""
    try:
        return int(env[name])
    except ValueError:
        raise UsageError(f"{name} {env[name]!r} is not a whole number: it should hold how "
                         f"many processes the launcher started") from None


# (the variable of the processes on this node, of this process's place among them), by launcher;
# srun's SLURM_NTASKS_PER_NODE is the job's (an srun -n1 step of a 4-task job keeps its 4)
_PER_NODE = {"torchrun": ("LOCAL_WORLD_SIZE", "LOCAL_RANK"), "srun": (None, "SLURM_LOCALID")}


def check_launch(cfg: RunSettings, environ: dict[str, str] | None = None) -> str | None:
    """Refuse, before anything is written, a run whose ``--devices`` × ``--num-nodes`` is not
    the processes its launcher started (``launched``). With fewer asked, each process trained
    its own copy of the model on the whole data, as one process, and all wrote one run
    directory; with more, Lightning waited for processes that never start, or stopped at
    launch once the run directory existed. Also refused: an srun step that started fewer
    tasks than the job's ``SLURM_NTASKS`` (which Lightning would wait for), and a process
    whose place on its node (``LOCAL_RANK``, ``SLURM_LOCALID``) or whose node's processes
    (``LOCAL_WORLD_SIZE``) are beyond ``--devices``, and more than one device asked in the
    shell of an sbatch script or salloc, where Lightning starts no process itself. Returns a
    warning to say, or None: task 0 of a step of several tasks in a job Lightning takes for an
    interactive shell (``_check_interactive_step``)."""
    env = os.environ if environ is None else environ
    found = launched(env)
    if found is None:
        warning = _check_interactive_step(env)
        _check_batch_shell(cfg, env)
        return warning
    launcher, name, world = found
    step = env.get("SLURM_STEP_NUM_TASKS") if launcher == "srun" else None
    if step and _count(env, "SLURM_STEP_NUM_TASKS") != world:
        raise UsageError(f"SLURM_NTASKS {world} (the job's tasks) but this srun step started "
                         f"SLURM_STEP_NUM_TASKS {step}: the processes would wait forever for "
                         f"{world}; start the step with srun --ntasks {world}, or give the job "
                         f"as many tasks as the step")
    devices, nodes = int(cfg.devices or 1), int(cfg.num_nodes or 1)
    if devices * nodes != world:
        raise UsageError(f"{name} {world}: {launcher} started {world} processes, but --devices "
                         f"{devices} --num-nodes {nodes} trains on {devices * nodes} (each "
                         f"process would train a model of its own); give --devices N "
                         f"--num-nodes M with N × M = {world} (N: the processes on each node)")
    per_node, place = _PER_NODE[launcher]
    if per_node and env.get(per_node) and _count(env, per_node) != devices:
        raise UsageError(f"{per_node} {env[per_node]} (the processes {launcher} started on this "
                         f"node) but --devices {devices} (the processes on each node); give "
                         f"--devices {env[per_node]}")
    if env.get(place) and _count(env, place) >= devices:
        raise UsageError(f"{place} {env[place]} (this process's place on its node) is beyond "
                         f"--devices {devices} (the processes on each node, from 0)")


def _check_interactive_step(env) -> str | None:
    """An srun step of several tasks in a job named ``bash`` or ``interactive`` (``srun --pty
    bash``'s, or salloc's own name), which Lightning takes for an interactive shell: it reads
    none of SLURM's variables there, so each task of ``salloc -N2`` then ``srun attnlab train``
    trained a model of its own (with ``--devices N``, each with N - 1 processes it started
    itself), all in one run directory, and said nothing. A task above 0 (``SLURM_PROCID``) is
    evidence of several: refused. Task 0 cannot be told from the one shell of ``srun
    --ntasks-per-node 4 --pty bash`` (the step's variables, one process, where ``--devices 4``
    starts the others as Lightning means it to): returned, a warning to say. A launcher that
    sets ``WORLD_SIZE`` (torchrun inside the step) is ``launched``'s."""
    tasks, name = env.get("SLURM_STEP_NUM_TASKS"), env.get("SLURM_JOB_NAME")
    if name not in _INTERACTIVE_JOBS or not tasks or _count(env, "SLURM_STEP_NUM_TASKS") <= 1:
        return None
    why = (f"SLURM_JOB_NAME {name}: Lightning takes a job of this name for an interactive "
           f"shell and reads no SLURM variable")
    named = "name the job (salloc or sbatch --job-name NAME)"
    if env.get("SLURM_PROCID") and _count(env, "SLURM_PROCID") > 0:
        raise UsageError(f"{why}, so each of this srun step's {tasks} tasks "
                         f"(SLURM_STEP_NUM_TASKS) would train a model of its own (this is task "
                         f"SLURM_PROCID {env['SLURM_PROCID']}); {named}, or run one task (srun "
                         f"--ntasks 1) with --devices N")
    return (f"warning: {why}: in the one shell of an srun step (srun --pty bash) --devices N "
            f"starts its processes itself, but if srun started this command as each of the "
            f"step's {tasks} tasks (SLURM_STEP_NUM_TASKS), each trains a model of its own: "
            f"{named}, or run one task (srun --ntasks 1)")


def _check_batch_shell(cfg: RunSettings, env) -> None:
    """Refuse more than one device in a SLURM job's own shell (no srun step): Lightning takes
    the job's ``SLURM_NTASKS`` as processes that something else starts, and starts none."""
    devices, nodes = int(cfg.devices or 1), int(cfg.num_nodes or 1)
    if devices * nodes > 1 and _slurm_job(env) and not env.get("WORLD_SIZE"):
        raise UsageError(f"SLURM_NTASKS {env['SLURM_NTASKS']} without an srun step (no "
                         f"SLURM_STEP_NUM_TASKS): in a SLURM job Lightning starts no process "
                         f"itself, so --devices {devices} --num-nodes {nodes} would wait "
                         f"forever; start the command with srun --ntasks-per-node {devices}, "
                         f"or give --devices 1")


def check_port(cfg: RunSettings, environ: dict[str, str] | None = None) -> None:
    """Refuse a ``MASTER_PORT`` that something on this machine already listens on, where this
    process is the one that would listen there (rank 0 of a run of several processes that
    Lightning's launcher or srun starts, or that are given ``WORLD_SIZE`` by hand on several
    machines; torchrun's agent, ``TORCHELASTIC_RUN_ID``, listens there itself): rank 0 failed
    at ``launch`` with torch's "EADDRINUSE" traceback, after the run directory was made and
    the other ranks started. A second run with the run before's ``MASTER_PORT`` is the usual
    case."""
    import socket

    env = os.environ if environ is None else environ
    if not env.get("MASTER_PORT") or processes(cfg) < 2:
        return
    port = _port(env)
    if later_process(env) or env.get("TORCHELASTIC_RUN_ID"):  # torchrun's agent's port
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's store does
        try:
            probe.bind(("", port))
        except OSError as e:
            raise UsageError(f"MASTER_PORT {port}: {e.strerror or e} on this machine (another "
                             f"run's, or another program's), where rank 0 of this run would "
                             f"listen for the others; give a free port, or unset MASTER_PORT "
                             f"to have one chosen") from None


def _port(env) -> int:
    """The port ``MASTER_PORT`` holds, or a ``UsageError`` naming its value: one beyond 65535
    failed with a traceback (``bind``'s OverflowError), a word was called not a whole number
    of processes.

    Examples:
        >>> _port({"MASTER_PORT": "29500"})
        29500
        >>> _port({"MASTER_PORT": "70000"})
        Traceback (most recent call last):
        attnlab.errors.UsageError: MASTER_PORT '70000' is not a port number (1 to 65535)
    """
    value = env["MASTER_PORT"]
    if value.isascii() and value.isdigit() and 1 <= int(value) <= 65535:
        return int(value)
    raise UsageError(f"MASTER_PORT {value!r} is not a port number (1 to 65535)")


def check_hardware(cfg, *, quiet: bool = False,
                   check_precision: Callable[[str], None] | None = None):
    """Refuse a --accelerator/--devices/--num-nodes/--strategy/--precision combination this
    machine cannot run (FSDP without a GPU, ``--accelerator gpu`` without one), before the run
    directory is created: Fabric's own check (a Fabric is only configured here, nothing is
    launched), its message on one line. Returns the run config (``attnlab.run_config``) with
    the precision Fabric will run.

    What Fabric will really run is reported and recorded: ``16-mixed`` on a CPU runs as
    ``bf16-mixed``, and the returned config's ``precision`` (so config.yaml) says so: a run's
    record names what it ran, not what was asked. ``--strategy ddp`` with one process trains
    without DDP (``single_process_ddp``), reported in one line; config.yaml keeps ``ddp``, which
    with one process trains the same numbers and on more devices is what was asked.
    ``check_precision``, if given, is called with the precision Fabric will run before any
    note is printed: a refusal it raises stays the one line of its error.
    """
    launch_warning = check_launch(cfg)
    check_port(cfg)
    auto = cfg.precision == "auto"
    if auto:
        cfg = cfg.derive(precision="32")  # until the device is known
    try:
        built = make_fabric(cfg)
    except (ValueError, RuntimeError, TypeError) as e:
        given = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in _hardware(cfg).items())
        raise UsageError(f"{given}: {' '.join(str(e).split())}") from None
    asked, runs = str(cfg.precision), str(built.strategy.precision.precision)
    device = type(built.accelerator).__name__.removesuffix("Accelerator").lower() or "this device"
    said = None
    if auto:
        cfg = cfg.derive(precision=auto_precision(device, int(cfg.model_dim or 0)))
        if cfg.precision != "32":  # not the float32 one might expect: say so
            said = (f"note: --precision auto: {cfg.precision} on this {device} for a model "
                    f"{cfg.model_dim} wide (recorded in config.yaml; --precision 32 for "
                    f"float32)")
    elif runs.removesuffix("-true") != asked.removesuffix("-true"):
        cfg = cfg.derive(precision=runs.removesuffix("-true") if runs in ("32-true", "64-true")
                         else runs)
        said = (f"note: --precision {asked} is not available on {device}; running "
                f"{cfg.precision} (recorded in config.yaml)")
    if check_precision is not None:
        check_precision(str(cfg.precision))
    for line in (said, launch_warning):
        if line and not quiet:
            print(line, file=sys.stderr, flush=True)
    if device == "cpu" and not quiet and (note := emulated_bf16_note(str(cfg.precision))):
        print(note, file=sys.stderr, flush=True)
    if single_process_ddp(cfg) and not quiet:
        print(f"note: --strategy ddp with one process (--devices {cfg.devices}): training as "
              f"one process without DDP, which would only slow it (config.yaml keeps ddp, for a "
              f"--resume on more devices)", file=sys.stderr, flush=True)
    cores = os.cpu_count() or 1
    devices = built.world_size // max(1, int(cfg.num_nodes or 1))
    if device == "cpu" and devices > cores and not quiet:
        print(f"note: --devices {devices} on CPU starts {devices} training processes on "
              f"{cores} cores; they will share them", file=sys.stderr, flush=True)
    return cfg
