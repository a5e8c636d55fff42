"""A run's configuration as one frozen, typed object per task.

``attnlab train TASK`` merges its settings into a plain dict (defaults < the task's defaults <
``--config`` < flags, and on ``--resume`` the run's own ``config.yaml``), checks and normalises
that dict, and then freezes it, once, into the task's config class. The class is generated from
the declarations it gathers (``make_config_class``): the shared ``TrainSettings``, the task's
settings, the model's typed config, the values the run derives, and ``task`` and ``out``; so a
setting is one field, declared once, and the run config has it.

A run derives some values while it runs (a vocabulary size, the labels, a file's digest, what
``auto`` chose); those fields are declared apart (a task's ``Derived`` dataclass and
``SharedDerived`` below) and set only through ``derive``, which returns a new config. Nothing
changes a config in place.

A field may be absent: a setting the run does not use is not recorded (``--epochs`` leaves
``max_steps`` out), and a ``config.yaml`` written before a setting existed lacks it. A setting
added after runs were made declares what those runs used (``setting(absent=...)``, or
``"absent"`` in a dataclass field's metadata: ``weight_decay`` reads 0.0 for a run that
predates it, the value it trained with); reading any other absent field raises
``MissingSetting`` naming the file and the setting, and ``is_set`` asks without raising.
Code reads attributes: ``cfg.weight_decay``, not ``cfg["weight_decay"]``. Keys of a
``config.yaml`` that no field declares (written by an older attnlab) are kept as they were and
written back unchanged.

Examples:
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Derived:
    ...     vocab_size: int | None = None
    >>> Config = make_config_class("Toy", (), Derived)
    >>> cfg = Config.from_values({"task": "toy"})
    >>> cfg.derive(vocab_size=30).vocab_size
    30
    >>> import dataclasses
    >>> @dataclass
    ... class Later:
    ...     beta2: float = dataclasses.field(default=0.99, metadata={"absent": 0.999})
    ...     seed: int = 0
    >>> old = make_config_class("Toy", (Later,)).from_values({"task": "toy"}, "run/config.yaml")
    >>> old.beta2, old.is_set("beta2")
    (0.999, False)
    >>> old.seed
    Traceback (most recent call last):
    ...
    attnlab.runs.MissingSetting: run/config.yaml has no setting 'seed', which this command needs (was the file edited by hand?)
    >>> cfg.derive(task="other")
    Traceback (most recent call last):
    ...
    ValueError: Toy.derive: task is not a derived value (derived: data_sha256, init_sha256, out, precision, vocab_size)
"""
from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .runs import MissingSetting

__all__ = ["ABSENT", "RunSettings", "SharedDerived", "make_config_class"]


