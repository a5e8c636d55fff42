"""The training loop's overhead: ``attnlab train`` against a bare PyTorch loop (issue #17, target 1).

    OMP_NUM_THREADS=1 python -m benchmarks.train_loop [--threads 1] [--tasks reverse lm ...]
        [--steps N] [--warmup 5] [--rounds 5] [--breakdown] [--quick]

For every task of ``attnlab train`` with its default configuration (classify, lm and jets need
data: a synthetic CSV, a synthetic text and a small file from ``attnlab data jets`` are made in a
temporary directory), the task's own ``run`` builds what the CLI builds — the configuration
(``build_config``), the seed, the data loaders, the model and the Lightning module — and is
stopped where it calls ``attnlab.training.fit`` (its arguments are kept, nothing trains). Then,
in one process, alternating rounds A, B, A, B, ... (so changes of load hit both sides alike):

- **A**: ``attnlab.training.engine.fit`` itself on a fresh copy of the module (the CLI's
  Trainer: checkpoint callback, CSV logger, gradient clipping, attnlab's callbacks and the
  task's, validation every ``--val-every`` steps, progress lines as when stderr is not a
  terminal), stopped after ``--warmup`` + ``--steps`` steps (or earlier by the task's own early
  stop); a callback notes ``time.perf_counter()`` at every ``on_train_batch_start``.
- **B**: a bare loop on another fresh copy (the same initial weights) over the same loader from
  the same position (so the same batches, and the same data cost): forward, the module's loss
  alone (no accuracy), ``zero_grad``, ``backward``, ``clip_grad_norm_`` (when the task clips),
  the optimiser's and scheduler's ``step`` — the objects ``configure_optimizers`` returns.

A step's time is the interval between two step starts; the first ``--warmup`` of each round
are dropped, and so is, on both sides, any step in which Lightning validated (the bare loop does
not validate; "val" counts them). A ms and B ms are medians over all rounds. A/B, the verdict,
is the median over steps of A_i / B_i: step i of a round ran the same batch on both sides, and
jets, classify and translate batches differ in cost, so a ratio of medians (also shown) can
compare different batches. The "mean" columns are means of the same steps (they include
periodic work such as writing the CSV log). "data" is the loader alone (median per batch),
inside both A and B. Without ``--steps``, each task gets about ``--seconds`` of bare-loop steps
per round (20 to 200); short rounds, alternated A B, B A, ..., let a change of load (other
processes on the machine) hit both sides alike.

Target (issue #17): A/B <= 1.05 for every task. ``--breakdown`` then, for each task over the
target: (1) rounds of A and B with their parts timed by wrapping functions (data, forward, loss,
``self.log``, backward, clipping, the optimiser's and scheduler's steps, Lightning's batch
transfer and per-step logger bookkeeping, each callback's per-step hooks; the rest is the loop
itself), µs per step side by side; (2) alternated rounds of full A, B and variants of A:
Lightning's loop alone (no ``self.log``, no attnlab callbacks, no logger), a terminal's
progress bar (Rich, Lightning's default; and TQDM every 20 steps), and B's loop on Lightning
Fabric (monkeypatched in this process only). Not a test: the times depend on the machine and its load.
Everything is written under a temporary directory, removed at the end.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

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
    fit_kwargs: dict[str, Any]  # max_steps, val_check_interval, callbacks, limit_val_batches
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
    check_hardware(cfg, quiet=True)
    cfg["out"] = str(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_all(cfg["seed"])
    torch.set_num_threads(threads)

    def grab(*args, **kwargs):
        raise _Captured(args, kwargs)

    real, training.fit = training.fit, grab
    try:
        get_task(task_name).run(cfg, run_dir)
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
def _step_timer(total: int, clocks: "Clocks | None" = None):
    from lightning.pytorch.callbacks import Callback

    class StepTimer(Callback):
        """perf_counter at each training step's start (and, when timing parts, a snapshot of
        the clocks); stops after ``total`` steps have started and one more (so ``total`` whole
        intervals); notes validations."""

        def __init__(self) -> None:
            self.starts: list[float] = []
            self.snaps: list[dict[str, float]] = []
            self.validated_after: set[int] = set()  # step counts at which validation ran

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if clocks is not None:
                self.snaps.append(clocks.snap())
            self.starts.append(time.perf_counter())

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if len(self.starts) > total:
                trainer.should_stop = True

        def on_validation_start(self, trainer, pl_module):
            self.validated_after.add(len(self.starts))

    return StepTimer()


class _FakeTerminal(io.TextIOWrapper):
    """stderr that says it is a terminal (so the CLI shows its progress bar) and writes to
    /dev/null."""

    def isatty(self) -> bool:
        return True


@dataclass
class Variant:
    """Side A changed (for ``--breakdown``)."""

    name: str
    module: Callable[[Any], None] | None = None  # changes the module before fit
    trainer: Callable[[Any], None] | None = None  # changes the Trainer make_trainer built
    tty: bool = False


def run_a(setup: Setup, work: Path, warmup: int, steps: int, variant: Variant | None = None):
    """One round of side A: (intervals in seconds, one per measured step; the indices of
    those that held a validation)."""
    timer = run_a_timer(setup, work, warmup, steps, variant)
    return _intervals(timer.starts, timer.validated_after, warmup)


def _intervals(t: list[float], validated_after: set[int], warmup: int):
    intervals = [b - a for a, b in zip(t, t[1:])][warmup:]
    validated = {i - warmup for i in range(len(t) - 1) if (i + 1) in validated_after}
    return intervals, {i for i in validated if i >= 0}


def run_a_timer(setup: Setup, work: Path, warmup: int, steps: int,
                variant: Variant | None = None, clocks: "Clocks | None" = None):
    """One round of side A; its StepTimer."""
    import attnlab.training.engine as engine

    module = copy.deepcopy(setup.module)
    if variant and variant.module:
        variant.module(module)
    timer = _step_timer(warmup + steps, clocks)
    kw = dict(setup.fit_kwargs)
    kw["callbacks"] = [*copy.deepcopy(kw.get("callbacks") or []), timer]
    real_make = engine.make_trainer
    if variant and variant.trainer:
        def make(*a, **k):
            trainer = real_make(*a, **k)
            variant.trainer(trainer)
            return trainer
        engine.make_trainer = make
    run_dir = Path(tempfile.mkdtemp(dir=work, prefix="a-"))
    # The CLI's progress lines (stderr not a terminal) or its line redrawn in place (a
    # terminal) are written, to /dev/null, so that they cost what they cost without filling
    # this table's output. (Both streams claim a terminal, as they would in one.)
    tty = bool(variant and variant.tty)
    err = _FakeTerminal(open(os.devnull, "wb"), write_through=True) if tty else open(os.devnull, "w")
    out = _FakeTerminal(open(os.devnull, "wb"), write_through=True) if tty else sys.stdout
    try:
        with err, contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            engine.fit(module, fresh_loader(setup), setup.val_loader, setup.cfg, run_dir, **kw)
    finally:
        engine.make_trainer = real_make
        shutil.rmtree(run_dir, ignore_errors=True)
        if tty:
            out.close()
    return timer


def kept(intervals: list[float], dropped: set[int]) -> list[float]:
    return [d for i, d in enumerate(intervals) if i not in dropped]


# ---- side B: a bare PyTorch loop --------------------------------------------------------------
def bare_loss(module, net=None) -> Callable[[Any], Any]:
    """The loss the module's ``training_step`` computes, and nothing else (no accuracy), with
    ``net`` (default: the module's torch model) as the network."""
    import torch.nn.functional as F

    from attnlab.training.classifier import ClassifierModule
    from attnlab.training.graph import GraphModule
    from attnlab.training.lm import LMModule, lm_loss
    from attnlab.training.predictor import TransformerPredictor
    from attnlab.training.seq2seq import Seq2SeqModule

    net = net if net is not None else _network(module)
    if isinstance(module, TransformerPredictor):
        def loss(batch):
            inputs, labels = batch
            logits = net(inputs)  # (B, T, K)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
    elif isinstance(module, LMModule):
        def loss(batch):
            return lm_loss(net, *batch)
    elif isinstance(module, Seq2SeqModule):
        pad_id = module.model.pad_id

        def loss(batch):  # seq2seq_loss without its token accuracy
            src, tgt = batch
            tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
            logits = net(src, tgt_in)  # (B, T-1, V)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                                   ignore_index=pad_id, label_smoothing=module.label_smoothing)
    elif isinstance(module, GraphModule):
        def loss(batch):
            x, adjacency, targets = batch
            logits = net(x, adjacency)  # (N, C)
            counted = targets != -100
            return F.cross_entropy(logits[counted], targets[counted])
    elif isinstance(module, ClassifierModule):
        def loss(batch):
            *inputs, targets = batch
            return F.cross_entropy(net(*inputs), targets)
    else:
        raise TypeError(f"no bare loss for {type(module).__name__}")
    return loss


def run_fabric(setup: Setup, warmup: int, steps: int) -> list[float]:
    """A probe for --breakdown: side B's loop through Lightning Fabric (``fabric.setup``,
    ``fabric.backward``, ``fabric.clip_gradients``) — what a training loop of attnlab's own
    on Fabric, instead of the Trainer's, would cost per step."""
    from lightning.fabric import Fabric

    module = copy.deepcopy(setup.module)
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    fabric = Fabric(accelerator="cpu", devices=1, precision=str(setup.cfg.get("precision", "32")))
    net, fopt = fabric.setup(_network(module), opt)
    loss_of = bare_loss(module, net)
    clip = setup.cfg.get("grad_clip") or None
    net.train()
    loader = fresh_loader(setup)
    it = iter(loader)
    starts = []
    for _ in range(warmup + steps):
        starts.append(time.perf_counter())
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        loss = loss_of(batch)
        fopt.zero_grad()
        fabric.backward(loss)
        if clip:
            fabric.clip_gradients(net, fopt, max_norm=clip)
        fopt.step()
        sched.step()
    starts.append(time.perf_counter())
    return [b - a for a, b in zip(starts, starts[1:])][warmup:]


def run_b(setup: Setup, warmup: int, steps: int, clocks: "Clocks | None" = None):
    """One round of side B: the intervals (seconds) between step starts (with ``clocks``:
    (starts, snapshots of the clocks at each start))."""
    import torch

    module = copy.deepcopy(setup.module)
    loss_of = bare_loss(module)
    conf = module.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert conf["lr_scheduler"].get("interval") == "step"
    params = [p for group in opt.param_groups for p in group["params"]]
    clip = setup.cfg.get("grad_clip") or None
    module.train()
    loader = fresh_loader(setup)
    it = iter(loader)

    def fetch():
        nonlocal it
        try:
            return next(it)
        except StopIteration:  # the next epoch, as Lightning starts it
            it = iter(loader)
            return next(it)

    snaps = []
    if clocks is not None:
        clocks.wrap_instance(_network(module), "forward", "forward")
        loss_of = clocks.timed(loss_of, "training_step / loss")
        fetch = clocks.timed(fetch, "data: next batch")
    starts = []
    for _ in range(warmup + steps):
        if clocks is not None:
            snaps.append(clocks.snap())
        starts.append(time.perf_counter())
        batch = fetch()
        loss = loss_of(batch)
        opt.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
        sched.step()
    if clocks is not None:
        snaps.append(clocks.snap())
    starts.append(time.perf_counter())
    if clocks is not None:
        return starts, snaps
    return [b - a for a, b in zip(starts, starts[1:])][warmup:]


def _network(module):
    """The torch model whose forward the step runs: a TaskModule's ``model``, or the course's
    TransformerPredictor itself."""
    from attnlab.training.module import TaskModule

    return module.model if isinstance(module, TaskModule) else module


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


# ---- --breakdown: what each part of side A costs ----------------------------------------------
class Clocks:
    """Wall time spent inside chosen functions, by label, accumulated; ``snap`` copies the
    totals (taken at each step's start, so that the steps with a validation can be left
    out)."""

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
        setattr(obj, name, self.timed(getattr(obj, name), label))

    def snap(self) -> dict[str, float]:
        return dict(self.seconds)


# the callback hooks Lightning calls once per training step
STEP_HOOKS = ("on_train_batch_start", "on_train_batch_end", "on_before_backward",
              "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad")


def _shared_targets():
    """(owner, attribute, label) of what both sides run: torch's parts of a step."""
    import torch
    from torch.optim.lr_scheduler import LRScheduler

    found = [(torch.Tensor, "backward", "backward"),
             (torch.nn.utils, "clip_grad_norm_", "clip_grad_norm_"),
             (torch.optim.Optimizer, "zero_grad", "zero_grad"),
             (LRScheduler, "step", "scheduler step")]
    for cls in torch.optim.AdamW.__mro__:
        if "step" in cls.__dict__:
            found.append((cls, "step", "optimizer.step"))
            break
    return found


def _lightning_targets():
    """(owner, attribute, label) of what only side A runs."""
    import lightning.pytorch as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loops.fetchers import _PrefetchDataFetcher
    from lightning.pytorch.plugins.precision import Precision
    from lightning.pytorch.strategies import Strategy
    from lightning.pytorch.trainer.connectors.logger_connector.logger_connector import \
        _LoggerConnector

    import attnlab.training.engine as engine

    found = [(L.LightningModule, "log", "self.log"),
             (_LoggerConnector, "on_batch_start", "Lightning: logger connector"),
             (_LoggerConnector, "on_batch_end", "Lightning: logger connector"),
             (_LoggerConnector, "update_train_step_metrics", "Lightning: logger connector"),
             (Strategy, "batch_to_device", "Lightning: batch_to_device"),
             (_PrefetchDataFetcher, "__next__", "data: next batch"),
             (Precision, "_wrap_closure", "closure")]
    for cls in (ModelCheckpoint, engine._StopOnNonFinite, engine._RandomState,
                engine._PrintProgress, engine._TrainClock, engine._SaveOnSignal,
                engine.StopAtTarget):
        found += [(cls, hook, f"callback {cls.__name__}") for hook in STEP_HOOKS
                  if hook in cls.__dict__]
    return found


def _per_step(starts, snaps, validated_after: set[int], warmup: int) -> dict[str, float]:
    """µs per step of each clock over the measured steps without a validation, the whole
    step ("step") included."""
    _, dropped = _intervals(starts, validated_after, warmup)
    keep = [i for i in range(warmup, len(starts) - 1) if i - warmup not in dropped]
    totals: dict[str, float] = {"step": 0.0}
    for i in keep:
        totals["step"] += starts[i + 1] - starts[i]
        for k in snaps[i + 1]:
            totals[k] = totals.get(k, 0.0) + snaps[i + 1][k] - snaps[i].get(k, 0.0)
    return {k: v / len(keep) * 1e6 for k, v in totals.items()}


def _exclusive(raw: dict[str, float]) -> dict[str, float]:
    """Disjoint parts of a step from the nested clocks; "the loop itself" is the rest."""
    g = raw.get
    parts = {"data: next batch": g("data: next batch", 0.0), "forward": g("forward", 0.0),
             "loss (A: and train metrics)": g("training_step / loss", 0.0) - g("forward", 0.0)
             - g("self.log", 0.0),
             "self.log": g("self.log", 0.0), "zero_grad": g("zero_grad", 0.0),
             "backward": g("backward", 0.0), "clip_grad_norm_": g("clip_grad_norm_", 0.0),
             "optimizer.step (AdamW's own work)": g("optimizer.step", 0.0) - g("closure", 0.0),
             "scheduler step": g("scheduler step", 0.0)}
    parts.update({k: v for k, v in raw.items() if k.startswith(("Lightning:", "callback"))})
    parts["the loop itself (step - all above)"] = raw["step"] - sum(parts.values())
    parts["step"] = raw["step"]
    return parts


def instrumented_rounds(setup: Setup, work: Path, args, steps: int) -> dict[str, list]:
    """Rounds of A and B (alternated) with their parts timed: {part: [(A µs, B µs), ...]}."""
    found: dict[str, list] = {}
    for r in range(args.rounds):
        clocks = Clocks()
        undo = [clocks.wrap(*t) for t in _shared_targets() + _lightning_targets()]
        try:
            def timed_module(module):
                clocks.wrap_instance(module, "training_step", "training_step / loss")
                clocks.wrap_instance(_network(module), "forward", "forward")

            def side_a():
                timer = run_a_timer(setup, work, args.warmup, steps, Variant("timed", timed_module),
                                    clocks)
                return _exclusive(_per_step(timer.starts, timer.snaps, timer.validated_after,
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
    return found


def _no_log(module) -> None:
    """training_step computes the loss alone and logs nothing (a TaskModule's; the course's
    TransformerPredictor computes no train metrics and logs on the logger's steps only)."""
    from attnlab.training.module import TaskModule

    if isinstance(module, TaskModule):
        loss_of = bare_loss(module)
        module.training_step = lambda batch, batch_idx: loss_of(batch)
    module.log = lambda *a, **k: None
    module.log_dict = lambda *a, **k: None


def _bare_trainer(trainer) -> None:
    """Only Lightning's own callbacks (none here) and the timer stay; no logger."""
    import attnlab.training.engine as engine
    from lightning.pytorch.callbacks import ModelCheckpoint

    ours = (ModelCheckpoint, engine._StopOnNonFinite, engine._RandomState, engine._PrintProgress,
            engine._TrainClock, engine._SaveOnSignal, engine.StopAtTarget)
    trainer.callbacks = [c for c in trainer.callbacks if not isinstance(c, ours)]
    trainer.loggers = []


VARIANTS = [
    Variant("Lightning loop alone (no self.log, attnlab callbacks, logger)", module=_no_log,
            trainer=_bare_trainer),
    Variant("a terminal: the progress line redrawn in place, not ten lines", tty=True),
]


def breakdown(setup: Setup, row: "Row", work: Path, args, steps: int) -> None:
    """Print where side A's extra time goes: the instrumented parts of A, then rounds of
    full A, B and each variant of A, alternated."""
    parts = instrumented_rounds(setup, work, args, steps)
    print(f"  {row.task}: where a step's time goes, µs per step (mean of {args.rounds} "
          f"instrumented rounds of each side, alternated; ~1 µs per timed call added):")
    print(f"    {'part':<44} {'A':>8} {'B':>8} {'A - B':>8}")
    for k, v in parts.items():
        a, b = statistics.fmean(x for x, _ in v), statistics.fmean(y for _, y in v)
        if k == "step":
            print(f"    {'-' * 70}")
        if abs(a) >= 0.5 or abs(b) >= 0.5:
            print(f"    {k:<44} {a:8.0f} {b:8.0f} {a - b:+8.0f}")
    fabric = "B's loop on Lightning Fabric (a probe: no Trainer)"
    names = ["full A", "B (bare loop)", *(v.name for v in VARIANTS), fabric]
    found: dict[str, list[float]] = {n: [] for n in names}
    jobs = {"full A": lambda: run_a(setup, work, args.warmup, steps),
            "B (bare loop)": lambda: (run_b(setup, args.warmup, steps), set()),
            **{v.name: (lambda v=v: run_a(setup, work, args.warmup, steps, v)) for v in VARIANTS},
            fabric: lambda: (run_fabric(setup, args.warmup, steps), set())}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # each round starts elsewhere
        runs = {name: _clean(jobs[name]) for name in order}
        n = min(len(x) for x, _ in runs.values())
        dropped = set().union(*(d for _, d in runs.values()))
        for name, (x, _) in runs.items():
            found[name] += kept(x[:n], dropped)
    full, bare = statistics.median(found["full A"]), found["B (bare loop)"]
    print(f"  {row.task}: {args.rounds} rounds of each, alternated (median ms/step; its "
          f"difference from full A; paired ratio to B, as A/B in the table):")
    for name in names:
        m = statistics.median(found[name])
        ratio = statistics.median(x / y for x, y in zip(found[name], bare))
        print(f"    {name:<66} {m * 1e3:7.2f} {(m - full) * 1e6:+7.0f} µs  {ratio:6.3f}",
              flush=True)


# ---- the measurement --------------------------------------------------------------------------
@dataclass
class Row:
    task: str
    steps: int = 0  # measured steps per round and side (asked for)
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    validations: int = 0
    data: float = float("nan")
    note: str = ""
    per_round: list[float] = field(default_factory=list)  # each round's A/B of medians

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
    probe = statistics.median(run_b(setup, args.warmup, 10))
    return max(1, min(budget, 200, max(20, round(args.seconds / probe))))


def _clean(fn, *args, **kwargs):
    gc.collect()
    return fn(*args, **kwargs)


def measure(setup: Setup, work: Path, args, steps: int) -> Row:
    """Alternating rounds of A and B (A first), the same steps of the same batches on both."""
    row = Row("", steps)
    for r in range(args.rounds):
        # A B, B A, A B, ...: neither side always runs first; each starts with no garbage left
        if r % 2 == 0:
            a, validated = _clean(run_a, setup, work, args.warmup, steps)
            b = _clean(run_b, setup, args.warmup, steps)
        else:
            b = _clean(run_b, setup, args.warmup, steps)
            a, validated = _clean(run_a, setup, work, args.warmup, steps)
        # A may stop early (reverse's early stop); intervals in which A validated are dropped
        # from both sides
        a, b = kept(a, validated), kept(b[:len(a)], validated)
        row.a += a
        row.b += b
        row.validations += len(validated)
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
                      f"{len(row.a)} steps per side, {time.perf_counter() - start:.0f} s)",
                      flush=True)
                if args.breakdown == "all" or args.breakdown and row.paired > TARGET:
                    breakdown(setup, row, work, args, steps)
            except Exception as e:  # one broken task must not hide the others
                traceback.print_exc()
                rows.append(Row(task, note=f"error: {type(e).__name__}: {e}"[:100]))
                continue
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
            f"{'data ms':>7} {'val':>4}")
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
              f"{r.data * 1e3:7.2f} {r.validations:4d}")
    print("A: attnlab's fit (the CLI's Trainer, callbacks, logger, loaders); B: the bare loop on "
          "the same batches.\nA ms, B ms: medians; A/B: median over steps of A_i/B_i (the same "
          "batch on both sides; the verdict); medA/medB: ratio of the medians;\nsteps: measured "
          "per side, all rounds; data: the loader alone (inside A and B); val: steps with a "
          "validation, dropped from both sides.")


if __name__ == "__main__":
    raise SystemExit(main())
