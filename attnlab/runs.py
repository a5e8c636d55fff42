"""Run directories at the bottom of the package: atomic writes, YAML and JSON, weights, digests.

A run directory (docs/cli.md) holds ``config.yaml``, ``model.safetensors``, ``metrics.json``,
``tokenizer.json`` (when the task has one), ``checkpoints/`` and PNG figures. Every file is
written to a temporary name and renamed, so a kill never leaves a half-written file behind, with
the mode any new file gets under the process's umask. Weights are only ever read from
safetensors (no pickle, so no code runs on load).

This module imports nothing of attnlab but ``errors`` (and yaml and safetensors, inside the
functions that use them), so every layer can write its files through it. Checking a run
directory against its task and rebuilding its model (``check_run_dir``, ``attnlab.load``) need
the tasks, so they live above them, in ``attnlab.loading``.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import numbers
import os
import re
import secrets
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from .errors import UsageError
from .paths import not_found, try_lock

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "atomic_write", "write_through", "naming", "sync", "read_json", "write_json", "write_yaml",
    "read_yaml",
    "save_weights", "save_tensors",
    "load_weights",
    "record_data_files", "check_data_files", "pin_data_files", "file_digest", "tree_digest",
    "digest_holds",
    "check_test_files",
    "process_umask", "remove_left", "remove_temporaries", "remove_stopped_writes",
    "held_temporary_folder",
    "readable", "write_metrics", "strict_json", "dumps", "RunConfig", "MissingSetting",
    "write_config",
]


def atomic_write(path: str | Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` through a temporary file and an atomic rename.

    The temporary file is created with mode 0666 and the process's umask (and the directory's
    default ACL) applied by the kernel, as ``open(path, "w")`` would: ``tempfile.mkstemp``'s
    0600 would leave files of a run directory unreadable to the rest of a group on a shared
    file system.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data

    write_through(path, lambda tmp: tmp.write_bytes(payload))


def write_through(path: str | Path, write: Callable[[Path], None], *, lock: bool = True
                  ) -> None:
    """Make ``path`` by ``write(tmp)`` to a new temporary file next to it, then an atomic
    rename: a kill never leaves a half file under ``path``, and a failed write leaves the old
    one as it was.

    The temporary file (``.NAME.<random>.tmp``, a name of its own: a fixed one would overwrite,
    then delete, a user's file of that name) exists, empty, with the mode ``open`` would give
    it, when ``write`` gets it; ``write`` may open it again or write over it. On any error it is
    deleted and the error is raised, naming ``path`` (``naming``). What ``write`` wrote is
    synced to the disk before the rename: else a machine that crashed just after it could
    leave ``path`` renamed but empty (a ``model.safetensors`` of 0 bytes where the old one was).
    The temporary file is locked while written (``lock``; ``remove_stopped_writes``): False
    for a ``write`` that locks it itself (HDF5 does, and refuses a file locked already),
    whose lock is taken again here once ``write`` returns, until the rename. (HDF5 with
    ``HDF5_USE_FILE_LOCKING=FALSE``, common on clusters, locks nothing: a second write of
    the same file, started while ``write`` runs, removes its temporary as a stopped one's.)

    Examples:
        >>> write_through("note.txt", lambda tmp: tmp.write_text("hello"))
        >>> Path("note.txt").read_text()
        'hello'
    """
    path = Path(path)
    remove_stopped_writes(path)
    fd, tmp = _create_temporary(path, lock=lock)
    if fcntl is None or not lock:  # (Windows: a file open here could not be renamed)
        os.close(fd)
        fd = None
    try:
        write(tmp)
        if fd is None and fcntl is not None:  # (``write`` closed and let go of its own lock)
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try_lock(fd)
        sync(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        raise naming(e, path)
    finally:
        if fd is not None:
            os.close(fd)  # (its lock goes with it)


def naming(error: BaseException, path: str | Path) -> BaseException:
    """``error``, naming ``path`` when it is an ``OSError`` that names no file: a ``write``
    to an open file on a full disk names none, and the one line the command line prints for
    it would otherwise blame standard output (``attnlab.cli``).

    ``torch.save``'s zip writer reports a write that failed (a full disk, ``ulimit -f``) as
    its own ``RuntimeError`` ("unexpected pos ..."), raised while the write's ``OSError`` was
    being handled: that ``OSError`` is the error, named. safetensors reports one as its own
    ``SafetensorError`` ("... (os error 28)"): the ``OSError`` of that code, named. Any other
    error as it is."""
    cause = error
    while isinstance(cause, RuntimeError) and cause.__context__ is not None:
        cause = cause.__context__
    if isinstance(cause, OSError):
        error = cause
    code = (re.search(r"\(os error (\d+)\)", str(error))
            if type(error).__name__ == "SafetensorError" else None)
    if code:
        return OSError(int(code[1]), os.strerror(int(code[1])), str(path))
    if isinstance(error, OSError) and error.filename is None:
        error.filename = str(path)
    return error


def sync(path: str | Path) -> None:
    """``path``'s data on the disk (``fsync``), whoever wrote it: before a rename gives it the
    name of a file that readers trust."""
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # (Windows syncs only
    # what it may write)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# the name of ``write_through``'s temporary file: ``.NAME.<8 hex digits>.tmp``
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{8}\.tmp")

# the files train itself writes through ``write_through`` in its run directory, by folder
# ("." the run directory): the only ones whose temporaries ``remove_temporaries`` takes for
# a killed train's (evaluate, plot and view write others there without holding the run)
_TRAIN_WRITES = {
    ".": re.compile(r"model\.safetensors|metrics\.json|config\.yaml|tokenizer\.json"
                    r"|confusion\.csv|baselines\.json|\.launched"),
    "logs": re.compile(r"metrics(\.part[0-9]+)?\.csv"),
    "adapter": re.compile(r"adapter_model\.safetensors|adapter_config\.json"),
    "data": re.compile(r"meta\.json|tokenizer\.json"),
}


def _create_temporary(path: Path, *, lock: bool = True) -> tuple[int, Path]:
    """A new, empty ``.NAME.<random>.tmp`` next to ``path`` (``_TEMPORARY``), opened for
    writing and locked (``flock``) while the descriptor is open: a later write of ``path``
    tells a temporary of a write that was stopped from one being written now by whether
    the lock can be taken (``remove_stopped_writes``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        if lock:
            try_lock(fd)
        return fd, tmp
    raise FileExistsError(f"no free temporary name next to {path}")


def remove_stopped_writes(path: str | Path) -> None:
    """Remove the temporary files of ``write_through`` of ``path`` that a process killed
    while writing it (SIGKILL, out of memory) left beside it, hidden (``.NAME.<random>.tmp``)
    and as large as the file, saying so on stderr: those no process holds the lock of
    (``_create_temporary``). One being written now is left; where the file system cannot
    tell, it is named for the user to remove. An empty one is left as it is: a write holds
    its temporary's lock from just after making it, and costs no space.

    Examples:
        >>> _ = Path(".out.png.0123abcd.tmp").write_bytes(b"half a PNG")
        >>> remove_stopped_writes("out.png")  # (on stderr: "note: removed .out.png.0123...")
        >>> Path(".out.png.0123abcd.tmp").exists()
        False
    """
    path = Path(path)
    try:
        names = sorted(os.listdir(path.parent))
    except OSError:  # (no folder yet, or an unreadable one: its writes fail and say so)
        return
    for name in names:
        found = _TEMPORARY.fullmatch(name)
        if found and found["name"] == path.name:
            _remove_if_stopped(path.with_name(name), f"a write of {path}")


def _remove_if_stopped(tmp: Path, left_by: str) -> None:
    """Remove ``tmp``, a temporary file or folder that attnlab locks while it is in use
    (``remove_stopped_writes``, ``held_temporary_folder``), where no process holds its lock,
    saying so and that ``left_by`` left it: a write of FILE, an evaluate that was stopped. An
    empty one is left as it is: its maker locks it just after making it, and it costs no
    space. Where the file system cannot tell, it is named for the user to remove."""
    try:
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # (gone meanwhile, a link, another user's: not this process's to remove)
        return
    try:
        size = _size(tmp, fd)
        if not size:
            return
        held = try_lock(fd)
        if held and not _same_file(tmp, fd):  # (renamed into place meanwhile: a write that
            return  # finished, its lock let go)
        if held:
            if tmp.is_dir():
                shutil.rmtree(tmp)
            else:
                tmp.unlink()
            print(f"note: removed {tmp} ({size:,} bytes), left by {left_by} that was stopped",
                  file=sys.stderr, flush=True)
        elif held is None:
            print(f"note: {tmp} may be left by {left_by} that was stopped; remove it unless "
                  f"{left_by} is running now", file=sys.stderr, flush=True)
    except OSError as e:
        print(f"note: {tmp} is left by {left_by} that was stopped; it could not be removed "
              f"({e.strerror or e})", file=sys.stderr, flush=True)
    finally:
        os.close(fd)


def _same_file(path: Path, fd: int) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not gone, nor another file)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)


def _size(path: Path, fd: int) -> int:
    """The bytes of the file open as ``fd`` at ``path``, or of the files in that folder."""
    if not path.is_dir():
        return os.fstat(fd).st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


@contextlib.contextmanager
def held_temporary_folder(prefix: str, left_by: str) -> Iterator[Path]:
    """A new temporary folder (``tempfile.mkdtemp``: ``PREFIX<random>`` in the system's
    temporary folder), locked while in use and removed after. Those of the same ``prefix``
    that no process holds, left by ``left_by`` killed (SIGKILL, out of memory) before it
    could remove its own, are removed first, saying so (``_remove_if_stopped``): a killed
    ``evaluate --data`` of a language model left its token file, as large as the text, in
    /tmp for good.

    Examples:
        >>> with held_temporary_folder("attnlab-doc-", "a doctest") as folder:
        ...     _ = (folder / "tokens.bin").write_bytes(b"1234")
        >>> folder.exists()
        False
    """
    import tempfile

    base = Path(tempfile.gettempdir())
    try:
        names = sorted(n for n in os.listdir(base) if n.startswith(prefix))
    except OSError:
        names = []
    for name in names:
        if re.fullmatch(r"[a-z0-9_]{8}", name[len(prefix):]):  # (mkdtemp's own names)
            _remove_if_stopped(base / name, left_by)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    fd = None
    try:
        if fcntl is not None:  # (Windows opens no directory: no lock, as no flock)
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try_lock(fd)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # (held still: not a stopped one's)
        if fd is not None:
            os.close(fd)


def remove_temporaries(run_dir: str | Path, *, held: bool = True) -> str | None:
    """Remove the temporary files of ``write_through`` that a process killed while writing
    (SIGKILL, out of memory) left in ``run_dir`` and the folders train writes: hidden, and as
    large as the file written (``model.safetensors``), which no later run removed. Only
    those of the files train writes (``_TRAIN_WRITES``), and only while this process holds
    ``run_dir`` (``held``: no other train writes there); else they are named. A folder that
    cannot be listed (mode 000: a killed ``export --hf RUN/hf``'s claim) is passed over.
    Returns the one line that says so, or None where there were none.

    Examples:
        >>> _ = Path("run").mkdir(), Path("run/.metrics.json.0123abcd.tmp").write_text("{")
        >>> remove_temporaries("run").endswith(".tmp (1 bytes), left by a write that was stopped")
        True
    """
    run_dir = Path(run_dir)
    found = []
    for folder, names in _TRAIN_WRITES.items():
        folder = run_dir / folder
        if not folder.is_dir() or folder.is_symlink():
            continue
        try:
            listed = sorted(folder.iterdir())
        except OSError:  # (unreadable: nothing of train's can be there)
            continue
        found += [p for p in listed if (m := _TEMPORARY.fullmatch(p.name))
                  and names.fullmatch(m["name"]) and p.is_file() and not p.is_symlink()]
    if not found:
        return None
    return remove_left(found, run_dir, held=held, left_by="a write that was stopped",
                       removed="left by a write that was stopped")


def remove_left(paths: list[Path], run_dir: str | Path, *, held: bool, left_by: str,
                removed: str) -> str:
    """The one rule of ``--resume`` for the files a stopped train left in ``run_dir`` (a
    half-written checkpoint, a ``write_through`` temporary): removed while this process holds
    the run directory (``held``); else, or where they cannot be removed, named for the user to
    remove, since another train may be writing them. Returns the note that says which,
    ``left_by`` saying what left them and ``removed`` ending the note of their removal."""
    named = ", ".join(map(str, paths))
    left = (f"note: --resume: {named} may be left by {left_by}; remove it if no attnlab train "
            f"is writing {run_dir} now")
    if not held:
        return left
    size = 0
    try:
        for path in paths:
            size += path.stat().st_size
            path.unlink()
    except OSError as e:
        return f"{left} (it could not be removed: {e.strerror or e})"
    return f"note: --resume: removed {named} ({size:,} bytes), {removed}"


_UMASK_LOCK = threading.Lock()


def process_umask() -> int:
    """The process's umask (Linux reports it in /proc; elsewhere set and restore it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def write_json(path: str | Path, obj: Any) -> None:
    """``obj`` as strict JSON (``strict_json``), keys sorted, written atomically."""
    atomic_write(path, dumps(obj, indent=2) + "\n")


def strict_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None, in dicts, lists and tuples:
    JSON has no NaN, and strict readers (``JSON.parse``, ``jq``, Go, Rust's serde) refuse the
    ``NaN`` that Python's ``json`` writes by default.

    Examples:
        >>> strict_json({"val_loss": float("nan"), "steps": [1, float("inf")]})
        {'val_loss': None, 'steps': [1, None]}
    """
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj: Any, **options: Any) -> str:
    """``json.dumps`` of ``strict_json(obj)``, keys sorted; a non-finite number left anywhere
    (a NumPy one) is an error here, never a ``NaN`` in the file."""
    return json.dumps(strict_json(obj), allow_nan=False, sort_keys=True, **options)