class _Absent:
    """The value of a field a run does not record (see the module's docstring)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self):  # one object, across pickling (DDP hands configs to processes)
        return "ABSENT"


ABSENT: Any = _Absent()


@dataclass
class SharedDerived:
    """What every run derives while it starts: the run directory chosen (``--out`` or
    ``runs/TASK-<timestamp>``), the number format Fabric runs (``--precision auto`` resolved;
    a format the device lacks replaced), the SHA-256 of each data file it reads, and the
    SHA-256 of the weights file ``--init`` starts from."""

    # not chosen yet (a config before ``attnlab train`` derives it: runs/TASK-<timestamp>)
    out: str | None = dataclasses.field(default=None, metadata={"absent": None})
    precision: str | None = None
    # a run on built-in data, or made before digests were recorded, has none
    data_sha256: dict[str, str] | None = dataclasses.field(default=None,
                                                           metadata={"absent": None})
    init_sha256: str | None = None


class RunSettings:
    """The base of every generated run config (``make_config_class``): a frozen dataclass whose
    fields are the run's settings, each a value or ``ABSENT``."""

    _derived: ClassVar[frozenset[str]] = frozenset()
    _absent: ClassVar[dict[str, Any]] = {}  # what a run lacking the field used, by name
    _where: Any  # the config.yaml the values were read from, for messages (None: the flags)
    _extra: Any  # keys of a config.yaml that no field declares, kept as they were

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if value is ABSENT:
            absent = object.__getattribute__(self, "_absent")
            if name in absent:
                return absent[name]
            where = object.__getattribute__(self, "_where")
            raise MissingSetting(f"{where or 'the run config'} has no setting {name!r}, which "
                                 f"this command needs (was the file edited by hand?)")
        return value

    @classmethod
    def from_values(cls, values: dict[str, Any], where: str | Path | None = None):
        """The config holding ``values`` (a checked settings dict, or a ``config.yaml`` read
        back, named by ``where``); a field not in ``values`` is absent, a key no field declares
        is kept aside (``record`` writes it back)."""
        names = {f.name for f in cls._settings()}
        return cls(**{k: v for k, v in values.items() if k in names},
                   _where=None if where is None else str(where),
                   _extra={k: v for k, v in values.items() if k not in names})

    @classmethod
    def _settings(cls) -> list[dataclasses.Field]:
        return [f for f in dataclasses.fields(cls) if not f.name.startswith("_")]

    @classmethod
    def declares(cls, name: str) -> bool:
        """Whether this config has a field ``name`` (a setting of the task, set or absent):
        ``--freeze`` is a field of lm's config, not of reverse's."""
        return name in cls._field_names()

    def is_set(self, name: str) -> bool:
        """Whether the run records setting ``name`` (a declared field, not absent; a field read
        as its declared ``absent`` value is not set)."""
        return object.__getattribute__(self, name) is not ABSENT

    def readable(self, name: str) -> bool:
        """Whether reading setting ``name`` gives a value: the run records it, or the field
        declares what a run lacking it used (``absent``), so no ``MissingSetting`` is raised."""
        return self.is_set(name) or name in object.__getattribute__(self, "_absent")

    def recorded(self, name: str) -> Any:
        """The value of setting ``name`` where the run records one; None where it records
        none, or the task has no such setting (``--epochs`` leaves ``max_steps`` out)."""
        return getattr(self, name) if self.declares(name) and self.is_set(name) else None

    def derive(self, **values: Any):
        """A copy with derived ``values`` set (``dataclasses.replace`` restricted to the fields
        the task declares derived); ``ValueError`` for any other name."""
        wrong = sorted(set(values) - self._derived)
        if wrong:
            raise ValueError(f"{type(self).__name__}.derive: {', '.join(wrong)} is not a derived "
                             f"value (derived: {', '.join(sorted(self._derived))})")
        current = {f.name: object.__getattribute__(self, f.name) for f in dataclasses.fields(self)}
        return type(self)(**{**current, **values})  # dataclasses.replace would read ABSENT

    def record(self) -> dict[str, Any]:
        """The flat mapping ``config.yaml`` holds: every field that is set, by name, and the
        keys no field declares, as they were read."""
        out = dict(object.__getattribute__(self, "_extra") or {})
        for f in self._settings():
            value = object.__getattribute__(self, f.name)
            if value is not ABSENT:
                out[f.name] = value
        return out

    def as_trained(self) -> dict[str, Any]:
        """``record()`` with, for each field the run lacks that declares what such runs used
        (``absent``), that value: the settings a run trained with, as the plain settings dict
        ``attnlab train``'s checks read (the load-time checks read it too)."""
        absent = object.__getattribute__(self, "_absent")
        return {**{k: v for k, v in absent.items() if not self.is_set(k)}, **self.record()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.record()!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.record() == other.record()  # type: ignore

    __hash__ = None  # type: ignore[assignment]  # its values may be lists

    # mapping-style reads, for users' scripts (attnlab itself reads attributes: conftest.py)
    def __getitem__(self, name: str) -> Any:
        if name in self._field_names():
            return getattr(self, name)
        extra = object.__getattribute__(self, "_extra") or {}
        if name in extra:
            return extra[name]
        where = object.__getattribute__(self, "_where")
        raise MissingSetting(f"{where or 'the run config'} has no setting {name!r}, which this "
                             f"command needs (was the file edited by hand?)")

    def get(self, name: str, default: Any = None) -> Any:
        return self.record().get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self.record()

    def keys(self) -> Iterable[str]:
        return self.record().keys()

    def items(self):
        return self.record().items()

    @classmethod
    def _field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in cls._settings())


def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation only a type checker resolves
        return {f.name: Any for f in dataclasses.fields(cls)}


def make_config_class(name: str, parts: Iterable[type], derived: type | None = None) -> type:
    """A frozen dataclass ``name`` (a ``RunSettings``) with one field per field of the
    dataclasses ``parts`` and ``derived``, then ``SharedDerived``'s and ``task``, each absent
    by default; a name declared twice is one field (the first declaration's type and
    ``absent`` value: what a run lacking it reads, from the field's metadata). The fields
    of ``derived`` and ``SharedDerived`` are the ones ``derive`` may set (a derived field may
    name a setting the run resolves, such as a tokenizer chosen by ``auto``)."""
    parts = [*parts, *([derived] if derived is not None else []), SharedDerived]
    fields: dict[str, tuple] = {"task": ("task", str, dataclasses.field(default=ABSENT))}
    absent: dict[str, Any] = {}
    for part in parts:
        hints = _hints(part)
        for f in dataclasses.fields(part):
            if f.name not in fields:
                fields[f.name] = (f.name, hints.get(f.name, Any), dataclasses.field(default=ABSENT))
                if "absent" in f.metadata:
                    absent[f.name] = f.metadata["absent"]
    hidden = [("_where", Any, dataclasses.field(default=None, repr=False, compare=False)),
              ("_extra", Any, dataclasses.field(default=None, repr=False, compare=False))]
    cls = dataclasses.make_dataclass(name, [*fields.values(), *hidden], bases=(RunSettings,),
                                     frozen=True, repr=False, eq=False)
    declared = {f.name for p in ((derived,) if derived else ()) for f in dataclasses.fields(p)}
    cls._derived = frozenset(declared | {f.name for f in dataclasses.fields(SharedDerived)})
    cls._absent = absent
    return cls
