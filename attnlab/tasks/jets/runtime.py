"""The runtime module of ``attnlab train jets``, the part that imports torch (the spec:
``attnlab.tasks.jets``): streaming the jets, training the ``JetTagger``, the test metrics, the
baselines, the figures, and the use of a trained run (``evaluate``, ``predict``,
``plot attention``).

Jets are read in chunks (``attnlab.tasks.jets.data.read_jets`` of an index range): a training step
holds one chunk, never the file. A batch holds jets of similar length (``by_length``) and is
cut to its own longest jet (the rest is padding, which the tagger ignores), so a batch of
60-constituent jets costs 60², not 200². Lightning is imported inside ``run`` only. The
baselines (``--baselines``) are here too: the jet mass, τ3/τ2, their likelihood ratio and a
Particle Flow Network trained like the tagger.

Shapes: B jets, N constituents, D model width, H heads, L layers.
"""
from __future__ import annotations

import itertools
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from ...data.resumable import ResumableBatches, shard
from ...errors import UsageError
from ...explorer.view import layers_of
from ...models.configs import JetTaggerConfig
from ...models.jet_physics import (NUM_FEATURES, constituent_features, constituent_mask, jet_mass,
                                   tau32)
from ...models.jet_tagger import JetTagger, scaled_features
from ...models.pfn import ParticleFlowNetwork
from ...run_config import RunSettings
from ...runs import (check_data_files, check_test_files, load_weights, pin_data_files, readable,
                     write_json)
from ...settings import epoch_steps
from ...viz import decimals_half_up, plot_jet_attention, plot_jet_roc, plot_jet_scores
from ...explorer.record import fit_weights_text
from ..base import (attends, config_from_run, each_input, loads, predicts, probabilities_of,
                    Numbered, rng_kept, without_nan_metrics)
from .checks import split_ranges
from .data import check_jet_file, count_jets, jet_digests, read_jets, shared_jets
from .metrics import baseline_scores, roc, roc_auc, tagging_metrics

__all__ = ["Split", "splits", "trim", "JetBatches", "score_split", "model_config_of",
           "build_model", "run", "load", "evaluate", "input_reader", "predict_many",
           "attention_maps", "figures", "LABELS"]

LABELS = ("QCD", "top")  # is_signal_new = 0, 1
BASELINES = {"mass": "jet mass alone", "tau32": "τ3/τ2 alone",  # baselines.json key: its name
             "likelihood": "(mass, τ3/τ2) likelihood", "pfn": "Particle Flow Network"}
EVAL_BATCH = 256  # jets per forward pass when scoring (no gradients: memory is B·H·N² floats)
WINDOW = 16  # batches whose jets are sorted by length together (``by_length``)


# ---- the jets: index ranges of files, read in chunks ------------------------------------------

@dataclass(frozen=True)
class Split:
    """Jets ``start`` .. ``stop - 1`` of ``path``."""

    path: str
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def chunks(self, size: int) -> list["Split"]:
        return [Split(self.path, a, min(a + size, self.stop)) for a in range(self.start, self.stop, size)]

    def read(self, max_constituents: int) -> tuple[np.ndarray, np.ndarray]:
        """(p4 (n, max_constituents, 4) float32, labels (n,) int64)."""
        return read_jets(self.path, self.start, self.stop, max_constituents=max_constituents)


def splits(cfg: RunSettings, *, val_file: bool = True) -> dict[str, Split]:
    """train / val / test: index ranges of --data, or the whole --val / --test files;
    ``val_file=False``: a --val FILE is not read (``evaluate``: no test jet depends on it)."""
    n = cfg.max_constituents  # a file may hold only the constituents that are read
    ranges = split_ranges(count_jets(cfg.data, "--data", max_constituents=n),
                          val_fraction=cfg.val_fraction, test_fraction=cfg.test_fraction,
                          val=cfg.val, test=cfg.test)
    found = {name: Split(cfg.data, a, b) for name, (a, b) in ranges.items()}
    for name, path in (("val", cfg.val if val_file else None), ("test", cfg.test)):
        if path:
            found[name] = Split(path, 0, count_jets(path, f"--{name}", max_constituents=n))
    return found