def write_yaml(path: str | Path, obj: dict) -> None:
    """``obj`` as a YAML mapping, keys sorted, written atomically in UTF-8, with its text
    as written (a data file ``clé 日本.csv``, not ``"cl\\xE9 \\u65E5\\u672C.csv"``); a text
    such as ``1e3`` is quoted, so that a file read back with YAML 1.2's numbers
    (``read_yaml(hand_written=True)``) reads it as the text it was."""
    import yaml

    dumper = _yaml_classes()[2]
    text = yaml.dump(dict(obj), Dumper=dumper, sort_keys=True, allow_unicode=True)
    if yaml.safe_load(text) != dict(obj):  # PyYAML writes some breaks (U+0085) unescaped
        text = yaml.dump(dict(obj), Dumper=dumper, sort_keys=True)
    atomic_write(path, text)


# YAML 1.2's numbers where YAML 1.1, which PyYAML reads, differs: a number with an exponent
# (1e-3, 3E4, 1.0e3: 1.1 asks for a dot and a signed exponent, 1.0e-3, and reads the others as
# text); an integer with leading zeros is decimal (1.1: 010 is octal 8), 0o17 octal, and 1:30 is
# text (1.1: sexagesimal 90). Underscores between digits stay (1_000), as a user means them,
# by Python's rule, which the command line's --max-steps 1_000 follows too: one underscore
# between two digits (1__000, 1000_ and 1__0.0 are text, refused naming the setting; YAML 1.1
# read them as numbers the flag refused), also in an exponent's number (1_0e3 is 10000.0).
_EXPONENT = r"^[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)[eE][-+]?[0-9_]+$"
_INTEGER = r"^[-+]?[0-9][0-9_]*$|^0x[0-9a-fA-F_]+$|^0o[0-7_]+$"
_FLOAT, _INT = "tag:yaml.org,2002:float", "tag:yaml.org,2002:int"


