"""A run's configuration: one frozen object, written in source, made of typed parts.

``attnlab train TASK`` merges its settings into a plain dict (the declared defaults < the
task's overrides < ``--config`` < flags, and on ``--resume`` the run's own ``config.yaml``),
checks and normalises that dict, and then freezes it, once, into a ``RunSettings``:

    cfg.train     TrainSettings: what the loop needs (lr, steps, batch, schedule, devices)
    cfg.model     the model's config (``attnlab.models.configs``): its shape and dropout
    cfg.settings  the task's own settings: its data and task choices
    cfg.derived   what the run works out while it starts (a vocabulary size, the labels)
    cfg.run       what every run works out (its directory, the number format, data digests)

Each setting name is declared by exactly one of these parts (``tests/test_settings_owner.py``
checks every task), so ``config.yaml`` stays one flat mapping of names: ``record`` flattens
the parts, the one writer of the file (``attnlab.runs.write_config``; a moved data file's path
on ``--resume`` aside) writes it, and
``from_values`` sorts the names back into their parts. A type checker sees every part's
fields: ``cfg.model.model_dim`` is an ``int`` of ``CausalLMConfig`` in an lm run's
``RunSettings[LMSettings, CausalLMConfig, LMDerived]``. ``cfg.model_dim`` reads the same value
by its name alone, as a ``config.yaml`` key does.

A setting may be absent: a run does not record one it does not use (``--epochs`` leaves
``max_steps`` out), and a ``config.yaml`` may lack a setting (docs/compatibility.md lists what
such a run reads). A setting declared with ``absent=`` reads that
value when absent; the model reads its declared default for a field the run lacks, except the
fields every run has recorded (``RECORDED_BY_EVERY_RUN``); reading anything else absent raises
``MissingSetting`` naming the file and the setting. ``is_set`` asks without raising.

Values the run derives are set only through ``derive``, which returns a new config: the fields
of the derived parts, and the settings a derived part names in its ``resolves`` (what ``auto``
chose, the vocabulary size read from the data). Keys of a ``config.yaml`` that no part
declares are kept as they were and written back unchanged.

Examples:
    >>> from dataclasses import dataclass
    >>> from attnlab.settings import setting
    >>> @dataclass
    ... class Derived:
    ...     labels: list | None = None
    >>> @dataclass
    ... class Toy:
    ...     seq_len: int = setting(16, low=1)
    >>> class ToyRunConfig(RunSettings[Toy, None, Derived]):
    ...     pass
    >>> cfg = ToyRunConfig.from_values({"task": "toy", "seq_len": 8, "lr": 0.01})
    >>> cfg.settings.seq_len, cfg.seq_len, cfg.train.lr
    (8, 8, 0.01)
    >>> cfg.derive(labels=["a"]).derived.labels
    ['a']
    >>> cfg.derive(seq_len=9)
    Traceback (most recent call last):
    ...
    ValueError: derive: seq_len is not a derived value (derived: data_sha256, epochs_of_all_processes, init_sha256, labels, out, precision)
    >>> cfg.max_steps
    Traceback (most recent call last):
    ...
    attnlab.runs.MissingSetting: the run config has no setting 'max_steps', which this command needs (was the file edited by hand?)
"""
from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from .runs import MissingSetting
from .settings import TrainSettings, absent_values

__all__ = ["ABSENT", "RunSettings", "SharedDerived", "NoSettings", "NoDerived",
           "RECORDED_BY_EVERY_RUN", "owners"]