def trim(p4: np.ndarray) -> torch.Tensor:
    """The jets as a tensor without the padding columns after every jet's last constituent
    (a zero row between two constituents is padding too: the count of constituents would
    cut the last ones off)."""
    real = np.flatnonzero(np.asarray(p4[..., 0] > 0).any(0))  # columns with E > 0 in a jet
    used = int(real[-1]) + 1 if len(real) else 1
    return torch.from_numpy(np.array(p4[:, :used], dtype=np.float32))  # (B, N'), a copy


def by_length(p4: np.ndarray, rows: np.ndarray, size: int) -> list[np.ndarray]:
    """``rows`` of ``p4`` in batches of ``size``, windows of ``WINDOW`` batches sorted by the
    number of constituents: a batch's jets have similar lengths, so cutting it to its longest
    (``trim``) leaves little padding. (Attention costs N² per jet: padded to 150 constituents, a
    70-constituent jet costs (150 / 70)² ≈ 4.6 times its own.)"""
    lengths = (p4[rows, :, 0] > 0).sum(1)
    batches, window = [], WINDOW * size
    for a in range(0, len(rows), window):
        part = rows[a:a + window][np.argsort(lengths[a:a + window], kind="stable")]
        batches += [part[b:b + size] for b in range(0, len(part), size)]
    return batches