def integer(text: str) -> int:
    """An integer as a person writes one, the one rule of a ``--config`` file's integers
    (``_yaml12_int``) and of an integer flag's value (``settings.add_flags``): decimal, with
    Python's underscores (``1_000``) and leading zeros (``010`` is ten), or YAML 1.2's ``0x``
    hexadecimal and ``0o`` octal. ``ValueError`` for anything else.

    Examples:
        >>> integer("0x10"), integer("010"), integer("1_000")
        (16, 10, 1000)
    """
    if not re.fullmatch(_INTEGER, text):  # not int's " 12 " or other scripts' digits either
        raise ValueError(f"not an integer: {text!r}")
    prefixed = text.lstrip("+-")[:2].lower() in ("0x", "0o")
    return int(text, 0 if prefixed else 10)


def _yaml12_int(loader, node) -> int | str:
    """An integer as YAML 1.2 reads it (``integer``); what that refuses (``0o_``, ``1__0``)
    stays the text it is, which the setting's check then refuses, naming it."""
    written = loader.construct_scalar(node)
    try:
        return integer(written)
    except ValueError:
        return written


def _python_float(loader, node) -> float | str:
    """A number with a dot or an exponent, read by Python's ``float`` (the command line's
    ``--lr 1_0e-3``); YAML's ``.inf`` and ``.nan`` as YAML reads them; anything else that
    ``float`` refuses (``1__0.0``) the text it is, refused by the setting's check."""
    written = loader.construct_scalar(node)
    if written.lstrip("+-").lower() in (".inf", ".nan"):
        return loader.construct_yaml_float(node)
    try:
        return float(written)
    except ValueError:
        return written


