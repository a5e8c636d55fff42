"""The training loop's overhead: ``attnlab train`` against a bare PyTorch loop (first
written when the loop was Lightning's Trainer).

    OMP_NUM_THREADS=1 python -m benchmarks.train_loop [--threads 1] [--tasks reverse lm ...]
        [--steps N] [--warmup 5] [--rounds 5] [--breakdown [all]] [--quick]

For every task of ``attnlab train`` with its default configuration (classify, lm and jets need
data: a synthetic CSV, a synthetic text and a small file from ``attnlab data jets`` are made in a
temporary directory), the task's own ``run`` builds what the CLI builds — the configuration
(``build_config``), the seed, the data loaders, the model and the ``TaskModule`` — and is
stopped where it calls ``attnlab.training.fit`` (its arguments are kept, nothing trains). Then,
in one process, alternating rounds A, B, B, A, ... (so changes of load hit both sides alike):

- **A**: ``attnlab.training.engine.fit`` itself on a fresh copy of the module: attnlab's loop on
  Lightning Fabric (``Loop.run``: Fabric's module and optimiser wrappers, ``fabric.backward``,
  ``fabric.clip_gradients``, the non-finite check, the progress lines as when stderr is not a
  terminal, the CSV log, the task's stop condition, validation every ``--val-every`` steps
  and checkpoints every ``--checkpoint-every``), stopped after ``--warmup`` + ``--steps`` steps
  (or earlier by the task's own early stop). A probe around ``Loop.train_step`` notes
  ``time.perf_counter()`` as each step starts (see ``_probe``).
- **B**: a bare loop on another fresh copy (the same initial weights) over the same loader from
  the same position (so the same batches and the same data cost): the module's ``loss`` (forward,
  loss and the logged accuracies, as A computes them), ``zero_grad``, ``backward``,
  ``clip_grad_norm_`` (when the task clips), the optimiser's and scheduler's ``step``, both built
  by ``make_optimizer`` as the loop builds them (weight-decay groups where the run decays).

A step's time is the interval between two step starts; the first ``--warmup`` of each round are
dropped, and so is, on both sides, any step after which A validated or wrote a checkpoint ("val"
counts them). A ms and B ms are medians over all rounds. A/B, the verdict, is the median over
steps of A_i / B_i: step i of a round ran the same batch on both sides, and jets, classify and
translate batches differ in cost, so a ratio of medians (also shown) can compare different
batches. The "mean" columns are means of the same steps (they include periodic work such as the
progress lines and the CSV log). "data" is the loader alone (median per batch), inside both A
and B. Without ``--steps``, each task gets about ``--seconds`` of bare-loop steps per round (20
to 200).

Target: A/B <= 1.05 for every task. ``--breakdown`` then, for each task over the
target (``--breakdown all``: every task), times the parts of a step on both sides by wrapping
functions — data, the module's loss, backward, clipping, the optimiser's, ``zero_grad`` and the
scheduler's step, and on side A Fabric's wrappers around them and the loop's per-step methods; the rest is the loop itself — in µs per step side by side.
Not a test: the times depend on the machine and its load. Everything is written under a
temporary directory, removed at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import functools
import gc
import inspect
import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASKS = ("reverse", "copy", "sort", "anomaly", "classify", "translate", "lm", "jets", "graph")
TARGET = 1.05


# ---- the tasks' data (the three tasks that read the user's files) -----------------------------
def write_reviews(path: Path, rows: int = 4000, seed: int = 0) -> None:
    """A CSV of synthetic 3-class reviews (20-100 words), as benchmarks/classify_speed.py."""
    rng = random.Random(seed)
    words = ["good great lovely superb".split(), "bad awful poor dull".split(),
             "okay average plain fair".split()]
    filler = "the movie was a and plot acting film really quite it this".split()
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for _ in range(rows):
            label = rng.randrange(3)
            toks = [rng.choice(filler) for _ in range(rng.randint(20, 100))]
            toks.append(rng.choice(words[label]))
            rng.shuffle(toks)
            w.writerow([" ".join(toks), "pos neg meh".split()[label]])


def write_text(path: Path, chars: int = 300_000, seed: int = 0) -> None:
    """A text of random words in lines, for ``train lm --data`` (char tokenizer)."""
    rng = random.Random(seed)
    words = ("the quick brown fox jumps over a lazy dog and the cat sat on the mat while "
             "rain fell softly in an old town where people walked slowly home").split()
    lines, n = [], 0
    while n < chars:
        line = " ".join(rng.choices(words, k=rng.randint(5, 15)))
        lines.append(line)
        n += len(line) + 1
    path.write_text("\n".join(lines) + "\n")


def write_jets(path: Path, per_class: int) -> float:
    """``attnlab data jets`` (Pythia 8 + FastJet, one job): its seconds."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attnlab", "data", "jets", "--signal", str(per_class),
                    "--background", str(per_class), "--out", str(path), "--jobs", "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