class _Absent:
    """The value of a setting a run does not record (see the module's docstring)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self):  # one object, across pickling (DDP hands configs to processes)
        return "ABSENT"


ABSENT: Any = _Absent()

# The model settings every run has recorded: a config.yaml without one was edited by hand, and
# a model built with its default would not be the model that was trained.
RECORDED_BY_EVERY_RUN = frozenset({"model_dim", "num_heads", "num_layers", "dim_feedforward",
                                   "dropout", "norm_first"})


@dataclass
class SharedDerived:
    """What every run works out while it starts: its directory (``--out`` or
    ``runs/TASK-<timestamp>``), the SHA-256 of each data file it reads, and the SHA-256 of the
    weights file ``--init`` starts from; and the number format it runs (``--precision auto``
    resolved, or a format the device lacks replaced)."""

    resolves: ClassVar[tuple[str, ...]] = ("precision",)

    out: str | None = dataclasses.field(default=None, metadata={"absent": None})
    data_sha256: dict[str, str] | None = dataclasses.field(default=None,
                                                           metadata={"absent": None})
    init_sha256: str | None = None
    # --epochs counts passes of all processes together (``settings.epoch_steps``); a run made
    # before counted them per process, and resumes on the budget it started with
    epochs_of_all_processes: bool = dataclasses.field(default=True, metadata={"absent": False})


@dataclass
class NoSettings:
    """The settings part of a task that has none of its own."""


@dataclass
class NoDerived:
    """The derived part of a task that derives nothing of its own."""

    resolves: ClassVar[tuple[str, ...]] = ()


S = TypeVar("S")
M = TypeVar("M")
D = TypeVar("D")


class _Guarded:
    """Mixed into a part's class for the run config: reading a field the run lacks raises
    ``MissingSetting``, or gives the value its declaration says such a run used."""

    _where: str | None
    _absent: dict[str, Any]

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if value is ABSENT:
            absent = object.__getattribute__(self, "_absent")
            if name in absent:
                return absent[name]
            raise _missing(object.__getattribute__(self, "_where"), name)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _missing(where: str | None, name: str) -> MissingSetting:
    return MissingSetting(f"{where or 'the run config'} has no setting {name!r}, which this "
                          f"command needs (was the file edited by hand?)")


@functools.cache
def _guarded_class(part: type) -> type:
    return type(part.__name__, (_Guarded, part), {"__module__": part.__module__})


def _part(part: type, values: dict[str, Any], where: str | None) -> Any:
    """An instance of ``part`` holding ``values`` (each field not in them ``ABSENT``), read
    through ``_Guarded``; built without ``__init__``, which would check or derive values."""
    obj = object.__new__(_guarded_class(part))
    fields = dataclasses.fields(part)
    for f in fields:
        object.__setattr__(obj, f.name, values.get(f.name, ABSENT))
    object.__setattr__(obj, "_where", where)
    object.__setattr__(obj, "_absent", _absent_of(part))
    return obj


_absent_of = functools.cache(absent_values)


def owners(parts: dict[str, type], model_key=lambda name: name) -> dict[str, str]:
    """{setting name: the part that declares it}, for parts by part name (the model's fields
    under their ``model_key``); ``ValueError`` for a name two parts declare
    (``tests/test_settings_owner.py`` checks every task)."""
    found: dict[str, str] = {}
    for part_name, part in parts.items():
        for f in dataclasses.fields(part):
            name = model_key(f.name) if part_name == "model" else f.name
            if name in found:
                raise ValueError(f"{name} is declared by both {found[name]} and "
                                 f"{part_name} ({part.__name__})")
            found[name] = part_name
    return found


class _Frozen:
    """Assigning to any attribute of a run config (a subclass's too) raises."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


@dataclass(frozen=True, eq=False, repr=False)
class RunSettings(_Frozen, Generic[S, M, D]):
    """A run's settings, in parts (see the module's docstring). Each task declares its own
    in source, naming its parts' classes, as lm does::

        class LMRunConfig(RunSettings[LMSettings, CausalLMConfig, LMDerived]):
            ...  # its docstring

    and builds one with ``LMRunConfig.from_values(values)``."""

    task: str
    train: TrainSettings
    settings: S
    derived: D
    run: SharedDerived
    _values: dict[str, Any] = dataclasses.field(repr=False)  # the recorded settings, flat
    _where: str | None = dataclasses.field(default=None, repr=False)
    _extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    layout: ClassVar[Layout]
    # {model field: the key config.yaml records it under}, where the name is a setting's:
    # classify's --vocab-size caps the tokeniser, and its model's vocab_size is recorded as
    # model_vocab_size
    model_keys: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is RunSettings:
                settings, model, derived = (None if a is type(None) else a
                                            for a in typing.get_args(base))
                keys = tuple(sorted(getattr(cls, "model_keys", {}).items()))
                cls.layout = Layout(settings or NoSettings, model, derived or NoDerived, keys)

    @classmethod
    def from_values(cls, values: dict[str, Any], where: str | Path | None = None):
        """The config holding ``values`` (a checked settings dict, or a ``config.yaml`` read
        back, named by ``where``); a key no part declares is kept aside (``record`` writes it
        back)."""
        layout = cls.layout
        where = None if where is None else str(where)
        known = {k: v for k, v in values.items() if k in layout.owner}
        parts = {name: _part(part, known, where) for name, part in layout.parts().items()
                 if name != "model"}
        return cls(task=known.get("task", ABSENT), **parts, _values=known, _where=where,
                   _extra={k: v for k, v in values.items() if k not in layout.owner})

    def __reduce__(self):  # DDP hands configs to processes; the parts' classes are made here
        return (_from_record, (type(self), self.record(), self._where))

    @property
    def model(self) -> M:
        """The model's config, built (and checked) on first read from the settings the run
        recorded; a field the run lacks takes its declared ``absent`` value, else its default,
        except those every run records (``MissingSetting`` naming it)."""
        cached = self.__dict__.get("_model")
        if cached is None:
            cached = self.layout.model_config(self, self.layout.model)
            object.__setattr__(self, "_model", cached)
        return cached

    def __getattr__(self, name: str) -> Any:
        """A setting by its name alone (``cfg.model_dim``), as ``config.yaml`` keys it."""
        if name.startswith("_"):
            raise AttributeError(name)
        owner = self.layout.owner.get(name)
        if owner is None and name in self._extra:  # a key no part declares, kept
            return self._extra[name]
        if owner is None:
            raise AttributeError(f"{type(self).__name__} of task {self.task!r} has no setting "
                                 f"{name!r}")
        if owner == "model":
            if name in self._values:
                return self._values[name]
            field = dict((k, f) for f, k in self.layout.model_keys).get(name, name)
            absent = _absent_of(self.layout.model)
            if field in absent:
                return absent[field]
            if field in RECORDED_BY_EVERY_RUN:
                raise _missing(self._where, name)
            return getattr(self.model, field)
        return getattr(object.__getattribute__(self, owner), name)

    def declares(self, name: str) -> bool:
        """Whether a part of this task declares setting ``name`` (set or absent): ``--freeze``
        is a setting of lm's, not of reverse's."""
        return name in self.layout.owner

    def is_set(self, name: str) -> bool:
        """Whether the run records setting ``name`` (not a value read as its declared
        ``absent``)."""
        return name in self._values

    def readable(self, name: str) -> bool:
        """Whether reading setting ``name`` gives a value without ``MissingSetting``."""
        return self.is_set(name) or name in self.layout.absent

    def recorded(self, name: str) -> Any:
        """The value of setting ``name`` where the run records one, else None."""
        return self._values.get(name)

    def derive(self, **values: Any) -> RunSettings[S, M, D]:
        """A copy with derived ``values`` set: the derived parts' fields and the settings they
        name in ``resolves``; ``ValueError`` for any other name."""
        wrong = sorted(set(values) - self.layout.derivable)
        if wrong:
            raise ValueError(f"derive: {', '.join(wrong)} is not a derived value (derived: "
                             f"{', '.join(sorted(self.layout.derivable))})")
        return type(self).from_values({**self._extra, **self._values, **values}, self._where)

    def record(self) -> dict[str, Any]:
        """The flat mapping ``config.yaml`` holds: every setting the run records, by name, and
        the keys no part declares, as they were read."""
        return {**self._extra, **self._values}

    def as_trained(self) -> dict[str, Any]:
        """``record()`` with each absent setting that declares what such runs used: the plain
        settings dict ``attnlab train``'s checks read (the load-time checks too)."""
        return {**{k: v for k, v in self.layout.absent.items() if k not in self._values},
                **self.record()}

    def __repr__(self) -> str:
        return f"RunSettings({self.record()!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.record() == self.record()  # type: ignore

    __hash__ = None  # type: ignore[assignment]  # its values may be lists

    # mapping-style reads, for users' scripts (attnlab itself reads attributes: conftest.py)
    def __getitem__(self, name: str) -> Any:
        if name in self.layout.owner:
            return getattr(self, name)
        if name in self._extra:
            return self._extra[name]
        raise _missing(self._where, name)

    def get(self, name: str, default: Any = None) -> Any:
        return self.record().get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self.record()

    def keys(self) -> Iterable[str]:
        return self.record().keys()

    def items(self):
        return self.record().items()


@dataclass(frozen=True)
class Layout:
    """Which class each part of a task's run config is, and what follows from that: each
    setting's owner, the values ``derive`` may set, what an absent setting reads."""

    settings: type
    model: type | None
    derived: type
    model_keys: tuple[tuple[str, str], ...] = ()

    def parts(self) -> dict[str, type]:
        """{part name: its class}, in the order ``config.yaml``'s settings are sorted into."""
        return {"train": TrainSettings, "settings": self.settings,
                **({"model": self.model} if self.model else {}), "derived": self.derived,
                "run": SharedDerived}

    def key(self, field: str) -> str:
        """The ``config.yaml`` key of model field ``field`` (its name, unless renamed)."""
        return dict(self.model_keys).get(field, field)

    @functools.cached_property
    def owner(self) -> dict[str, str]:
        """{setting name (a config.yaml key): the part that declares it}."""
        return {"task": "task", **owners(self.parts(), self.key)}

    @functools.cached_property
    def derivable(self) -> frozenset[str]:
        """The names ``derive`` may set: the derived parts' and the settings they resolve."""
        names = {f.name for p in (self.derived, SharedDerived) for f in dataclasses.fields(p)}
        resolved = getattr(self.derived, "resolves", ())
        return frozenset(names | set(resolved) | set(SharedDerived.resolves))

    @functools.cached_property
    def absent(self) -> dict[str, Any]:
        """{setting name: what a run lacking it used}, for those declared with ``absent``."""
        return {(self.key(k) if part is self.model else k): v
                for part in self.parts().values() for k, v in _absent_of(part).items()}

    def model_config(self, cfg: RunSettings, config: type | None, **overrides: Any) -> Any:
        """The model config ``config`` of ``cfg``, then ``overrides``: each field the run
        recorded, else what its declaration says a run lacking it used (``absent``), else its
        default; a field every run records (``RECORDED_BY_EVERY_RUN``) lacking is a
        ``MissingSetting`` naming it."""
        if config is None:
            raise AttributeError(f"task {cfg.task!r} has no model config")
        values = {}
        for f in dataclasses.fields(config):
            key = self.key(f.name)
            if f.name in overrides:
                continue
            if key in cfg._values:
                values[f.name] = cfg._values[key]
            elif key in self.absent:
                values[f.name] = self.absent[key]
            elif f.name in RECORDED_BY_EVERY_RUN and key in self.owner:
                raise _missing(cfg._where, key)
        return config(**values, **overrides)


def _from_record(cls: type[RunSettings], values: dict[str, Any], where: str | None):
    return cls.from_values(values, where)