@functools.cache
def _yaml_classes() -> tuple[type, type, type]:
    """(PyYAML's safe loader keeping each key once per mapping, the same reading numbers as
    YAML 1.2 does, the safe dumper quoting a text that one reads as a number), made on first
    use (yaml is imported lazily)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        """YAML's own rule, which PyYAML does not keep: a key once per mapping (otherwise the
        last one would silently win)."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"{key!r} is set twice", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    class Yaml12Numbers(UniqueKeys):
        """``UniqueKeys``, reading numbers as a hand-written file means them (``lr: 1e-3``)."""

    class QuoteNumbers(yaml.SafeDumper):
        """The safe dumper, quoting a text that ``Yaml12Numbers`` would read as a number."""

    Yaml12Numbers.yaml_implicit_resolvers = {  # 1.1's integers out, 1.2's in
        first: [(tag, rx) for tag, rx in resolvers if tag != _INT]
        for first, resolvers in UniqueKeys.yaml_implicit_resolvers.items()}
    Yaml12Numbers.add_constructor(_INT, _yaml12_int)
    Yaml12Numbers.add_constructor(_FLOAT, _python_float)
    for cls in (Yaml12Numbers, QuoteNumbers):
        cls.add_implicit_resolver(_FLOAT, re.compile(_EXPONENT), list("-+0123456789."))
        cls.add_implicit_resolver(_INT, re.compile(_INTEGER), list("-+0123456789"))
    return UniqueKeys, Yaml12Numbers, QuoteNumbers



