"""The interface every ``attnlab train TASK`` implements.

A task is a package ``attnlab/tasks/NAME/``, whose task object(s) the registry
``attnlab/tasks/__init__.py`` imports by name:

- the **spec**, ``NAME/spec.py``: a ``Task`` subclass with the task's typed settings
  (``settings``, a dataclass of ``attnlab.settings.setting`` fields, from which its flags, their
  help, defaults and checks are generated), its ``defaults``, its cross-setting ``validate`` and
  its ``memory_estimate``. It imports neither torch nor Lightning: the CLI builds every task's
  parser at start-up, and a flag error is reported before torch is loaded. It holds no state
  between calls: what ``validate`` read that the run needs (classify's splits) is returned and
  handed to ``run``.
- the **runtime**, ``NAME/runtime.py``: module-level functions ``run(task, cfg, run_dir,
  checked)``, ``load(task, run_dir, cfg)``, ``predict_many``, ``evaluate``, ``attention_maps``
  (the ``Runtime`` protocol below), and the functions of the optional commands the task
  serves (``translate``, ``encode_prompt``, ``export_hf``, ...). Commands call them directly,
  ``task.runtime().evaluate(task, run_dir, cfg, data)``: the spec's ``Task.runtime`` imports
  the module on first use (``from . import runtime``), so that importing the spec imports no
  torch. The runtime imports torch, the models and the data at the top; Lightning only inside
  ``run`` (``predict``, ``evaluate`` and ``plot`` never load it).
- its **capabilities**, ``Task.capabilities``: one frozen ``Capabilities`` declared in the spec
  (``--quantize int8``, the optional commands, ...), which the commands read from the task
  object, never from a list of task names.
- the task's own data and scoring code beside them (``translate/data.py``,
  ``translate/scoring.py``, ``jets/data.py``, ...).

The CLI merges a task's configuration, later sources winning:
    the declared defaults  <  Task.overrides  <  --config YAML  <  flags on the command line
checks that plain dict (``check_settings``, which may normalise it), then freezes it into the
task's run config (``Task.run_config``, a class written in the spec: ``cfg.model.model_dim``,
or ``cfg.model_dim`` by name). ``runs.write_config`` writes it to ``config.yaml``, which must be
enough to rebuild the model: ``run`` adds what it derives (vocabulary sizes, labels) with
``cfg = cfg.derive(...)``, for the fields of the task's derived part and the settings it
``resolves``.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import UsageError
from .memory import weights
from ..run_config import RunSettings
from ..settings import (AdaptSettings, TrainSettings, add_flags, check, check_adapt,
                        defaults, exposed, fractions_leave_training, muon_finds_matrices)

# The training loop's flags and their defaults (docs/cli.md, "Train"), read from their one
# declaration, ``attnlab.settings.TrainSettings``.
SHARED_DEFAULTS: dict[str, Any] = defaults(TrainSettings)


def config_from_run(config: type, cfg: RunSettings, **overrides: Any):
    """The model config ``config`` (a dataclass of ``attnlab.models.configs``) of a run's
    settings ``cfg``, then ``overrides``: each field the run recorded, else what its
    declaration says a run lacking it used (``absent``), else its default. A field every run
    records (``model_dim``, ``num_layers``, ...) lacking is a ``MissingSetting`` naming the
    file and the setting, which ``attnlab.load`` reports. ``cfg.model`` is this for the task's
    own model config; a task that builds another model (classify's pretrained encoders) names
    its config here.

    Examples:
        >>> from attnlab.models.configs import CausalLMConfig
        >>> from attnlab.tasks import get_task
        >>> cfg = get_task("lm").config(model_dim=32, vocab_size=70)
        >>> config_from_run(CausalLMConfig, cfg, max_len=16).dim_feedforward
        512
    """
    return type(cfg).layout.model_config(cfg, config, **overrides)


class PlainRunConfig(RunSettings[None, None, None]):
    """The run config of a task declared without settings or a model of its own."""


@runtime_checkable
class Runtime(Protocol):
    """What every task's ``runtime.py`` defines, each function taking the task first and the
    run's typed config (``RunSettings``), which commands call through ``task.runtime()``. A
    module satisfies it by defining these functions (PEP 544: modules as implementations of
    protocols). ``load`` and ``evaluate`` of a ``quantizable`` task also take ``quantize=``;
    the functions of the optional commands are listed on ``Capabilities``."""

    def run(self, task: Task, cfg: RunSettings, run_dir: Path,
            checked: Any = None) -> dict[str, float]:
        """Train, test on the held-out split and write the run directory; return the metrics
        (the task's keys, as its docs page lists them; ``steps``, ``train_seconds``,
        ``parameters`` are added by ``attnlab.training.finish``). ``checked``: what
        ``check_settings`` returned for ``cfg`` (classify: the splits it read), or None to
        read it again."""

    def load(self, task: Task, run_dir: Path, cfg: RunSettings) -> Any:
        """The trained model rebuilt from ``cfg`` and ``model.safetensors`` (eval mode), or
        ``(model, tokenizer)`` where the run has a tokenizer."""

    def predict_many(self, task: Task, run_dir: Path, cfg: RunSettings, texts: list[str],
                     labels: list[str] | None = None) -> list[dict[str, Any]]:
        """``attnlab predict``: the model loaded once, the inputs in batches; one dict per
        input, in order: ``"prediction"`` (the answer alone: a label, a sequence, a text;
        None where the model's outputs are NaN), where the model gives them
        ``"probabilities"``, and ``"line"`` where the line ``predict`` prints says more than
        the prediction (jets: the label and its probability). A bad input is a UsageError
        named by its label in ``labels`` (``--input``, ``--input-file FILE line N``; from
        Python, ``texts[i]``). lm's also takes ``max_new_tokens=``. Defined under
        ``@predicts``, which checks the texts and takes out NaN answers for every task.
        ``attnlab predict`` calls it once per chunk of a long file, the model loaded once
        (``loads``), and its notes said once (``attnlab.notes``).

        A runtime may also define ``input_reader(task, run_dir, cfg)``: the function
        ``predict_many`` reads one input by (a UsageError for a bad one) without the model's
        weights, or None; ``attnlab predict`` reads a long file by it before loading
        them (``check_each``)."""

    def evaluate(self, task: Task, run_dir: Path, cfg: RunSettings,
                 data: str | None) -> dict[str, float]:
        """``attnlab evaluate``: the test metrics of a trained run (of ``data``, a file, if
        given)."""

    def attention_maps(self, task: Task, run_dir: Path, cfg: RunSettings, text: str):
        """``attnlab plot attention``: the attention of the trained model on ``text`` as (maps,
        x_labels, y_labels): a list of (H, T_q, T_k) tensors (one per layer), the T_k key
        labels and the T_q query labels (see ``attnlab.viz.plot_attention``)."""


def set_options(**options: Any) -> dict[str, Any]:
    """The keyword arguments among ``options`` that are set (not None): for an option only
    some tasks' runtime functions take (``quantize=`` of a ``quantizable`` task's ``load`` and
    ``evaluate``, lm's ``max_new_tokens=``), which the command refused for the others.

    Examples:
        >>> set_options(quantize=None, max_new_tokens=5)
        {'max_new_tokens': 5}
    """
    return {k: v for k, v in options.items() if v is not None}


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a task can do besides train, load, predict, evaluate and plot attention: one
    declaration in its spec (``capabilities = Capabilities(quantizable=True, ...)``), which
    the commands read from the task object (``task.capabilities.quantizable``), never from a
    list of task names, so a new task gains a capability by declaring it and no command is
    edited. The defaults say "cannot"; a command refuses a task that cannot, naming the option
    and the tasks that can. A field named after a function (``translate``, ``encode_prompt``, ...)
    says the task's ``runtime.py`` defines that function, which the command calls.

    Attributes:
        quantizable: its models run on int8 weights: the runtime's ``load`` and ``evaluate``
            take ``quantize="int8"``, and ``evaluate``, ``generate``, ``translate`` and
            ``attnlab.load`` take ``--quantize int8`` (``quantize=``).
        int8_faster_from: the model width (``model_dim``) from which int8 decoded one sequence
            faster than float32 (``benchmarks/quantize_where.py``); below it ``--quantize
            int8`` prints a note on stderr. None: no measured rule, no note.
        int8_one_at_a_time: int8 decodes several inputs one at a time where float32 batches
            them (translate: int8 rounds by each call's range), so ``--quantize int8`` notes
            that it is slower for several inputs at any width.
        generates: ``predict`` decodes its predictions token by token (``--threads``' default
            for several inputs reads it: ``"decode"``).
        evaluate_decodes: ``evaluate`` decodes the test split (translate's greedy decoding)
            rather than running forward passes (``--threads``' default again).
        holds_out_fractions: it holds out --val-fraction and --test-fraction of its --data, so
            the rule ``fractions_leave_training`` applies, at train time and to a run's
            config.yaml (``Task.fractions_broken``).
        attention_kind: what its attention maps are, for a figure's title (translate:
            ``"cross"``; lm: ``"causal"``, whose blocked keys the figure draws grey); None:
            self-attention.
        hf_auto_class: ``attnlab export DIR --hf OUT`` writes its runs, and this
            ``transformers`` auto class loads OUT (named in the command's last line). The
            runtime's ``export_hf(task, run_dir, cfg)`` returns (Hugging Face model,
            {sub-directory of OUT: tokenizer}, a note to print or None); a run the Hugging
            Face architecture cannot hold is a UsageError naming why, a setting the conversion
            cannot represent a ValueError from ``attnlab.interop.to_hf``.
        translate: ``attnlab translate``: ``translate(task, run_dir, cfg, texts, *, num_beams,
            length_penalty, quantize, labels)``, the translations in order.
        encode_prompt: ``attnlab generate`` and ``predict --max-new-tokens``: ``encode_prompt(
            task, tokenizer, text, *, what)``, a prompt's token ids.
        evaluate_by_length: ``evaluate --by-length``: ``evaluate_by_length(task, run_dir, cfg,
            data, out, *, quantize)``, (metrics, rows by source length), the figure at ``out``.
        attention_figure: ``plot attention`` draws a picture of its own instead of the heat
            maps (jets: the jet): ``attention_figure(task, run_dir, cfg, text, out, *,
            record)``, the path (``record``: the run's line under its title).
        attention_layers: ``attnlab view`` shows more than ``attention_maps``:
            ``attention_layers(task, run_dir, cfg, text)``, (layers, query tokens, key tokens).
        attention_focus: the input singles out one query row (graph: a node):
            ``attention_focus(task, run_dir, cfg, text)``, the row, outlined and pinned.

    Examples:
        >>> from attnlab.tasks import get_task
        >>> get_task("lm").capabilities.quantizable, get_task("sort").capabilities.quantizable
        (True, False)
    """

    quantizable: bool = False
    int8_faster_from: int | None = None
    int8_one_at_a_time: bool = False
    generates: bool = False
    evaluate_decodes: bool = False
    holds_out_fractions: bool = False
    attention_kind: str | None = None
    hf_auto_class: str | None = None
    translate: bool = False
    encode_prompt: bool = False
    evaluate_by_length: bool = False
    attention_figure: bool = False
    attention_layers: bool = False
    attention_focus: bool = False


class Task:
    """One trainable task. Subclass it and fill in what the task supports.

    Attributes:
        name: the task's name on the command line.
        help: one line for ``attnlab train --help``.
        run_config: the task's run config class, written in its spec as
            ``class LMRunConfig(RunSettings[LMSettings, CausalLMConfig, LMDerived])``: its
            parts are the task's own settings (``settings``: data files, sizes, ...), its
            model's config (``model_config``, ``attnlab.models.configs``) and what a run
            works out while it starts (``derived``: a vocabulary size, the labels, what
            ``auto`` chose, set only through the run config's ``derive``). Every setting
            is declared once, in one part or in ``TrainSettings``; the CLI makes its flag,
            help, default and check from that declaration.
        overrides: this task's own defaults for settings declared elsewhere (lm's
            ``model_dim`` 128 where ``CausalLMConfig`` says 256); ``defaults`` is every
            declared default with these over them.
        default_notes: what ``--help`` says is the default of a setting whose default is
            derived from another one (its value in ``defaults`` is None).
        model_flags: the fields of ``model_config`` that are this task's flags; None: every
            field declared with a flag (``exposed``).
        capabilities: what the task can do besides train, load, predict, evaluate and plot
            attention (``Capabilities``: ``--quantize int8``, ``export --hf``, ``translate``,
            ...), declared once in its spec; the commands read it from the task object.
        init_model_types: the Hugging Face ``model_type``s (config.json's) that ``attnlab train
            TASK --init DIR`` converts from (lm: gpt2; classify: the BERT family; translate:
            marian), checked by ``attnlab.interop.source.read_init_source``; empty: ``--init``
            takes only an attnlab run of the task (and only where ``settings`` has ``init``).
        recipes: named sets of settings that ``--recipe NAME`` puts over the defaults, under
            ``--config`` and the flags (which win; lm's ``attnlab.tasks.lm.recipes``); the
            task declares a ``recipe`` setting when it has some.
        val_metrics: the metrics its validation computes, as ``logs/metrics.csv`` names them
            (each one of ``attnlab.settings.VAL_METRICS``, which says whether lower or higher
            is better): what ``--monitor`` may name. ``val_metrics_off`` says which of them a
            run leaves out, and why.

    The work itself (training, loading, prediction, the optional commands) is in the task's
    ``runtime.py``, which commands reach by ``runtime()`` and call directly.
    """

    name: str = ""
    help: str = ""
    run_config: type[RunSettings] = PlainRunConfig
    overrides: dict[str, Any] = {}
    default_notes: dict[str, str] = {}
    model_flags: tuple[str, ...] | None = None
    capabilities: Capabilities = Capabilities()
    init_model_types: tuple[str, ...] = ()
    recipes: dict[str, dict[str, Any]] = {}
    val_metrics: tuple[str, ...] = ("val_loss",)

    @property
    def settings(self) -> type:
        """The task's own settings (``run_config``'s settings part)."""
        return self.run_config.layout.settings

    @property
    def model_config(self) -> type | None:
        """The typed config of the task's model (``run_config``'s model part)."""
        return self.run_config.layout.model

    @property
    def derived(self) -> type:
        """What a run of the task works out while it starts (``run_config``'s derived part)."""
        return self.run_config.layout.derived

    @property
    def defaults(self) -> dict[str, Any]:
        """The value of each setting ``attnlab train`` starts from: its one declaration's
        default (``TrainSettings``, the task's settings, the model fields its command line
        sets), then this task's ``overrides``."""
        model = defaults(self.model_config, only=self.model_settings()) if self.model_config else {}
        return {**SHARED_DEFAULTS, **defaults(self.settings), **model, **self.overrides}

    def config_class(self) -> type[RunSettings]:
        """The task's run config class (``run_config``: written in the task's spec)."""
        return self.run_config

    def config(self, **values: Any) -> RunSettings:
        """The run config of this task with ``values`` over the defaults ``attnlab train``
        starts from, and ``task`` this task's name unless given, unchecked:
        ``get_task("lm").config(model_dim=32, block_size=16)``. Derived values stay absent
        until given, and so does a setting whose default the checks derive from another one
        (``default_notes``: lm's ``attention_dropout``)."""
        defaults = {k: v for k, v in self.defaults.items() if k not in self.default_notes}
        return self.run_config.from_values({**defaults, "task": self.name, **values})

    def read_config(self, values: dict[str, Any], where: str | Path) -> RunSettings:
        """The run config of a run's ``config.yaml`` (``values``, read from ``where``): keys
        as the file spells them; a key no part declares is kept, not refused."""
        return self.run_config.from_values(values, where)

    def typed(self, cfg: RunSettings | dict[str, Any], run_dir: str | Path) -> RunSettings:
        """``cfg`` as this task's run config: a plain mapping (a run's ``config.yaml`` read by
        hand) is read as ``check_run_dir`` reads the file (``read_config``)."""
        if isinstance(cfg, RunSettings):
            return cfg
        return self.read_config(dict(cfg), Path(run_dir) / "config.yaml")

    def model_settings(self) -> tuple[str, ...]:
        """The names of the model-config fields this task's command line sets: ``model_flags``
        or, if None, every field its declaration gives a flag."""
        if self.model_config is None:
            return ()
        return exposed(self.model_config) if self.model_flags is None else self.model_flags

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the task's own flags: one per field of ``settings`` that a command line may set
        (not those declared ``flag=False``, which only a --config file sets). A flag declared by hand
        must have NO ``default=`` (the parser suppresses missing flags so that --config can set
        them); its default goes in ``self.defaults``."""
        if self.settings is not None:
            add_flags(parser.add_argument_group(f"{self.name} task"), self.settings,
                      only=exposed(self.settings, besides=None))

    def check_settings(self, cfg: dict[str, Any], *, typed_only: bool = False) -> Any:
        """Check every typed setting of the task (its ``settings`` and the model fields it
        exposes: type, range, choices), then what ``validate`` adds; return what ``validate``
        returns (for ``run``'s ``checked``). ``typed_only``: each value on its own, reading no
        data, and nothing else: ``attnlab train`` checks them before the memory check too, so
        that ``--block-size -100000`` is named as out of range, not refused for the memory its
        estimate makes of it."""
        if self.settings is not None:
            check(self.settings, cfg)
        if self.model_settings():
            check(self.model_config, cfg, only=self.model_settings())
        if typed_only:
            return None
        layout = self.adapt_layout(cfg)
        if self.settings is not None and issubclass(self.settings, AdaptSettings):
            check_adapt(cfg, blocks=layout["blocks"], encoder=layout["encoder"],
                        attention=layout["attention"])
        for broken in (self.fractions_broken(cfg), muon_finds_matrices(cfg, layout)):
            if broken:
                raise UsageError(broken)
        return self.validate(cfg)

    def adapt_layout(self, cfg: dict[str, Any]) -> dict[str, Any]:
        """The blocks of the model ``cfg`` builds, as the rules about what a run trains read
        them: ``check_adapt`` (a task with ``AdaptSettings``) and ``muon_finds_matrices``
        (``--optimizer muon``, every task): ``blocks``, how many --freeze all-but-last-N
        counts; ``encoder``, whether there is an encoder to freeze; ``attention``, whether the
        model has Transformer blocks (with attention projections for LoRA); ``decoder``
        (optional), whether blocks train beside a frozen encoder."""
        return {"blocks": cfg.get("num_layers", 0), "encoder": False, "attention": True}

    def init_source(self, path: str | Path, *, flag: str = "--init") -> Any:
        """The checked ``--init`` directory ``path`` of this task (``read_init_source`` with
        the task's ``init_model_types``): an ``attnlab.interop.source.InitSource``.

        Raises:
            UsageError: one line naming ``flag`` and ``path`` (not a directory, a model type
                or run of another task, missing weights or tokeniser files).

        Examples:
            >>> from attnlab.tasks import get_task
            >>> get_task("lm").init_source("gpt2")
            Traceback (most recent call last):
            ...
            attnlab.errors.UsageError: --init gpt2 is not a directory; attnlab never downloads: ...
        """
        from ..interop.source import read_init_source

        return read_init_source(path, task=self.name, model_types=self.init_model_types,
                                flag=flag)

    def init_settings(self, source: Any) -> dict[str, Any]:
        """The settings ``--init DIR`` fixes (``source``: an ``attnlab.interop.source.InitSource``),
        by setting name: ``attnlab train`` refuses a flag or ``--config`` value that disagrees
        with one, naming both values, and records the rest in config.yaml. Here: for an attnlab
        run of this task (``source.kind == "run"``), the model settings it recorded (the shared
        widths and depths and the task's model flags), except the dropouts (a fine-tuning run may change them). A task that starts from Hugging Face
        directories overrides this for ``source.kind == "hf"`` and calls it for runs."""
        if source.kind != "run":
            raise UsageError(f"--init {source.path}: attnlab train {self.name} starts from "
                             f"attnlab runs only, not from {source.model_type!r} directories")
        names = self.model_settings()
        return {k: source.config[k] for k in names if k in source.config and "dropout" not in k}

    def init_fits(self, cfg: dict[str, Any]) -> dict[str, tuple[Any, str]]:
        """The settings of ``cfg`` (with what ``--init DIR`` fixes applied) that DIR's model
        cannot take, each with the value it takes and why: ``attnlab train`` fits a default
        the user did not give to that value, saying so, and ``validate`` refuses a value
        given (lm: a --block-size above the checkpoint's positions). Default: none."""
        return {}

    def init_defaults(self, source: Any) -> dict[str, tuple[Any, str]]:
        """The settings ``--init DIR`` sets unless the user names them (a flag or ``--config``
        value wins), by setting name: ``(value, where DIR says it)``; ``attnlab train`` says
        each one that changes a default in a note, and config.yaml records it. Here: a Hugging
        Face checkpoint's dropout (``checkpoint_dropout``: Marian's ``dropout``, BERT's
        ``hidden_dropout_prob``, GPT-2's ``resid_pdrop``), which a fine-tune keeps unless
        told otherwise."""
        from ..interop.source import checkpoint_dropout

        found = checkpoint_dropout(source)
        return {} if found is None else {"dropout": (found[0], f"config.json's {found[1]}")}

    def heads_split_width(self, cfg: dict[str, Any]) -> bool:
        """Whether --model-dim is split among --num-heads (so must be divisible by it): true of
        a Transformer's attention; not of a recurrent model, nor of graph attention, whose
        --model-dim is each head's width."""
        return True

    def fractions_broken(self, cfg: dict[str, Any], *,
                         names: tuple[str, str] = ("--val-fraction", "--test-fraction")
                         ) -> str | None:
        """The rule ``fractions_leave_training`` on the settings ``cfg`` of a task that holds
        out --val-fraction and --test-fraction of its --data (``holds_out_fractions``): a
        fraction whose own --val (--test) FILE is given is not held out. Its message naming
        ``names``; None where it holds, or where the task (or a run's config.yaml) has no such
        fractions. ``check_settings`` (the flags) and ``attnlab.load`` (the keys) call it."""
        if (not self.capabilities.holds_out_fractions
                or not {"val_fraction", "test_fraction"} <= cfg.keys()):
            return None
        return fractions_leave_training(cfg["val_fraction"], cfg["test_fraction"],
                                        val_used=not cfg.get("val"), test_used=not cfg.get("test"),
                                        names=names)

    def unused_settings(self, cfg: dict[str, Any]) -> list[tuple[list[str], str]]:
        """Groups of (settings that ``cfg`` would train without, why): ``attnlab train``
        refuses any of them that was given (a flag or ``--config``), naming it, instead of
        silently not using it. Default: none."""
        return []

    def unrecorded_settings(self, cfg: dict[str, Any]) -> list[str]:
        """The settings ``config.yaml`` leaves out because the run does not use them: by
        default every one ``unused_settings`` names (a karate-club run recorded the block
        model's --nodes and --p-in). A task whose unused flags still stand for a value
        the run records (lm's vocabulary size, read from a prepared corpus) returns less."""
        return [name for names, _ in self.unused_settings(cfg) for name in names]

    def val_metrics_off(self, cfg: dict[str, Any]) -> dict[str, str]:
        """Of ``val_metrics``, those a run with ``cfg`` does not compute during training, each
        with why (and what would compute it), for ``--monitor``'s message; all of them where
        the run validates at its end only (lm without --val-every), which ``--keep-best`` and
        ``--patience`` cannot use. Default: none (every task validates at least once an
        epoch)."""
        return {}

    def validate(self, cfg: dict[str, Any]) -> Any:
        """Check what the typed settings cannot (one setting against another, the data files)
        before anything heavy runs; raise ``UsageError`` naming the flag. Shared flags and
        ``settings`` are checked already. Return what the check read that ``run`` needs
        (handed to it as ``checked``; the task keeps nothing), or None."""

    def memory_estimate(self, cfg: dict[str, Any]) -> list[tuple[str, float]]:
        """The large allocations a run with ``cfg`` will make, as (what, bytes) pairs, for
        ``attnlab train`` to refuse settings the machine cannot hold before anything runs
        (``--train-size 10**7`` at ``--seq-len 5000``, ``--dim-feedforward 10**11``). Count
        only what is surely allocated; the default counts the encoder layers' weights and
        an embedding table of ``vocab_size``, trained ones with their gradients and AdamW's
        two moments, as ``memory.weights`` holds them."""
        d, ff = cfg.get("model_dim", 0), cfg.get("dim_feedforward", 0)
        blocks = cfg.get("num_layers", 0) * (4 * d * d + 2 * d * ff)
        return weights(cfg, blocks + (cfg.get("vocab_size") or 0) * d, in_blocks=blocks)

    def runtime(self) -> Runtime:
        """The task's ``runtime.py`` (torch, its model, training, loading), whose functions the
        commands call: ``task.runtime().evaluate(task, run_dir, cfg, data)``. A task's spec
        returns it by ``from . import runtime`` inside this method, so that importing the
        spec (every command's parser, ``--help``, a flag error) imports no torch.

        Raises:
            UsageError: the task has no runtime (a ``Task`` made outside a task package).
        """
        raise UsageError(f"task {self.name!r} has no runtime: no runtime.py to train, load, "
                         f"predict, evaluate or plot attention with")


def predicts(predict_many):
    """A runtime's ``predict_many`` as a Python caller may call it too:
    ``predict_many(task, run_dir, cfg, texts, labels=None, **options)``.

    The texts are checked where they enter (``input_texts``; a blank one refused, as
    ``predict --input ' '`` is: ``refuse_blank``); ``labels`` default to
    ``texts[0]``, ``texts[1]``, ..., by which an input error names its text; no texts, no
    answers (and no model loaded). The answers are ``without_nan_answers``'s, as ``attnlab
    predict`` prints them: no class for an input whose outputs are NaN. The global random
    state is as it was (``rng_kept``): rebuilding the model before its weights are read draws
    from it, which moved what a notebook's seeded cells drew next.
    """
    import functools

    @functools.wraps(predict_many)
    def checked(task, run_dir, cfg, texts, labels=None, **options):
        texts = input_texts(texts)
        labels = input_labels(texts, labels)
        for text, label in zip(texts, labels):  # as predict refuses --input ' '
            refuse_blank(text, label)
        if not texts:
            return []
        with rng_kept():
            results = predict_many(task, run_dir, cfg, texts, labels, **options)
        return without_nan_answers(results, labels, run_dir)
    return checked


# the models loaded while a command predicts a file chunk by chunk (``loaded_once``)
_LOADED: ContextVar[dict | None] = ContextVar("attnlab_loaded", default=None)


def loads(load):
    """A runtime's ``load`` (or a helper that builds its model and reads its weights), which
    inside ``loaded_once`` does so once per arguments: ``attnlab predict`` calls
    ``predict_many`` once per chunk of a long file, and each call loaded the model again.
    Outside it (a call from Python), every call loads, as before."""
    import functools

    @functools.wraps(load)
    def once(*args, **options):
        held = _LOADED.get()
        if held is None:
            return load(*args, **options)
        key = (load.__module__, load.__qualname__, tuple(map(id, args)),
               tuple(sorted(options.items())))
        if key not in held:  # the arguments kept with it: their ids are not reused meanwhile
            held[key] = (args, load(*args, **options))
        return held[key][1]
    return once


@contextmanager
def loaded_once() -> Iterator[None]:
    """While open, a runtime's ``load`` (``loads``) builds and reads each model once; the
    models are let go at its end."""
    token = _LOADED.set({})
    try:
        yield
    finally:
        _LOADED.reset(token)


# the name ``attention_maps``' notes give its input: ``--input`` on the command line, the
# Python argument's name (``text``) from Python; ``attends`` sets it for the call
_INPUT_NAME: ContextVar[str] = ContextVar("attnlab_input_name", default="--input")


def input_name() -> str:
    """The name of the input an ``attention_maps`` call is making maps of, for its notes (a
    word the run never saw, a text cut at --max-len): ``--input``, or ``text`` from Python.

    Examples:
        >>> input_name()
        '--input'
    """
    return _INPUT_NAME.get()


def attends(attention_maps):
    """A runtime's ``attention_maps`` as a Python caller may call it too: ``text`` one ``str``
    (``input_text``: a ``TypeError`` naming anything else, a ``UsageError`` where it is blank,
    as ``plot attention --input ''`` says, where a classify or translate model failed deep
    inside on no tokens), the maps made with torch's global random state kept (``rng_kept``).
    An input error names ``label``: ``text`` for a Python caller, not the ``--input`` flag
    it never gave (``plot attention`` and ``view`` pass ``label="--input"``); its notes
    name it as ``input_name()`` says.
    """
    import functools

    @functools.wraps(attention_maps)
    def checked(task, run_dir, cfg, text, *, label: str = "text", **options):
        text = input_text(text, label)
        named = _INPUT_NAME.set(label)  # its notes name it so
        with rng_kept():
            try:
                return attention_maps(task, run_dir, cfg, text, **options)
            except UsageError as e:
                # the run's own errors (its config, its weights) are not the text's
                if label == "--input" or str(e).split(" ", 1)[0].rstrip(":") != "--input":
                    raise
                raise UsageError(relabel(str(e), label)) from None
            finally:
                _INPUT_NAME.reset(named)
    return checked


def input_text(text, name: str = "text") -> str:
    """``text`` when it is one ``str`` with something other than white space in it.

    Raises:
        TypeError: ``text`` is not a ``str`` (bytes, a list), naming it.
        UsageError: ``text`` is blank: it has no tokens, words or elements to run a model on.

    Examples:
        >>> input_text(["1 2"])
        Traceback (most recent call last):
        TypeError: text must be a str, got list (['1 2'])
        >>> input_text(" ")
        Traceback (most recent call last):
        attnlab.errors.UsageError: text is empty
    """
    if not isinstance(text, str):
        hint = "; decode it first" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"{name} must be a str, got {type(text).__name__} ({_shown(text)}){hint}")
    refuse_blank(text, name)
    return str(text)


def refuse_blank(text: str, label: str, hint: str = "") -> None:
    """``UsageError`` ``{label} is empty`` (and ``hint``) where ``text`` is blank: white space
    alone has no tokens, words or elements to run a model on, and a model given none answered
    as surely as for any text (a class, a whole translation). The one rule of a blank input:
    ``predict --input``, a line of ``--input-file`` and a Python caller's texts all keep it.

    Examples:
        >>> refuse_blank(" 1 ", "--input")  # something to read: nothing to say
        >>> refuse_blank("\\t", "texts[1]")
        Traceback (most recent call last):
        attnlab.errors.UsageError: texts[1] is empty
    """
    if not text.strip():
        raise UsageError(f"{label} is empty{hint}")


def input_texts(texts) -> list[str]:
    """``texts`` (any iterable of ``str``: a list, a tuple, a numpy array of strings) as a
    list, each a ``str``; a ``TypeError`` naming the value where it is one text (a ``str``
    would be read as one input per character) or holds something else (bytes, a number).

    Examples:
        >>> input_texts(("1 2", "3"))
        ['1 2', '3']
        >>> input_texts("1 2 3")
        Traceback (most recent call last):
        TypeError: texts must be a list of texts, not one str ('1 2 3'): give ['1 2 3']
        >>> input_texts(["ok", b"1 2"])
        Traceback (most recent call last):
        TypeError: texts[1] must be a str, got bytes (b'1 2'); decode it first
    """
    if isinstance(texts, (str, bytes)):
        kind = type(texts).__name__
        raise TypeError(f"texts must be a list of texts, not one {kind} ({_shown(texts)}): "
                        f"give [{_shown(texts)}]")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"texts must be a list of texts, got {type(texts).__name__} "
                        f"({_shown(texts)})") from None
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            input_text(text, f"texts[{i}]")  # its TypeError
    return [str(text) for text in texts]  # numpy's str_ as str


def input_labels(texts: list[str], labels) -> list[str]:
    """The label that names each of ``texts`` in an input error: ``labels`` (one per text, as
    ``attnlab predict`` gives ``--input-file FILE line N``), or ``texts[i]``.

    Examples:
        >>> input_labels(["a", "b"], None)
        ['texts[0]', 'texts[1]']
    """
    if labels is None:
        return [f"texts[{i}]" for i in range(len(texts))]
    labels = [str(label) for label in labels]
    if len(labels) != len(texts):
        raise ValueError(f"labels must name each of the {len(texts)} texts, got "
                         f"{len(labels)} labels")
    return labels


def _shown(value: Any, most: int = 40) -> str:
    """``repr(value)``, cut to ``most`` characters, for a message."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def rng_kept():
    """A context in which torch's global (CPU) random state may be drawn from and is then
    put back: loading a run builds its model at random before reading its weights. Also a
    decorator (``@rng_kept()``, as a runtime's ``evaluate`` is defined)."""
    import torch

    return torch.random.fork_rng(devices=[])


def line_of(result: dict[str, Any]) -> str:
    """The line ``attnlab predict`` prints for one result of ``predict_many``: on one line
    (``one_line``), so that each input has one line of output, whatever its answer holds (a
    class name with a line break in it, from a quoted CSV label)."""
    return one_line(result.get("line", result["prediction"]))


# the key of a ``predict_many`` result whose answer holds no number to read NaN from (a
# sequence, tags): False where the model's outputs for it were not finite; read and taken out
# by ``without_nan_answers``
FINITE = "finite"


def without_nan_answers(results: list[dict[str, Any]], labels: list[str],
                        run_dir: Path) -> list[dict[str, Any]]:
    """``results`` of ``predict_many`` with no answer where the model's outputs are not finite
    (a run whose weights hold NaN, or an input that overflows it): the prediction None (null
    with ``--json``) and the line ``nan``, not the argmax of a NaN row (its first class, as
    sure as any other answer), with one warning on stderr naming how many and the first. The
    outputs are read from the result's probabilities or number, or where its answer has none
    (a sequence's symbols, a sentence's tags) from its ``FINITE`` key, which is taken out.

    Examples:
        >>> without_nan_answers([{"prediction": "neg", "probabilities": {"neg": 0.2}}], ["x"],
        ...                     Path("run"))
        [{'prediction': 'neg', 'probabilities': {'neg': 0.2}}]
    """
    import math

    def finite(result: dict[str, Any]) -> bool:
        if result.get(FINITE) is False:
            return False
        p = result.get("probabilities", result["prediction"])
        values = p.values() if isinstance(p, dict) else p if isinstance(p, list) else [p]
        return all(math.isfinite(v) for v in values if isinstance(v, float))

    # a result already without an answer (a runtime's ``predicts``) is not counted again
    bad = [i for i, result in enumerate(results)
           if not finite(result) and result["prediction"] is not None]
    results = [{k: v for k, v in result.items() if k != FINITE} for result in results]
    for i in bad:
        results[i] = {**results[i], "prediction": None, "line": "nan"}
    if bad:
        say_nan(run_dir, len(bad), len(results), labels[bad[0]], "their prediction is null")
    return results


def quantized_run(model, kind: str | None, run_dir: Path):
    """``model`` (a run's, just loaded) on int8 weights with ``kind`` set (``quantized``), after
    checking its weights are finite: int8 rounding of a NaN or inf weight has no range, and
    torch's kernels stopped with a traceback ("min should be less than or equal to max").

    Raises:
        UsageError: naming ``--quantize`` and ``run_dir`` when a weight is not finite.
    """
    import torch

    from ..nn.quantize import quantized

    if kind is not None:
        bad = [p for p in model.parameters() if not bool(torch.isfinite(p).all())]
        if bad:
            held = "NaN" if any(bool(torch.isnan(p).any()) for p in bad) else "inf"
            raise UsageError(f"--quantize {kind}: {run_dir}'s weights hold {held} (a run "
                             f"trained to NaN); run without --quantize")
    return quantized(model, kind)


def say_nan(run_dir: Path, count: int, inputs: int, first: str, then: str) -> None:
    """The one warning that ``run_dir``'s outputs are NaN for ``count`` of ``inputs`` inputs,
    ``first`` named, and ``then`` what became of their answers (``say``: once per command)."""
    from ..notes import say

    say("nan", count, lambda count, inputs: (
        f"warning: {run_dir} gives NaN for {count} of {inputs} inputs (first: {first}); "
        f"{then}"), inputs)


def without_nan_metrics(metrics: dict[str, Any], finite: list[bool], labels: list[str],
                        run_dir: Path) -> dict[str, Any]:
    """``metrics`` as ``evaluate`` returns them when the model's outputs for some input are
    not finite (``finite`` False): every score NaN (``null_scores``), not the score of argmax
    answers read from NaN rows, with ``say_nan``'s warning naming the first of ``labels``
    (``said_nan``). Inputs scored a chunk at a time: ``said_nan`` of each chunk, then
    ``null_scores`` if any said so.

    Examples:
        >>> without_nan_metrics({"test_accuracy": 0.5}, [True], ["x"], Path("run"))
        {'test_accuracy': 0.5}
    """
    return null_scores(metrics) if said_nan(finite, labels, run_dir) else metrics


class Numbered(Sequence):
    """The names of ``count`` inputs, input i's ``name(i)``, each made when asked for: a list
    of them held a string per input (a jet, a window of a corpus) for the one that a warning
    names.

    Examples:
        >>> names = Numbered(lambda i: f"window {i + 1}", 10**6)
        >>> len(names), names[0], names[-1]
        (1000000, 'window 1', 'window 1000000')
    """

    def __init__(self, name: Callable[[int], str], count: int) -> None:
        self.name, self.count = name, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        if not -self.count <= i < self.count:
            raise IndexError(f"name {i} of {self.count}")
        return self.name(i % self.count)


def said_nan(finite: Sequence[bool], labels: Sequence[str], run_dir: Path) -> bool:
    """Whether the model's outputs for some input are not finite (``finite`` False), said by
    ``say_nan``'s warning naming the first of them (of ``labels``) and that the metrics are
    null (held and summed within ``said_once``)."""
    bad = [i for i, ok in enumerate(finite) if not ok]
    if bad:
        say_nan(run_dir, len(bad), len(finite), labels[bad[0]], "its metrics are null")
    return bool(bad)


def null_scores(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with every score NaN (null in metrics.json and on stdout); counts (an
    ``int``, a table's ``support``) stay, all finite, as they were.

    Examples:
        >>> null_scores({"test_accuracy": 0.5, "rows": 3, "per": [{"f1": 1.0}]})
        {'test_accuracy': nan, 'rows': 3, 'per': [{'f1': nan}]}
    """
    def nan(value: Any) -> Any:
        if isinstance(value, float):
            return float("nan")
        if isinstance(value, dict):
            return {k: nan(v) for k, v in value.items()}
        return [nan(v) for v in value] if isinstance(value, list) else value
    return nan(metrics)


# what str.splitlines ends a line at, "\r\n" as one
_LINE_END = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with each line end as a space (``\\n``, ``\\r\\n``, a lone ``\\r``, which a
    terminal would print over the line's start, U+2028): printed, it is one line.

    Examples:
        >>> one_line("the\\r\\ncoffee\\rtea\\u2028milk\\n")
        'the coffee tea milk '
    """
    return _LINE_END.sub(" ", text)


def relabel(message: str, label: str) -> str:
    """An input error said of ``--input`` said of ``label`` instead (e.g. a line of a file).

    Examples:
        >>> relabel("--input: token 'x' is not a symbol", "--input-file a.txt line 3")
        "--input-file a.txt line 3: token 'x' is not a symbol"
        >>> relabel("no such node", "--input-file a.txt line 3")
        '--input-file a.txt line 3: no such node'
    """
    if label == "--input":
        return message
    if message.startswith("--input"):
        return label + message[len("--input"):]
    return f"{label}: {message}"


def decimal(token: str) -> int | None:
    """``token`` as a natural number where it is decimal digits alone (not ``int``'s '1_0',
    '+10' or ' 7'), else None; None too past ``int``'s 4,300 digits, which no index reaches.

    Examples:
        >>> decimal("042"), decimal("1_0"), decimal("9" * 5000)
        (42, None, None)
    """
    try:
        return int(token) if token.isdecimal() else None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        return None


def fraction(hits, counted=None) -> float:
    """The share of ``hits`` (a boolean tensor) that are True, among those where ``counted``
    is True (default: all), as the exact ratio of the two counts in float64, as scikit-learn's
    ``accuracy_score`` gives it; NaN of none. A float32 mean was 2e-8 off (0.6666666865348816
    for 2 of 3, 0.9009100198745728 for 90,091 of 100,000).

    Examples:
        >>> import torch
        >>> fraction(torch.tensor([True, True, False]))
        0.6666666666666666
        >>> fraction(torch.tensor([True, False, False]), torch.tensor([True, True, False]))
        0.5
    """
    if counted is not None:
        hits = hits & counted
    return ratio(int(hits.sum()), int(counted.sum()) if counted is not None else hits.numel())


def ratio(hits: int, total: int) -> float:
    """``hits`` of ``total`` (counts), the exact ratio in float64 (``fraction``'s); NaN of none.

    Examples:
        >>> ratio(2, 3), ratio(0, 0)
        (0.6666666666666666, nan)
    """
    return hits / total if total else float("nan")


def each_input(texts: list[str], labels: list[str], parse) -> list:
    """``[parse(text) for text in texts]``; the first bad one is a UsageError named by its
    label, before any prediction is made."""
    return list(each_read(texts, labels, parse))


def check_each(texts: list[str], labels: list[str], parse) -> None:
    """``each_input`` keeping nothing: every text read by ``parse`` (a runtime's
    ``input_reader``), the first bad one a UsageError named by its label, so that ``attnlab
    predict`` refuses a bad line of a long file before its model is loaded.

    Examples:
        >>> check_each(["1 2", " "], ["line 1", "line 2"], input_text)
        Traceback (most recent call last):
        attnlab.errors.UsageError: line 2: text is empty
    """
    for _ in each_read(texts, labels, parse):
        pass


def each_read(texts: Sequence[str], labels: Sequence[str], parse) -> Iterator[Any]:
    """``each_input``'s ``parse(text)`` of each text, one at a time, as it is asked for: none
    held (after ``check_each``, the inputs of a long file read again as they are answered)."""
    for text, label in zip(texts, labels, strict=True):
        try:
            yield parse(text)
        except UsageError as e:
            raise UsageError(relabel(str(e), label)) from None


def probabilities_of(names: list[str], p) -> dict[str, float]:
    """{class name: probability}, for a machine-readable prediction (``probability_list``)."""
    return dict(zip(map(str, names), probability_list(p)))


def probability_list(p) -> list[float]:
    """The float32 probabilities ``p`` as the model computed them, each as the shortest number
    that reads back as the same float32 (0.1970189, not its float64 expansion
    0.19701890647411346: the digits after the eighth are float32 noise, as ``runs.readable``
    says of metrics). Not rounded to a fixed number of decimals: to 6, one the model gave as
    1e-13 was written 0 (an infinite log-loss to a program that reads it) and the rounded ones
    no longer summed to 1.

    Examples:
        >>> import torch
        >>> probability_list(torch.tensor([0.19701890647411346, 2.0 ** -40]))  # not 0
        [0.1970189, 9.094947e-13]
    """
    import numpy as np

    return [float(str(np.float32(v))) for v in map(float, p)]