class JetBatches(ResumableBatches):
    """Shuffled training batches ``(p4 (B, N', 4), labels (B,))`` streamed chunk by chunk.

    Each epoch visits the chunks in a random order; a chunk's jets are shuffled, grouped into
    batches of similar length (``by_length``) and the batches shuffled, all drawn from the seed,
    the epoch and the chunk. So a batch needs one chunk in memory, and the ``start``-th batch of
    an epoch is found without reading the chunks before it (``--resume``). Under DDP rank r
    takes batches r, r + world, ...
    """

    def __init__(self, split: Split, cfg: RunSettings) -> None:
        super().__init__()
        self.B, self.seed, self.n = cfg.batch_size, cfg.seed, cfg.max_constituents
        # whole batches per chunk: only a split's last chunk ends with a short batch
        self.parts = split.chunks(max(1, cfg.chunk_size // self.B) * self.B)
        self.sizes = [-(-len(c) // self.B) for c in self.parts]  # batches per chunk (ceil)
        self.examples = sum(len(c) for c in self.parts)

    def __len__(self) -> int:
        return max(1, self.kept(sum(self.sizes)) // self._shard()[1])

    def all_batches(self) -> int:
        return sum(self.sizes)

    def epoch_batches(self, epoch: int, start: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        rank, world = self._shard()
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.parts))
        first = 0  # the epoch's index of the chunk's first batch
        # as many batches on every rank (``len``): a step of every rank takes as many
        for c in order:
            wanted = [b for b in range(self.sizes[c])
                      if (first + b) % world == rank and start <= (first + b) // world < len(self)]
            first += self.sizes[c]
            if not wanted:
                continue
            p4, labels = self.parts[c].read(self.n)
            rng = np.random.default_rng([self.seed, epoch, int(c)])
            batches = by_length(p4, rng.permutation(len(labels)), self.B)
            batches = [batches[i] for i in rng.permutation(len(batches))]
            for b in wanted:
                yield trim(p4[batches[b]]), torch.as_tensor(labels[batches[b]])


class EveryJetBatch(JetBatches):
    """``JetBatches`` of every process at once, in one: the batches that one step of a DDP run
    deals out to all its processes (the PFN baseline, which rank 0 trains alone). An epoch
    keeps the batches the run's processes kept (``kept``): with 9 batches on 2 processes the
    run leaves the ninth out, so the PFN does too (it took it, a short step of jets the tagger
    never saw, and from the next epoch on its steps held other jets than the tagger's)."""

    def _shard(self) -> tuple[int, int]:
        return 0, 1

    def _sharing(self) -> int:
        return shard()[1]  # the run's processes, not this one stream's


def fixed_batches(split: Split, cfg: RunSettings, limit: int | None = None):
    """The first ``limit`` jets of ``split`` (all by default) as batches, in file order within
    each window of ``WINDOW`` batches sorted by length (``by_length``)."""
    for p4, labels, _ in _numbered_batches(split, cfg, limit):
        yield p4, labels


def _numbered_batches(split: Split, cfg: RunSettings, limit: int | None = None):
    """``fixed_batches``' batches, each with its jets' rows in the file (n,)."""
    stop = split.stop if limit is None else min(split.stop, split.start + limit)
    for chunk in Split(split.path, split.start, stop).chunks(cfg.chunk_size):
        p4, labels = chunk.read(cfg.max_constituents)
        for rows in by_length(p4, np.arange(len(labels)), EVAL_BATCH):
            yield trim(p4[rows]), torch.as_tensor(labels[rows]), chunk.start + rows


@torch.no_grad()
def score_split(model: JetTagger, split: Split, cfg: RunSettings,
                rows: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(P(top) (n,) float64, labels (n,)) of every jet of ``split``, streamed (in the order of
    ``fixed_batches``: every scorer of a split sees its jets in the same order); ``rows``,
    when given, gets each batch's rows of the file, in that order."""
    model.eval()
    scores, labels = [], []
    for p4, y, numbers in _numbered_batches(split, cfg):
        scores.append(top_probability(model(p4)).numpy())
        labels.append(y.numpy())
        if rows is not None:
            rows.append(numbers)
    return np.concatenate(scores), np.concatenate(labels)


def top_probability(logits: torch.Tensor) -> torch.Tensor:
    """P(top) (N,) of logits (N, 2), in float64. A softmax in float32 rounds P(top) to exactly
    1.0 once the top logit leads by about 17 (1 - P below float32's spacing under 1): every jet
    the tagger is that sure of would tie, however differently it ranks them, and the ROC, AUC
    and rejections, which rank jets by P(top), would lose the order the model gave them where
    the rejection at ε_S = 0.3 is read. float64 moves that far out, not away: 1 - P is resolved
    to about 1e-16 only, so two jets tie once their 1 - P differ by less (the closer their
    leads, the sooner: leads 0.5 apart from about 36), and every jet ties from a lead of
    about 37 (the lead itself would keep them apart; the scores are P(top) for now)."""
    return logits.double().softmax(-1)[:, 1]


# ---- the model --------------------------------------------------------------------------------

def model_config_of(cfg: RunSettings) -> JetTaggerConfig:
    """The tagger's config from a run's configuration."""
    return config_from_run(JetTaggerConfig, cfg)


def build_model(cfg: RunSettings) -> JetTagger:
    """The (randomly initialised) tagger a run's configuration describes."""
    return JetTagger(model_config_of(cfg))


@loads
def load(task, run_dir: Path, cfg: RunSettings) -> JetTagger:
    model = build_model(cfg)
    load_weights(model, Path(run_dir) / "model.safetensors")
    return model.eval()


# ---- training ---------------------------------------------------------------------------------

def _files_of(cfg: RunSettings) -> dict[str, str | None]:
    """The run's jet files by option name (None where not given)."""
    return {"data": cfg.data, "val": cfg.val, "test": cfg.test}


def run(task, cfg: RunSettings, run_dir: Path,
        checked: Any = None) -> dict[str, float]:
    """Train on the train jets, test, draw the figures (and score the baselines), write DIR."""
    from torch.utils.data import DataLoader

    from ...training import finish, fit
    from ...training.classifier import ClassifierModule

    cfg = cfg.derive(**pin_data_files(_files_of(cfg), cfg.data_sha256, resuming=cfg.resume))
    parts = splits(cfg)
    cfg = cfg.derive(jets={name: len(s) for name, s in parts.items()})
    train = JetBatches(parts["train"], cfg)
    steps = epoch_steps(cfg, len(train), cfg.epochs) if cfg.epochs else cfg.max_steps
    val = list(fixed_batches(parts["val"], cfg, cfg.val_jets))
    model = build_model(cfg)
    module = ClassifierModule(model, cfg, steps, scores=validation_auc)
    result = fit(module, train, DataLoader(val, batch_size=None),
                 cfg, run_dir, max_steps=steps,
                 # --val-every as given (not cut to one epoch), else once an epoch
                 val_check_interval=cfg.val_every or None)
    metrics, extra = {}, None
    if result.is_global_zero:  # other DDP ranks write nothing
        scores, labels = score_split(model, parts["test"], cfg)
        metrics = tagging_metrics(scores, labels, prefix="test_")
        # the PFN trains for the steps of the weights the tagger is scored with: its last
        # step, or its best validation's (--keep-best), or where it stopped (--patience)
        trained = int(result.best.get("best_step", result.steps))
        extra = baselines(cfg, parts, labels, steps, trained) if cfg.baselines else None
        figures(model, scores, labels, parts["test"], cfg, Path(run_dir), extra,
                weights=fit_weights_text(result.steps, result.best))
    metrics = finish(cfg, run_dir, model, metrics, result)
    if extra is not None:
        write_json(Path(run_dir) / "baselines.json", _baselines_record(extra, len(labels)))
        print(comparison_table(metrics, extra, len(labels), trained))
    return metrics


def validation_auc(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """``auc`` (logged as ``val_auc``): the ROC's area over the validation jets (logits (N, 2),
    labels (N,)), with P(top) as the score, as the test split's ``test_auc``; NaN where the jets
    validated hold one class only, which has no ROC."""
    labels_np = labels.cpu().numpy()
    if len(np.unique(labels_np)) < 2:
        return {"auc": float("nan")}
    return {"auc": roc_auc(top_probability(logits).cpu().numpy(), labels_np)}


def baselines(cfg: RunSettings, parts: dict[str, Split], test_labels: np.ndarray,
              steps: int, trained: int | None = None
              ) -> dict[str, tuple[dict[str, float], np.ndarray]]:
    """name -> (test metrics, scores) of each baseline on the test jets: the jet mass alone,
    τ3/τ2 alone, their likelihood ratio (each fit on the training jets), and a Particle Flow
    Network trained on the same training jets with a schedule of ``steps`` steps, for the
    ``trained`` steps (default: all) of the tagger's weights."""
    print("baselines: jet mass and τ3/τ2 of the training and test jets ...", file=sys.stderr,
          flush=True)
    train_x, train_y = physics_features(parts["train"], cfg)
    test_x, _ = physics_features(parts["test"], cfg)
    found = baseline_scores(train_x, train_y, test_x)  # mass, tau32, likelihood
    found["pfn"] = score_split(train_pfn(cfg, parts["train"], steps, stop=trained),
                               parts["test"], cfg)[0]
    return {name: (tagging_metrics(s, test_labels, prefix="test_"), np.asarray(s))
            for name, s in found.items()}


@torch.no_grad()
def physics_features(split: Split, cfg: RunSettings) -> tuple[np.ndarray, np.ndarray]:
    """((jet mass, τ3/τ2) (n, 2), labels (n,)) of every jet of ``split``, streamed."""
    features, labels = [], []
    for p4, y in fixed_batches(split, cfg):
        mask = constituent_mask(p4)
        features.append(torch.stack([jet_mass(p4, mask), tau32(p4, mask)], -1).numpy())
        labels.append(y.numpy())
    return np.concatenate(features).astype(np.float64), np.concatenate(labels)


class PFNTagger(torch.nn.Module):
    """The Particle Flow Network on the tagger's inputs: four-momenta in, logits out, with
    the same scaled constituent features, so ``score_split`` and the training loop serve both."""

    def __init__(self) -> None:
        super().__init__()
        self.pfn = ParticleFlowNetwork(num_features=NUM_FEATURES)

    def forward(self, p4: torch.Tensor) -> torch.Tensor:
        x, mask = scaled_features(p4)  # float32 kinematics, as the tagger's
        return self.pfn(x.to(self.pfn.f[0].weight.dtype), mask)  # (B, 2), the weights' dtype

    @torch.no_grad()
    def probabilities(self, p4: torch.Tensor) -> torch.Tensor:
        return self(p4).softmax(-1)


def train_pfn(cfg: RunSettings, train: Split, steps: int, *,
              stop: int | None = None) -> PFNTagger:
    """A PFN trained as the tagger was: the same batches, optimiser, schedule and steps, and
    the same batches a step (``pfn_step``): under ``--accumulate K`` on W processes (DDP) the
    tagger's step took K batches on each, so the PFN, trained on one process, takes those K·W
    (``EveryJetBatch``); the last step of an epoch takes the batches left. Its schedule runs
    over ``steps``; it stops after ``stop`` of them (default: all), where the tagger's weights
    were taken (``--keep-best``, ``--patience``)."""
    from ...training import module  # Lightning: loaded by training only

    torch.manual_seed(cfg.seed)
    pfn = PFNTagger()
    # the tagger's AdamW groups (--weight-decay on matrices only); a PFN has no Transformer
    # blocks, so under --optimizer muon all of it is AdamW's
    settings = replace(module.OptimizerSettings.of(cfg), optimizer="adamw")
    opt, schedule = module.make_optimizer(module.optimizer_groups(pfn, settings), settings,
                                          model_dim=cfg.model_dim, max_steps=steps)
    batches, step = EveryJetBatch(train, cfg), 0
    accumulate = int(cfg.accumulate or 1) * shard()[1]  # a step of all processes' batches
    last = steps if stop is None else min(stop, steps)
    while step < last:
        group: list[tuple[torch.Tensor, torch.Tensor]] = []
        # None: the epoch's end, where the batches left make a short step (streamed: an
        # epoch's batches are never all held)
        for batch in itertools.chain(batches, [None]):
            if batch is not None:
                group.append(batch)
            if not group or (len(group) < accumulate and batch is not None):
                continue
            loss = pfn_step(pfn, opt, group, cfg.grad_clip)
            schedule.step()
            group, step = [], step + 1
            if step % max(1, last // 5) == 0 or step == last:
                print(f"baselines: PFN step {step}/{last}  train_loss {loss:.4f}",
                      file=sys.stderr, flush=True)
            if step == last:
                break
    return pfn.eval()


def pfn_step(pfn: torch.nn.Module, optimizer: torch.optim.Optimizer,
             batches: list[tuple[torch.Tensor, torch.Tensor]], grad_clip: float | None) -> float:
    """One optimiser step of the PFN on ``batches`` ((p4 (B_i, N_i, 4), labels (B_i,)) each:
    one, or ``--accumulate`` of them), whose gradients add up to those of one batch of all
    their jets: each batch's mean loss weighted by its share of the jets, the rule of the
    training loop's ``loss_shares``. Returns the step's loss (that weighted mean)."""
    from ...training.engine import loss_shares

    shares = loss_shares([len(labels) for _, labels in batches])
    total = 0.0
    for share, (p4, labels) in zip(shares, batches):
        loss = F.cross_entropy(pfn(p4), labels) * share
        loss.backward()
        total += float(loss.detach())
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(pfn.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad()
    return total


def _baselines_record(extra, test_jets: int) -> dict[str, Any]:
    return {"test_jets": test_jets, **{name: readable(m) for name, (m, _) in extra.items()}}


def comparison_table(metrics: dict[str, float], extra, test_jets: int,
                     trained: int | None = None) -> str:
    """The tagger and every baseline on the same test jets, one row each; ``trained``: the
    steps of the tagger's weights, which the PFN trained for too (a line under the table)."""
    rows = [("this run's tagger", metrics), *((BASELINES[k], m) for k, (m, _) in extra.items())]
    width = max(len(name) for name, _ in rows)
    lines = [f"\non the same {test_jets:,} test jets:",
             f"  {'':<{width}}  {'AUC':>6}  {'accuracy':>8}  {'1/eB@0.3':>8}  {'1/eB@0.5':>8}"]
    for name, m in rows:
        lines.append(f"  {name:<{width}}  {m['test_auc']:6.4f}  {m['test_accuracy']:8.4f}  "
                     f"{m['test_rejection_30']:8.1f}  {m['test_rejection_50']:8.1f}")
    if trained is not None and "pfn" in extra:
        lines.append(f"  (the tagger's weights and the PFN: {trained:,} steps each)")
    return "\n".join(lines)


# ---- figures ----------------------------------------------------------------------------------

def figures(model: JetTagger, scores: np.ndarray, labels: np.ndarray, test: Split,
            cfg: RunSettings, run_dir: Path, extra=None, *, weights: str | None = None
            ) -> None:
    """``roc.png`` (the tagger, and the baselines when scored), ``scores.png`` and
    ``attention.png`` (the first top jet of the test jets; its title names ``weights``, the
    step ``explorer.record.fit_weights_text`` says)."""
    curves = {"tagger": (*roc(scores, labels), roc_auc(scores, labels))}
    for key, (m, s) in (extra or {}).items():
        curves[BASELINES[key]] = (*roc(s, labels), m["test_auc"])
    plot_jet_roc(curves, run_dir / "roc.png", title=f"top tagging: {len(labels):,} test jets")
    plot_jet_scores(scores, labels, run_dir / "scores.png", names=LABELS,
                    title=f"tagger scores on {len(labels):,} test jets")
    row, p4 = first_top(test, cfg)
    draw_jet(model, p4, run_dir / "attention.png",
             f"test jet {row} (top): P(top) = {float(model.probabilities(p4)[0, 1]):.3f}",
             record=weights)


def first_top(split: Split, cfg: RunSettings) -> tuple[int, torch.Tensor]:
    """(row in ``split``, p4 (1, N, 4)) of its first top jet."""
    for chunk in split.chunks(EVAL_BATCH):
        p4, labels = chunk.read(cfg.max_constituents)
        if labels.any():
            row = int(np.argmax(labels == 1))
            return chunk.start - split.start + row, trim(p4[row:row + 1])
    raise ValueError("no top jet in the split")  # validate checked both classes


def _constituents(p4: torch.Tensor) -> torch.Tensor:
    """(n,) the columns of one jet (1, N, 4) that hold its constituents, in file order: a zero
    row (padding) may sit between two, so the first n columns are not they."""
    return constituent_mask(p4)[0].nonzero().squeeze(1)


@torch.no_grad()
def draw_jet(model: JetTagger, p4: torch.Tensor, path: Path, title: str,
             record: str | None = None) -> Path:
    """One jet (1, N, 4) in the (Δη, Δφ) plane with the last encoder block's attention
    (heads averaged) as lines, and the class token's attention as colour when it has one;
    ``record``, a line under the title: which run, weights and scores (``plot attention``)."""
    mask = constituent_mask(p4)
    real = _constituents(p4)  # (n,): not the padding, wherever it is
    features = constituent_features(p4.float(), mask)[0, real]  # (n, 7): Δη, Δφ, log pT, ...
    weights = model.get_attention_maps(p4)[-1][0].mean(0)[real][:, real]  # (n, n), heads avg
    token = model.class_attention_maps(p4)
    token = token[-1][0].mean(0)[0, real].numpy() if token else None  # (n,)
    return plot_jet_attention(features[:, 0].numpy(), features[:, 1].numpy(),
                              features[:, 2].exp().numpy(), weights.numpy(), path,
                              title=f"{title}\nlast block's attention (heads averaged)"
                                    + (f"\n{record}" if record else ""),
                              token_weights=token)


# ---- using a trained run ----------------------------------------------------------------------

@rng_kept()  # a notebook's seeded draws after it are as before it
def evaluate(task, run_dir: Path, cfg: RunSettings, data: str | None) -> dict[str, float]:
    """The test metrics on the run's test jets, or on every jet of ``data``."""
    if data is None:
        check_test_files(_files_of(cfg), cfg.data_sha256)
        test = splits(cfg, val_file=False)["test"]
    else:
        digests: list[np.ndarray] = []
        test = Split(data, 0, check_jet_file(data, what="--data", digests=digests,
                                             max_constituents=cfg.max_constituents))
        _note_trained_on(cfg, np.concatenate(digests), f"--data {data}")
    rows: list[np.ndarray] = []
    scores, labels = score_split(load(task, run_dir, cfg), test, cfg, rows)
    finite = np.isfinite(scores)
    in_file_order = np.empty(len(test), dtype=bool)
    in_file_order[np.concatenate(rows) - test.start] = finite
    # a NaN score is no ranking: the metrics are null (``without_nan_metrics``), and those
    # of the finite scores stand in to be nulled (tagging_metrics refuses a NaN)
    metrics = tagging_metrics(np.where(finite, scores, 0.5), labels, prefix="test_")
    # each jet named FILE:ROW, as predict --input takes it
    names = Numbered(lambda i: f"{test.path}:{test.start + i}", len(test))
    return without_nan_metrics(metrics, in_file_order.tolist(), names, run_dir)


def _note_trained_on(cfg: RunSettings, held: np.ndarray, what: str) -> None:
    """The warning that ``train jets`` gives a --test file, for ``evaluate --data``: some of
    its jets (``held``: their ``jet_digests``) are training jets of the run, so its metrics are
    partly of jets the model learned (the training range is re-read from the run's --data;
    nothing is said where that file is gone or changed since: its jets are not the ones
    trained on)."""
    try:
        check_data_files({"data": cfg.data}, {"data": (cfg.data_sha256 or {}).get("data")})
        n = count_jets(cfg.data, "--data", max_constituents=cfg.max_constituents)
        a, b = split_ranges(n, val_fraction=cfg.val_fraction, test_fraction=cfg.test_fraction,
                            val=cfg.val, test=cfg.test)["train"]
        trained = [jet_digests(chunk.read(cfg.max_constituents)[0])
                   for chunk in Split(cfg.data, a, b).chunks(cfg.chunk_size)]
    except UsageError:
        return
    note = shared_jets(np.concatenate(trained), held, what)
    if note:
        print(note, file=sys.stderr, flush=True)


def read_input(text: str, cfg: RunSettings,
               counted: dict[str, int] | None = None) -> tuple[torch.Tensor, int]:
    """``FILE:ROW`` -> (that jet (1, N, 4), its label); ``UsageError`` naming --input.
    Only the file's layout and that row are read and checked (not the whole file, so that a bad
    value in another row does not refuse the input); ``counted`` (file -> its jets) keeps
    each file's layout check to once per call of many inputs."""
    path, sep, row = text.strip().rpartition(":")
    if not sep or not path or not row.strip().isdecimal():
        raise UsageError(f"--input must be FILE:ROW (a jets file and a row number from 0), "
                         f"got {text.strip()!r}")
    counted = {} if counted is None else counted
    if path not in counted:
        counted[path] = count_jets(path, "--input", max_constituents=cfg.max_constituents)
    n, row = counted[path], int(row)
    if n == 0:
        raise UsageError(f"--input {text.strip()}: {path} has no jets")
    if row >= n:
        raise UsageError(f"--input {text.strip()}: row {row} is past the end of {path} "
                         f"({n:,} jets: rows 0..{n - 1})")
    p4, labels = read_jets(path, row, row + 1, max_constituents=cfg.max_constituents,
                           what="--input")  # refuses a row with no constituents, too
    return trim(p4), int(labels[0])



def input_reader(task, run_dir: Path, cfg: RunSettings):
    """One input's jet (N, 4), as ``predict_many`` reads it (``read_input``)."""
    counted: dict[str, int] = {}  # each file's layout is checked once, not once per line
    return lambda text: read_input(text, cfg, counted)[0][0]


@predicts
def predict_many(task, run_dir: Path, cfg: RunSettings, texts: list[str],
                 labels: list[str]) -> list[dict[str, Any]]:
    """Each ``FILE:ROW`` jet's class and probabilities; the jets zero-padded into batches (the
    tagger ignores padding)."""
    jets = each_input(texts, labels, input_reader(task, run_dir, cfg))  # (N_i, 4) each
    model = load(task, run_dir, cfg)
    found = []
    for start in range(0, len(jets), EVAL_BATCH):
        p4 = torch.nn.utils.rnn.pad_sequence(jets[start:start + EVAL_BATCH], batch_first=True)
        for p in model.probabilities(p4):  # (2,)
            k = int(p.argmax())
            probabilities = probabilities_of(LABELS, p)
            # --json: the label alone, its score under "probabilities" as every task with
            # scores gives it (not "top 0.9351", one string); the line keeps the score
            found.append({"prediction": LABELS[k], "probabilities": probabilities,
                          "line": f"{LABELS[k]} {probabilities[LABELS[k]]:.4f}"})
    return found


def attention_figure(task, run_dir: Path, cfg: RunSettings, text: str, out: Path, *,
                     record: str | None = None) -> Path:
    """``plot attention DIR --input FILE:ROW``: that jet in the (Δη, Δφ) plane, particles
    sized by pT, the last block's strongest attention weights as lines (``draw_jet``), and
    ``record`` (which run, weights and scores) under its title."""
    p4, label = read_input(text, cfg)
    model = load(task, run_dir, cfg)
    top = float(model.probabilities(p4)[0, 1])
    path, _, row = text.strip().rpartition(":")
    return draw_jet(model, p4, Path(out),
                    title=f"{Path(path).name} row {row}: a {LABELS[label]} jet, P(top) = {top:.3f}",
                    record=record)


@attends
def attention_maps(task, run_dir: Path, cfg: RunSettings, text: str, *, most: int = 20):
    """``plot attention DIR --input FILE:ROW``: every block's attention among the ``most``
    hardest constituents (the files order them by pT), labelled by rank and pT in GeV."""
    p4, _ = read_input(text, cfg)
    real = _constituents(p4)[:most]
    maps = load(task, run_dir, cfg).get_attention_maps(p4)  # L × (1, H, N, N)
    pt = torch.hypot(p4[0, real, 1], p4[0, real, 2])
    # 12.5 GeV reads "13", as the legend of attention.png writes it; 0.4 GeV "0.4", not "0"
    labels = [f"{i}:{decimals_half_up(v, 0)}" for i, v in enumerate(pt.tolist())]
    return [m[0][:, real][:, :, real] for m in maps], labels, labels


def attention_layers(task, run_dir: Path, cfg: RunSettings, text: str):
    """``attnlab view DIR --input FILE:ROW``: every block's attention among all the jet's
    constituents (hardest first), labelled by rank and pT in GeV."""
    maps, keys, queries = attention_maps(task, run_dir, cfg, text, label="--input",
                                         most=cfg.max_constituents)
    return layers_of(maps, kind="self"), queries, keys