def write_config(run_dir: str | Path, cfg: Any) -> None:
    """``RUN_DIR/config.yaml``: the run's typed config (``attnlab.run_config``) as the flat
    mapping of its settings (``cfg.record()``: the keys are the settings' names), keys sorted,
    written atomically. The one writer of a run's ``config.yaml``, but for ``--resume`` given
    a moved data file, whose new path ``commands.preflight.record_moved_data`` writes into it
    as the resumed run starts."""
    write_yaml(Path(run_dir) / "config.yaml", cfg.record())


def readable(metrics: Any, digits: int = 6) -> Any:
    """Metrics as a person would read them: every non-integer number rounded to ``digits``
    significant digits (float32 noise such as 0.9980000257492065 becomes 0.998); integers
    (steps, parameters), booleans, text and non-finite numbers are kept as they are; dicts,
    lists and tuples are rounded element by element; a one-element tensor or NumPy scalar
    becomes a Python number first.

    Examples:
        >>> readable({"test_accuracy": 0.9980000257492065, "steps": 600})
        {'test_accuracy': 0.998, 'steps': 600}
    """
    if isinstance(metrics, dict):
        return {k: readable(v, digits) for k, v in metrics.items()}
    if isinstance(metrics, (list, tuple)):
        return [readable(v, digits) for v in metrics]
    if not isinstance(metrics, (numbers.Number, str)) and callable(getattr(metrics, "item", None)) \
            and getattr(metrics, "ndim", None) == 0:
        metrics = metrics.item()  # a 0-d tensor or NumPy scalar
    if isinstance(metrics, bool) or not isinstance(metrics, numbers.Real):
        return metrics
    if isinstance(metrics, numbers.Integral):
        return int(metrics)
    value = float(metrics)
    return float(f"{value:.{digits}g}") if math.isfinite(value) else value