# ---- what `attnlab train TASK` builds ---------------------------------------------------------
class _Captured(Exception):
    def __init__(self, args: tuple, kwargs: dict) -> None:
        super().__init__("fit called")
        self.args, self.kwargs = args, kwargs


@dataclass
class Setup:
    """The arguments the task's ``run`` passes to ``attnlab.training.fit``."""

    module: Any
    train_loader: Any
    val_loader: Any
    cfg: dict[str, Any]
    fit_kwargs: dict[str, Any]  # max_steps, val_check_interval, stop_at, limit_val_batches
    loader_state: dict[str, int] | None = None


def capture(task_name: str, given: dict[str, Any], run_dir: Path, threads: int) -> Setup:
    """Do what ``attnlab train TASK`` does up to its call of ``fit`` (configuration, seed,
    threads, the task's data, model and module), and return that call's arguments."""
    import torch

    import attnlab.training as training
    from attnlab.commands.train import build_config, seed_all
    from attnlab.tasks import get_task
    from attnlab.training.engine import check_hardware

    # float32 on both sides: the bare loop has no autocast (lm's default --precision auto would
    # pick bf16-mixed on a CPU with bf16 instructions)
    cfg = build_config(task_name, {"out": str(run_dir), "precision": "32", **given})
    cfg = check_hardware(cfg, quiet=True).derive(out=str(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_all(cfg.seed)
    torch.set_num_threads(threads)

    def grab(*args, **kwargs):
        raise _Captured(args, kwargs)

    real, training.fit = training.fit, grab
    try:
        task = get_task(task_name)
        task.runtime().run(task, cfg, run_dir)
    except _Captured as c:
        given_args = inspect.signature(real).bind(*c.args, **c.kwargs).arguments
        train_loader = given_args.pop("train_loader")
        setup = Setup(copy.deepcopy(given_args.pop("module")), train_loader,
                      given_args.pop("val_loader"), given_args.pop("cfg"),
                      {k: v for k, v in given_args.items() if k != "run_dir"})
    else:
        raise RuntimeError(f"{task_name}: the task's run did not call attnlab.training.fit")
    finally:
        training.fit = real
    if hasattr(train_loader, "state_dict") and hasattr(train_loader, "load_state_dict"):
        setup.loader_state = dict(train_loader.state_dict())
    return setup


def fresh_loader(setup: Setup):
    """The training loader back at the position the CLI would start from (so both sides of
    every round draw the same batches)."""
    if setup.loader_state is not None:
        setup.train_loader.load_state_dict(dict(setup.loader_state))
        return setup.train_loader
    return copy.deepcopy(setup.train_loader)


# ---- side A: attnlab's own fit ----------------------------------------------------------------
def _probe(total: int, clocks: "Clocks | None" = None):
    """A probe that notes perf_counter as each step starts (and, when timing parts, a snapshot
    of the clocks), asks the loop to stop after ``total`` + 1 steps have started (so ``total``
    whole intervals), and notes the steps after which the loop validated or saved a
    checkpoint. ``probe.installed()`` puts it around ``engine.Loop.train_step`` for a run."""
    import attnlab.training.engine as engine

    class Probe:
        def __init__(self) -> None:
            self.starts: list[float] = []
            self.snaps: list[dict[str, float]] = []
            self.busy_after: set[int] = set()  # step counts after which it validated or saved

        def _note_busy(self, loop) -> None:
            for name in ("validate", "save"):  # the instance's methods, noted then called
                real = getattr(loop, name)

                def noted(*a, real=real, **k):
                    self.busy_after.add(len(self.starts))
                    return real(*a, **k)
                setattr(loop, name, noted)

        @contextlib.contextmanager
        def installed(self):
            real, starts, snaps = engine.Loop.train_step, self.starts, self.snaps

            def train_step(loop, batch):
                if not starts:
                    self._note_busy(loop)
                if clocks is not None:
                    snaps.append(clocks.snap())
                starts.append(time.perf_counter())
                if len(starts) > total:  # this step is the last: its start ends the intervals
                    loop.stopped = "the benchmark's steps are done"
                return real(loop, batch)

            engine.Loop.train_step = train_step
            try:
                yield
            finally:
                engine.Loop.train_step = real

    return Probe()


def run_a(setup: Setup, work: Path, warmup: int, steps: int, clocks: "Clocks | None" = None):
    """One round of side A: its probe (step starts, clock snapshots, busy steps)."""
    import attnlab.training.engine as engine

    module = copy.deepcopy(setup.module)
    if clocks is not None:
        clocks.wrap_instance(module, "loss", "module.loss")
    probe = _probe(warmup + steps, clocks)
    kw = dict(setup.fit_kwargs)
    run_dir = Path(tempfile.mkdtemp(dir=work, prefix="a-"))
    loader = fresh_loader(setup)
    if clocks is not None:
        loader = timed_loader(loader, clocks)
    # The progress lines (stderr not a terminal: ten a run) are written, to /dev/null, so that
    # they cost what they cost without filling this table's output.
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stderr(null), \
                contextlib.redirect_stdout(null), probe.installed():
            engine.fit(module, loader, setup.val_loader, setup.cfg, run_dir, **kw)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return probe


def intervals(starts: list[float], busy_after: set[int], warmup: int):
    """(seconds between step starts after the warm-up; the indices of those that held a
    validation or a checkpoint)."""
    gaps = [b - a for a, b in zip(starts, starts[1:])][warmup:]
    busy = {i - warmup for i in range(len(starts) - 1) if (i + 1) in busy_after}
    return gaps, {i for i in busy if i >= 0}


def kept(gaps: list[float], dropped: set[int]) -> list[float]:
    return [d for i, d in enumerate(gaps) if i not in dropped]


# ---- side B: a bare PyTorch loop --------------------------------------------------------------
def run_b(setup: Setup, warmup: int, steps: int, clocks: "Clocks | None" = None):
    """One round of side B: the step starts (and, with ``clocks``, a snapshot at each)."""
    import torch

    from attnlab.training.module import decay_groups, make_optimizer

    module = copy.deepcopy(setup.module)
    cfg, max_steps = setup.cfg, setup.fit_kwargs["max_steps"]
    wd = float(cfg.get("weight_decay") or 0.0)
    params = decay_groups(module, wd) if wd else list(module.parameters())
    opt, sched = make_optimizer(params, cfg, model_dim=int(cfg.get("model_dim", 64)),
                                max_steps=max_steps)
    clip = float(cfg.get("grad_clip") or 0.0)
    tensors = list(module.parameters())
    loader = fresh_loader(setup)
    if clocks is not None:
        clocks.wrap_instance(module, "loss", "module.loss")
        loader = timed_loader(loader, clocks)
    module.train()
    it = iter(loader)

    def fetch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:  # the next epoch, as the loop starts it
            it = iter(loader)
            return next(it)

    starts, snaps = [], []
    for _ in range(warmup + steps + 1):
        if clocks is not None:
            snaps.append(clocks.snap())
        starts.append(time.perf_counter())
        batch = fetch()
        loss, _ = module.loss(batch)
        opt.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(tensors, clip)
        opt.step()
        sched.step()
    return starts, snaps


def data_only(setup: Setup, warmup: int, steps: int) -> float:
    """The loader alone: median seconds per batch."""
    loader = fresh_loader(setup)
    it = iter(loader)
    times = []
    for _ in range(warmup + steps):
        start = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            it = iter(loader)
            next(it)
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


# ---- --breakdown: what each part of a step costs ----------------------------------------------
class Clocks:
    """Wall time spent inside chosen functions, by label, accumulated; ``snap`` copies the
    totals (taken at each step's start, so that the busy steps can be left out)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def timed(self, fn, label: str):
        seconds = self.seconds

        @functools.wraps(fn)  # keeps e.g. torch's `hooked` mark on Optimizer.step
        def timed(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - start

        return timed

    def wrap(self, owner, name: str, label: str):
        """Time ``owner.name`` (a class's or module's attribute); returns the undo."""
        real = owner.__dict__[name]
        setattr(owner, name, self.timed(real, label))
        return lambda: setattr(owner, name, real)

    def wrap_instance(self, obj, name: str, label: str) -> None:
        """Time ``obj.name``, still a method of ``obj`` (Fabric calls a module's ``loss``
        through its wrapper only if it is one)."""
        timed = self.timed(getattr(obj, name), label)
        setattr(obj, name, types.MethodType(lambda _, *a, **k: timed(*a, **k), obj))

    def snap(self) -> dict[str, float]:
        return dict(self.seconds)


class _TimedLoader:
    """A loader whose batches are timed ("data"); every other attribute is the loader's."""

    def __init__(self, loader, clocks: Clocks) -> None:
        self._loader, self._clocks = loader, clocks

    def __iter__(self):
        it, seconds = iter(self._loader), self._clocks.seconds
        while True:
            start = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            finally:
                seconds["data"] = seconds.get("data", 0.0) + time.perf_counter() - start
            yield batch

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _TimedSizedLoader(_TimedLoader):
    def __len__(self) -> int:
        return len(self._loader)


def timed_loader(loader, clocks: Clocks):
    """``loader`` with its batches timed; sized when it is (the loop reads its length)."""
    return (_TimedSizedLoader if hasattr(loader, "__len__") else _TimedLoader)(loader, clocks)


def _targets():
    """(owner, attribute, label) of the functions timed: torch's parts of a step (both sides),
    Fabric's wrappers around them and the loop's per-step methods (side A)."""
    import torch
    from torch.optim.lr_scheduler import LRScheduler

    from attnlab.training import engine
    from attnlab.training.hardware import fabric

    lf = fabric()
    from lightning_fabric.wrappers import _FabricModule, _FabricOptimizer

    adam = next(c for c in torch.optim.AdamW.__mro__ if "step" in c.__dict__)
    return [(torch.Tensor, "backward", "backward"),
            (torch.nn.utils, "clip_grad_norm_", "clip_grad_norm_"),
            (torch.optim.Optimizer, "zero_grad", "zero_grad"),
            (adam, "step", "optimizer.step"),
            (LRScheduler, "step", "scheduler step"),
            (_FabricModule, "forward", "Fabric: module wrapper"),
            (lf.Fabric, "backward", "Fabric: backward"),
            (lf.Fabric, "clip_gradients", "Fabric: clip_gradients"),
            (_FabricOptimizer, "step", "Fabric: optimizer wrapper"),
            (engine.Loop, "_watch_finite", "loop: _watch_finite (loss.item())"),
            (engine.Loop, "_show", "loop: _show (progress, CSV log)"),
            (engine.Loop, "_told_to_stop", "loop: _told_to_stop")]


def _per_step(starts, snaps, busy_after: set[int], warmup: int) -> dict[str, float]:
    """µs per step of each clock over the measured steps that were not busy, the whole step
    ("step") included."""
    _, dropped = intervals(starts, busy_after, warmup)
    keep = [i for i in range(warmup, len(starts) - 1) if i - warmup not in dropped]
    totals: dict[str, float] = {"step": 0.0}
    for i in keep:
        totals["step"] += starts[i + 1] - starts[i]
        for k in snaps[i + 1]:
            totals[k] = totals.get(k, 0.0) + snaps[i + 1][k] - snaps[i].get(k, 0.0)
    return {k: v / max(1, len(keep)) * 1e6 for k, v in totals.items()}


def _exclusive(raw: dict[str, float]) -> dict[str, float]:
    """Disjoint parts of a step from the nested clocks; "the loop itself" is the rest."""
    g = raw.get

    def around(wrapper: str, inner: str) -> float:  # side A only: Fabric's wrapper, less inside
        return g(wrapper, 0.0) - g(inner, 0.0) if wrapper in raw else 0.0

    parts = {"data": g("data", 0.0),
             "forward + loss + accuracies (module.loss)": g("module.loss", 0.0),
             "backward": g("backward", 0.0),
             "Fabric: backward (around it)": around("Fabric: backward", "backward"),
             "clip_grad_norm_": g("clip_grad_norm_", 0.0),
             "Fabric: clip_gradients (around it)":
                 around("Fabric: clip_gradients", "clip_grad_norm_"),
             "optimizer.step (AdamW's own)": g("optimizer.step", 0.0),
             "Fabric: optimizer wrapper (around it)":
                 around("Fabric: optimizer wrapper", "optimizer.step"),
             "zero_grad": g("zero_grad", 0.0), "scheduler step": g("scheduler step", 0.0)}
    parts.update({k: v for k, v in raw.items() if k.startswith("loop:")})
    parts["the loop itself (step - all above)"] = raw["step"] - sum(parts.values())
    parts["step"] = raw["step"]
    return parts


def breakdown(setup: Setup, task: str, work: Path, args, steps: int) -> None:
    """Print where side A's extra time goes: rounds of A and B (alternated) with their parts
    timed, µs per step."""
    found: dict[str, list] = {}
    for r in range(args.rounds):
        clocks = Clocks()
        undo = [clocks.wrap(*t) for t in _targets()]
        try:
            def side_a():
                probe = run_a(setup, work, args.warmup, steps, clocks)
                return _exclusive(_per_step(probe.starts, probe.snaps, probe.busy_after,
                                            args.warmup))

            def side_b():
                starts, snaps = run_b(setup, args.warmup, steps, clocks)
                return _exclusive(_per_step(starts, snaps, set(), args.warmup))

            first, second = (side_a, side_b) if r % 2 == 0 else (side_b, side_a)
            x = _clean(first)
            clocks.seconds.clear()
            y = _clean(second)
            a, b = (x, y) if r % 2 == 0 else (y, x)
        finally:
            for u in reversed(undo):
                u()
        for k in dict.fromkeys([*a, *b]):
            found.setdefault(k, []).append((a.get(k, 0.0), b.get(k, 0.0)))
    print(f"  {task}: where a step's time goes, µs per step (mean of {args.rounds} instrumented "
          f"rounds of each side, alternated; each timed call adds ~1 µs):")
    print(f"    {'part':<46} {'A':>8} {'B':>8} {'A - B':>8}")
    for k, v in found.items():
        a, b = statistics.fmean(x for x, _ in v), statistics.fmean(y for _, y in v)
        if k == "step":
            print(f"    {'-' * 72}")
        if abs(a) >= 0.5 or abs(b) >= 0.5:
            print(f"    {k:<46} {a:8.0f} {b:8.0f} {a - b:+8.0f}", flush=True)


# ---- the measurement --------------------------------------------------------------------------
@dataclass
class Row:
    task: str
    steps: int = 0  # measured steps per round and side (asked for)
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    busy: int = 0
    data: float = float("nan")
    note: str = ""
    per_round: list[float] = field(default_factory=list)  # each round's paired A/B

    @property
    def ratio(self) -> float:
        """median(A) / median(B)."""
        return statistics.median(self.a) / statistics.median(self.b)

    @property
    def paired(self) -> float:
        """The median over steps of A_i / B_i: step i of a round ran the same batch on both
        sides, so this holds when batches differ in cost (jets, classify, translate), where a
        ratio of medians compares different batches."""
        return statistics.median(x / y for x, y in zip(self.a, self.b))


def steps_for(setup: Setup, args) -> int:
    """--steps, or (auto) enough steps for about --seconds per round and side, from a short
    bare-loop probe (which also warms the allocator up): 20 to 200, within the task's budget."""
    budget = setup.fit_kwargs["max_steps"] - args.warmup - 2
    if args.steps:
        return max(1, min(args.steps, budget))
    probe = statistics.median(intervals(run_b(setup, args.warmup, 10)[0], set(), args.warmup)[0])
    return max(1, min(budget, 200, max(20, round(args.seconds / probe))))


def _clean(fn, *args, **kwargs):
    gc.collect()
    return fn(*args, **kwargs)


def measure(setup: Setup, work: Path, args, steps: int) -> Row:
    """Alternating rounds of A and B (A B, B A, ...), the same steps of the same batches."""
    row = Row("", steps)

    def side_a():
        probe = run_a(setup, work, args.warmup, steps)
        return intervals(probe.starts, probe.busy_after, args.warmup)

    def side_b():
        return intervals(run_b(setup, args.warmup, steps)[0], set(), args.warmup)[0]

    for r in range(args.rounds):
        # neither side always runs first; each starts with no garbage left
        if r % 2 == 0:
            a, busy = _clean(side_a)
            b = _clean(side_b)
        else:
            b = _clean(side_b)
            a, busy = _clean(side_a)
        # A may stop early (reverse's early stop); the steps after which A validated or saved
        # a checkpoint are dropped from both sides
        a, b = kept(a, busy), kept(b[:len(a)], busy)
        row.a += a
        row.b += b
        row.busy += len(busy)
        row.per_round.append(statistics.median(x / y for x, y in zip(a, b)))
    row.data = data_only(setup, args.warmup, steps)
    return row


def given_for(task: str, inputs: dict[str, Path], threads: int) -> dict[str, Any] | str:
    """The flags the benchmark gives ``attnlab train TASK`` (or why it skips the task)."""
    given: dict[str, Any] = {"threads": threads}
    if task == "classify":
        given["data"] = str(inputs["reviews"])
    elif task == "lm":
        given["data"] = str(inputs["text"])
    elif task == "jets":
        if "jets" not in inputs:
            return "skipped: --jets 0 (no jets file)"
        given["data"] = str(inputs["jets"])
    return given


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                   help=f"tasks to measure (default: every one of {', '.join(TASKS)} that "
                        f"attnlab train offers)")
    p.add_argument("--steps", type=int, default=None,
                   help="measured steps per round and side (default: about --seconds of "
                        "them, 20 to 200)")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="without --steps: the bare loop's seconds per round")
    p.add_argument("--warmup", type=int, default=5, help="steps dropped at each round's start")
    p.add_argument("--rounds", type=int, default=5,
                   help="rounds per side, alternated (A B, B A, A B, ...)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (both sides)")
    p.add_argument("--jets", type=int, default=400, metavar="N",
                   help="jets per class generated for the jets task (0: skip it)")
    p.add_argument("--breakdown", nargs="?", const="over", choices=("over", "all"),
                   help="where side A's extra time goes: for each task over the target "
                        "(--breakdown), or for every task measured (--breakdown all)")
    p.add_argument("--quick", action="store_true", help="--steps 20 --rounds 2 --jets 200")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.rounds, args.jets = 20, 2, 200
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from attnlab.tasks import available_tasks

    torch.set_num_threads(args.threads)
    offered = list(available_tasks())
    tasks = args.tasks or [t for t in TASKS if t in offered] + [t for t in offered if t not in TASKS]
    unknown = [t for t in tasks if t not in offered]
    if unknown:
        raise SystemExit(f"--tasks: not offered by attnlab train: {', '.join(unknown)} "
                         f"(offered: {', '.join(offered)})")
    begin = time.perf_counter()
    print(f"train loop: {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s), load average {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds per side, {args.warmup} warm-up steps each", flush=True)
    work = Path(tempfile.mkdtemp(prefix="attnlab-train-loop-"))
    rows: list[Row] = []
    try:
        inputs = {"reviews": work / "reviews.csv", "text": work / "text.txt"}
        if "classify" in tasks:
            write_reviews(inputs["reviews"])
        if "lm" in tasks:
            write_text(inputs["text"])
        if "jets" in tasks and args.jets > 0:
            seconds = write_jets(work / "jets.h5", args.jets)
            inputs["jets"] = work / "jets.h5"
            print(f"  jets: {2 * args.jets} jets generated in {seconds:.0f} s", flush=True)
        for task in tasks:
            given = given_for(task, inputs, args.threads)
            if isinstance(given, str):
                rows.append(Row(task, note=given))
                continue
            start = time.perf_counter()
            setup = None
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # a task's own prints
                    setup = capture(task, given, work / f"{task}-cli", args.threads)
                steps = steps_for(setup, args)
                row = measure(setup, work, args, steps)
                row.task = task
                rows.append(row)
                print(f"  {task}: A {statistics.median(row.a) * 1e3:.2f} ms/step, "
                      f"B {statistics.median(row.b) * 1e3:.2f} ms/step, paired A/B "
                      f"{row.paired:.3f} (rounds: {', '.join(f'{x:.3f}' for x in row.per_round)}; "
                      f"{len(row.a)} steps per side, {time.perf_counter() - start:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
                if args.breakdown == "all" or args.breakdown and row.paired > TARGET:
                    breakdown(setup, task, work, args, steps)
            except Exception as e:  # one broken task must not hide the others
                traceback.print_exc()
                rows.append(Row(task, note=f"error: {type(e).__name__}: {e}"[:100]))
            finally:
                setup = None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(rows, args)
    print(f"load average {os.getloadavg()[0]:.2f} at the end; "
          f"{time.perf_counter() - begin:.0f} s in all")
    return 0


def print_table(rows: list[Row], args) -> None:
    print(f"\nsteady-state ms/step over {args.rounds} alternated rounds per side "
          f"(target: A/B <= {TARGET})")
    head = (f"{'task':<10} {'steps':>5} {'A ms':>8} {'B ms':>8} {'A/B':>6} {'medA/medB':>9} "
            f"{'target':>6} {'A-B µs':>7} {'A mean':>8} {'B mean':>8} {'mean A/B':>8} "
            f"{'data ms':>7} {'busy':>4}")
    print(head)
    print("-" * len(head))
    for r in rows:
        if not r.a:
            print(f"{r.task:<10} {r.note}")
            continue
        a, b = statistics.median(r.a), statistics.median(r.b)
        am, bm = statistics.fmean(r.a), statistics.fmean(r.b)
        print(f"{r.task:<10} {len(r.a):5d} {a * 1e3:8.2f} {b * 1e3:8.2f} {r.paired:6.3f} "
              f"{r.ratio:9.3f} {'met' if r.paired <= TARGET else 'MISSED':>6} "
              f"{(a - b) * 1e6:7.0f} {am * 1e3:8.2f} {bm * 1e3:8.2f} {am / bm:8.3f} "
              f"{r.data * 1e3:7.2f} {r.busy:4d}")
    print("A: attnlab's fit (its loop on Lightning Fabric, the task's stop condition, the CSV log, the "
          "loaders); B: the bare loop on the same batches.\nA ms, B ms: medians; A/B: median over "
          "steps of A_i/B_i (the same batch on both sides; the verdict); medA/medB: ratio of the "
          "medians;\nsteps: measured per side, all rounds; data: the loader alone (inside A and "
          "B); busy: steps after which A validated or saved a checkpoint, dropped from both sides.")


if __name__ == "__main__":
    raise SystemExit(main())