def write_metrics(path: str | Path, metrics: dict) -> None:
    """``metrics.json``: ``readable`` numbers, keys sorted, written atomically; a metric that
    is not a finite number (a NaN loss) is written as null (``strict_json``)."""
    write_json(path, readable(metrics))


def read_json(path: str | Path, *, what: str = "a JSON file") -> Any:
    """The JSON value in ``path`` (UTF-8); ``UsageError`` naming the file and ``what`` it
    should have been when it is not valid JSON.

    Examples:
        >>> _ = Path("bad.json").write_text("{oops")
        >>> read_json("bad.json", what="a config")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        attnlab.errors.UsageError: bad.json is not a config (Expecting property name ...)
    """
    raw = _read_bytes(path, "")
    try:
        return json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path} is not {what} ({e})") from None


def _read_bytes(path: str | Path, prefix: str) -> bytes:
    """The bytes of ``path``; a file that is there but cannot be read (no permission, EIO) is
    a ``UsageError`` beginning with ``prefix`` and naming the file. A missing file stays
    ``FileNotFoundError``, which callers test for."""
    try:
        return Path(path).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as e:
        raise _cannot_read(path, e, prefix) from None


def _read_bytes_allowed(path: Path) -> None:
    """``UsageError`` naming ``path`` when it cannot be opened for reading: safetensors says
    "No such file or directory" of a file that is there but not readable (no permission)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise _cannot_read(path, e) from None


def _cannot_read(path: str | Path, error: OSError, prefix: str = "") -> UsageError:
    return UsageError(f"{prefix}{path}: cannot read the file ({error.strerror or error})")


def _yaml_problem(error: Exception) -> str:
    """What is wrong in a file PyYAML could not read, and where: its problem and the line and
    column of it (its message's first line is only the context, "while scanning ...")."""
    import yaml

    mark = getattr(error, "problem_mark", None)
    if isinstance(error, yaml.MarkedYAMLError) and error.problem and mark is not None:
        return f"{error.problem}, line {mark.line + 1}, column {mark.column + 1}"
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def read_yaml(path: str | Path, *, what: str = "--config",
              hand_written: bool = False) -> dict:
    """A YAML mapping from ``path``; ``UsageError`` naming the file when missing, broken or
    empty (no settings at all: a run's config.yaml cut short, a --config file saved blank).
    An empty file read as an empty mapping would name no task, or train with the defaults
    without any message, so it is refused. ``hand_written`` (a ``--config`` file): numbers are
    read as YAML 1.2 reads them, as a user means them (``1e-3`` is a number, not the text
    PyYAML's YAML 1.1 reads; ``010`` is ten, not octal eight; ``1:30`` is text, not 90)."""
    import yaml

    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{what}: {path} is a directory, not a YAML file")
    if not path.is_file():
        raise not_found(what, path)
    loader = _yaml_classes()[1 if hand_written else 0]
    raw = _read_bytes(path, f"{what}: ")
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=loader)  # noqa: S506
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise UsageError(f"{what}: {path} is not valid YAML ({_yaml_problem(e)})") from None
    if data is None:
        raise UsageError(f"{what}: {path} is empty: it holds no settings")
    if not isinstance(data, dict):
        raise UsageError(f"{what}: {path} must hold a mapping of settings, got {type(data).__name__}")
    return data


class MissingSetting(UsageError, KeyError):
    """A setting a run's ``config.yaml`` lacks (a ``KeyError`` too, for code that expects one)."""

    def __str__(self) -> str:  # KeyError's own would quote the message
        return str(self.args[0])


class RunConfig(dict):
    """A run directory's settings: a plain ``dict`` whose missing key is a ``UsageError``
    naming ``config.yaml`` and the setting (a hand-edited or truncated file), not a
    ``KeyError`` traceback."""

    def __init__(self, data: dict, path: str | Path) -> None:
        super().__init__(data)
        self.path = Path(path)

    def __missing__(self, key):
        raise MissingSetting(f"{self.path} has no setting {key!r}, which this command needs "
                             f"(was the file edited by hand?)")


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB pieces; of a directory (a Hugging Face
    datasets directory given as a data file), its ``tree_digest``."""
    import hashlib

    if Path(path).is_dir():
        return tree_digest(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest_holds(path: str | Path, digest: str, recorded: str) -> bool:
    """Whether ``digest``, taken of ``path`` now, is the ``recorded`` one: equal, or for a
    datasets directory the digest runs recorded before cache files were left out of it
    (``tree_digest(path, caches=True)``), so that their data, unchanged, is still theirs."""
    if digest == recorded:
        return True
    path = Path(path)
    return (path.is_dir() and bool(_datasets_cache(path))
            and tree_digest(path, caches=True) == recorded)


def tree_digest(root: str | Path, known: Mapping[str, str] | None = None, *,
                caches: bool = False) -> str:
    """SHA-256 over a directory's files: each file's path relative to ``root`` (``/``-separated,
    sorted) and its SHA-256, so a file added, removed, renamed or changed anywhere under it
    changes the digest (but a cache file of ``datasets``, which holds no row read:
    ``_datasets_cache``; ``caches``: with them, as runs before that recorded it). ``known``:
    digests already taken of some files (by relative path), as a reader hashed them while
    reading them, used instead of reading those files again.

    Examples:
        >>> _ = Path("d").mkdir(), Path("d/a.txt").write_text("a")
        >>> tree_digest("d") == tree_digest("d", known={"a.txt": file_digest("d/a.txt")})
        True
    """
    import hashlib

    root = Path(root)
    h = hashlib.sha256()
    unread = set() if caches else _datasets_cache(root)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p not in unread):
        name = path.relative_to(root).as_posix()
        digest = (known or {}).get(name) or file_digest(path)
        h.update(f"{name}\0{digest}\n".encode())
    return h.hexdigest()


def _datasets_cache(root: Path) -> set[Path]:
    """The files ``datasets`` caches in a directory written by ``save_to_disk``: a ``.map`` or
    ``.filter`` of the dataset loaded from it writes ``cache-<fingerprint>.arrow`` there. No
    row is read from one (``state.json`` lists the files that hold the rows), so adding one
    changes nothing a run read; a file ``state.json`` lists is never left out."""
    try:
        state = json.loads((root / "state.json").read_text(encoding="utf-8"))
        listed = {f["filename"] for f in state["_data_files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return set()  # not a datasets directory (or not one to trust): every file counts
    return {p for p in root.glob("cache-*.arrow") if p.name not in listed}


def record_data_files(paths: Mapping[str, str | None]) -> dict[str, Any]:
    """What a run records of its data files (``paths``: each data option's file, by option
    name; None where not given): each path made absolute (``evaluate`` may run from another
    directory) and its digest under ``data_sha256``, so that ``evaluate`` can tell whether a
    split re-drawn from the same file is still the held-out one. Returns those values, for the
    caller to merge into its settings."""
    present = {key: str(Path(path).resolve()) for key, path in paths.items() if path}
    return {**present, "data_sha256": {key: file_digest(p) for key, p in present.items()}}


_CHANGED = {  # purpose: (since when, why a changed file matters, what to do instead)
    "evaluate": ("was trained", "the test rows read from it again would not be the held-out ones",
                 "evaluate on a file of your choice with --data FILE"),
    "resume": ("started", "its splits would not be the ones trained on so far",
               "put the {what} back or start a new run"),
}


def data_gone(key: str, path: str | Path, *, purpose: str, what: str = "file") -> UsageError:
    """The error of a run's data ``path`` (``what``: "file", or "corpus") that is no longer
    there, given to ``--key`` on ``purpose`` ("resume": it may be given where it is now)."""
    when, _, remedy = _CHANGED[purpose]
    moved = f"give --{key} where it is now, " if purpose == "resume" else ""
    return UsageError(f"--{key} {path} (the {what} this run {when} on) is gone; "
                      f"{moved}{remedy.format(what=what)}")


def check_data_files(paths: Mapping[str, str | None], recorded: Mapping[str, str] | None, *,
                     purpose: str = "evaluate") -> None:
    """Refuse to re-draw a run's splits from a data file that changed since the run started
    (``purpose`` "resume") or was trained ("evaluate"): its "test" rows would no longer be the
    rows the model never saw. ``paths``: the run's data files by option name; ``recorded``:
    the digests its config.yaml's ``data_sha256`` holds, by option name (None: a run that
    recorded none, so nothing to check)."""
    when, why, remedy = _CHANGED[purpose]
    for key, digest in (recorded or {}).items():
        path = Path(paths[key])
        if not path.exists():  # a file, or a datasets directory
            raise data_gone(key, path, purpose=purpose)
        if not digest_holds(path, file_digest(path), digest):
            raise UsageError(f"--{key} {path} changed since this run {when} (its SHA-256 "
                             f"differs from config.yaml's data_sha256), so {why}; "
                             f"{remedy.format(what='file')}")


def check_test_files(paths: Mapping[str, str | None], recorded: Mapping[str, str] | None
                     ) -> None:
    """``check_data_files`` for ``evaluate``, of the files its test split is drawn from: not
    ``--val FILE``, which no test row depends on (a run whose val file was edited since is
    still evaluated on the rows it held out)."""
    check_data_files({k: v for k, v in paths.items() if k != "val"},
                     {k: d for k, d in (recorded or {}).items() if k != "val"})


def pin_data_files(paths: Mapping[str, str | None], recorded: Mapping[str, str] | None, *,
                   resuming: bool) -> dict[str, Any]:
    """``record_data_files`` for a new run (its values returned); for ``--resume`` of a run
    that ``recorded`` digests, ``check_data_files`` against them (nothing to add: {})."""
    if resuming and recorded:
        check_data_files(paths, recorded, purpose="resume")
        return {}
    return record_data_files(paths)


def save_weights(model, path: str | Path) -> None:
    """Save a module's state dict as safetensors, atomically (shared tensors are de-duplicated)."""
    from safetensors.torch import save_model

    _save_safetensors(lambda tmp: save_model(model, tmp), path)


def save_tensors(tensors: Mapping[str, Any], path: str | Path) -> None:
    """Save tensors by name as safetensors, atomically (a LoRA run's adapter)."""
    from safetensors.torch import save_file

    _save_safetensors(lambda tmp: save_file(dict(tensors), tmp), path)


def _save_safetensors(save: Callable[[str], None], path: str | Path) -> None:
    def write(tmp: Path) -> None:
        save(str(tmp))
        # safetensors writes its file with mode 0600 whatever the umask; give it the mode any
        # other new file gets, so that a group on a shared file system can read the model
        os.chmod(tmp, 0o666 & ~process_umask())

    write_through(path, write)


# Weights read in place of one file: (the file, a function that loads the weights into a
# model), set by ``attnlab.loading.weights_from`` while a command or ``attnlab.load(...,
# checkpoint="last")`` loads an interrupted run's checkpoint instead of its model.safetensors.
# The tasks' loaders all read their run's weights through ``load_weights``, so they need not know.
WEIGHTS_IN_PLACE: ContextVar[tuple[Path, Callable[[Any], None]] | None] = ContextVar(
    "attnlab_weights_in_place", default=None)


def load_weights(model, path: str | Path) -> None:
    """Load safetensors weights into ``model``; ``UsageError`` naming the file on any mismatch.
    Inside ``attnlab.loading.weights_from``, the weights it names in place of ``path``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model

    path = Path(path)
    swap = WEIGHTS_IN_PLACE.get()
    if swap is not None and swap[0] == Path(os.path.abspath(path)):
        swap[1](model)
        return
    if not path.is_file():
        raise UsageError(f"weights file not found: {path}")
    _read_bytes_allowed(path)
    try:
        missing, unexpected = load_model(model, str(path), strict=False)
    except (SafetensorError, OSError, ValueError) as e:
        raise UsageError(f"{path} is not a readable safetensors file ({e})") from None
    except RuntimeError as e:  # shape mismatch
        msg = str(e).strip().splitlines()
        detail = next((line.strip() for line in msg if "size mismatch" in line), msg[0] if msg else "")
        raise UsageError(f"{path} does not match config.yaml: {detail}") from None
    if missing or unexpected:
        raise UsageError(
            f"{path} does not match config.yaml: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
