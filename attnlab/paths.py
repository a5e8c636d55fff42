"""Where a command writes: the one rule every output path is checked by before any work is
done — a run directory (``train --out``), a figure or page (``plot``, ``view``, ``evaluate
--by-length``), a prepared corpus (``prepare --out``), a jets file (``data jets --out``) and an
exported model (``export --hf``). Each command adds only what is its own (whether an existing
path may be replaced, the suffixes a figure may have).

Torch-free and at the bottom of the package: ``attnlab.data`` uses it as the commands do.

Examples:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     check_output(f"{d}/runs/r1", "--out", directory=True).name
    'r1'
    >>> check_output("", "--out", directory=False)
    Traceback (most recent call last):
    ...
    attnlab.errors.UsageError: --out is empty; name a file
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from .errors import UsageError

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

__all__ = ["PATHS_HELP", "PATH_METAVARS", "check_named", "check_output", "empty_message",
           "entered", "hold", "is_special_file", "not_found", "path_kind", "refuse_stream",
           "try_lock"]

# The placeholders (argparse's metavar) of the arguments that name a path, and what each names:
# the one declaration by which every command's path argument, input or output, is refused when
# empty or blank (``attnlab.cli`` for plain arguments, ``attnlab.settings.setting`` for
# settings). Unrefused, ``Path("")`` and ``Path(" ")`` are read as the current directory or a
# file named " ", and the message that follows ("--input-file : is a directory") names neither.
PATH_METAVARS = {"DIR": "directory", "FILE": "file", "PATH": "file or directory",
                 "PNG": "file", "FILE.html": "file", "OUT": "directory"}


def path_kind(metavar: str | None) -> str | None:
    """What an argument's placeholder says it names, a path of ``PATH_METAVARS`` or None:
    the placeholder itself, or one of the alternatives of a value that may be a word or a
    path (``balanced|FILE``, ``KIND|DIR``), whose path is then taken as any other is.

        >>> path_kind("DIR"), path_kind("balanced|FILE"), path_kind("KIND|DIR"), path_kind("N")
        ('directory', 'file', 'directory', None)
    """
    for each in [metavar] + (metavar.split("|") if isinstance(metavar, str) else []):
        if each in PATH_METAVARS:
            return PATH_METAVARS[each]
    return None


def empty_message(name: str, advice: str) -> str:
    """The one wording of a value that names nothing (empty or spaces only), for a path or
    any setting: ``name`` (a flag, a positional's placeholder, a --config key) and what to
    give instead.

        >>> empty_message("--freeze", "give none, encoder or all-but-last-N")
        '--freeze is empty; give none, encoder or all-but-last-N'
    """
    return f"{name} is empty; {advice}"


def check_named(value: str | os.PathLike, flag: str, what: str, hint: str = "") -> None:
    """Refuse a path argument that names nothing: empty or spaces only.

        >>> check_named(" ", "--input-file", "file")
        Traceback (most recent call last):
        attnlab.errors.UsageError: --input-file is empty; name a file
    """
    if not str(value).strip():
        raise UsageError(empty_message(flag, f"name a {what}{hint}"))


def check_output(out: str | os.PathLike, flag: str, *, directory: bool,
                 make_parents: bool = True, renamed: bool = False, hint: str = "",
                 example: str = "out") -> Path:
    """``out`` as a Path, or a ``UsageError`` naming ``flag`` and the path when nothing could
    be written there: an empty name; ``-`` (standard output elsewhere); a file where a
    directory is wanted (``directory``) or a directory where a file is; a broken or looping
    symbolic link on the way; a file where a parent directory should be; a missing parent when
    the command does not make parents (``make_parents=False``); or a nearest existing
    directory this process cannot create files in (tested by making and removing a temporary
    directory there: the one test that also holds for root and for /proc; with ``renamed``,
    the command writes beside ``out`` and renames onto it, so its parent is that directory,
    whatever ``out`` is). ``hint`` ends each
    message (e.g. how to choose another path); ``example`` is the file name suggested inside a
    directory given for a file. Whether an existing ``out`` may be replaced is the caller's
    rule."""
    what = "directory" if directory else "file"
    check_named(out, flag, what, hint)
    if str(out).strip() == "-":  # the usual name of standard output, which nothing here writes
        raise UsageError(f"{flag} -: this command writes a {what}, not to standard output; "
                         f"name a {what}{hint}")
    path = Path(out)
    _check_no_tilde(path, flag, hint)
    if directory and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is a file, not a directory{hint}")
    if not directory and path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; name a file in it, e.g. "
                         f"{path / example}{hint}")
    # where files go
    ancestor = path.absolute() if directory and not renamed else path.absolute().parent
    while not ancestor.exists():
        if ancestor.is_symlink():  # a dangling link, or a loop
            raise UsageError(f"{flag} {path}: {ancestor} is a broken or looping symbolic "
                             f"link{hint}")
        if not make_parents and ancestor != path.absolute():
            raise UsageError(f"{flag} {path}: the directory {ancestor} does not exist{hint}")
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{flag} {path} lies under {ancestor}, which is a file, not a "
                         f"directory{hint}")
    try:
        probe = tempfile.mkdtemp(prefix=".attnlab-probe-", dir=ancestor)
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise UsageError(f"{flag} {path}: cannot write there (cannot create files in "
                         f"{ancestor}: {why}){hint}") from None
    os.rmdir(probe)
    return path


# the rule of ``entered``, as ``attnlab --help`` and ``train --config``'s help say it
PATHS_HELP = ("Paths: a leading ~ is your home directory, after --flag= and in a --config file "
              "too; an environment variable ($HOME) is expanded only by your shell (a quoted "
              "one, or one in a --config file, is refused: write it out); a relative path, a "
              "--config file's too, is read from the working directory.")

# why a path that starts with '~' names no home directory here: the command line and --config
# files expand it (``entered``); a Python call's path, as pathlib's, is taken as it is
NOT_EXPANDED = "'~' is not expanded here (a path handed to a Python function)"

# what a shell expands after a $: $NAME or ${NAME} (``name``), or another ${...}
# (``${HOME:-/x}``, ``${#HOME}``, ``${}``: ``braces``), which it expands, or refuses, whether
# or not the variable is set
_VARIABLE = re.compile(r"\$(?:(?P<name>[A-Za-z_]\w*)|\{(?P<braced>[A-Za-z_]\w*)\}"
                       r"|(?P<braces>\{[^}]*\}))")


def _unexpanded_variable(path: str) -> re.Match | None:
    """The first ``$...`` of ``path`` that a shell, had it not been quoted, would have
    expanded: a ``$NAME`` or ``${NAME}`` of a variable set in this environment (one that is
    not set, as in ``runs/price$USD``, is the user's own name, which the shell would have left
    alone too, expanding it to nothing) or any other ``${...}``."""
    for found in _VARIABLE.finditer(path):
        variable = found["name"] or found["braced"]
        if variable is None or variable in os.environ:
            return found
    return None


def entered(value: str, name: str, *, beside: Path | None = None) -> str:
    """A path as the user typed it (``name``: its flag, a positional's placeholder, or the key
    of a ``--config`` file), as a shell would have handed it on: the one rule of every path
    that enters a command, a flag's or a --config file's, applied where it is read
    (``attnlab.cli`` and ``attnlab.settings``), before anything is written.

    - A leading ``~`` or ``~user`` is expanded (``os.path.expanduser``), as the shell does for
      an unquoted word: ``--out=~/runs/r``, ``"~/data.csv"`` and ``data: ~/data.csv`` in a
      --config file name the home directory's, never a directory named ``~`` in the working
      directory. ``~nobody``, a user this machine lacks, which a shell leaves as it is, is
      refused (unless a file of that name is in the working directory).
    - An environment variable (``$HOME``, ``${DATA}``) is not expanded: a shell expands it
      unless it is quoted, and a --config file that needs one is better written out. A path
      holding one that is set here (or any ``${...}``: ``${HOME:-/x}``) and is not there as
      typed is refused, naming the variable (and the path it would give), rather than read or
      made as a directory named ``$HOME``; the message says how to keep a ``$NAME`` that is
      part of a name (with the variable unset, as ``runs/price$USD`` usually is, it is
      taken as typed).
    - A relative path is read from the working directory, a --config file's too, as a flag's
      is. ``beside`` (a --config file's directory): a relative path not there but found beside
      the file is refused, naming both, rather than reported missing or read from elsewhere.

    Raises:
        UsageError: ``~nobody``, a variable as above; a --config path found only beside the
            file.

    Examples:
        >>> import os; home = os.path.expanduser("~")
        >>> entered("~/runs/r", "--out") == os.path.join(home, "runs/r")
        True
        >>> entered("runs/r", "--out")
        'runs/r'
    """
    if not isinstance(value, str):
        return value
    path = os.path.expanduser(value) if value.startswith("~") else value
    if path.startswith("~"):  # ~nobody: a user this machine lacks, which no shell expands
        _check_no_tilde(Path(path), name, "")
    variable = _unexpanded_variable(path)
    if variable and not os.path.lexists(path):
        meant = os.path.expandvars(path)
        example = f", e.g. {meant}" if meant != path and "${" not in meant else ""
        own = variable["name"] or variable["braced"]
        literal = (f"; a {variable[0]} that is part of the name itself is taken as typed with "
                   f"{own} unset: env -u {own} attnlab ..." if own else "")
        raise UsageError(f"{name} {value}: {variable[0]} is not expanded (attnlab expands a "
                         f"leading ~ as a shell does, but not an environment variable, which "
                         f"a shell leaves as it is when quoted); write the path out in "
                         f"full{example}{literal}")
    if (beside is not None and not os.path.isabs(path) and not os.path.lexists(path)
            and (beside / path).exists()):
        raise UsageError(f"{name} {value}: not in the working directory {Path.cwd()}, where "
                         f"a --config file's relative paths are read from, as flags' are; "
                         f"{beside / path} is beside the file: write that, or run from "
                         f"{beside}")
    return path


def hold(directory: Path, flag: str, command: str) -> int | None:
    """Hold the existing ``directory`` for this process while it writes there: an exclusive
    ``flock``, released when the returned descriptor is closed or the process ends (a killed
    process leaves no lock behind). None where the file system has no locks for a directory
    (NFS: Linux takes ``flock`` there as a lock of a file open for writing, which a directory
    cannot be) or the platform none (Windows): the directory is then unguarded.

    Raises:
        UsageError: another process holds it (two commands started together with the same
            ``flag``, both having found it free), naming ``flag``, the directory and
            ``attnlab command``.
    """
    if fcntl is None:  # (Windows: no flock, and a directory cannot be opened)
        return None
    fd = os.open(directory, os.O_RDONLY)
    held = try_lock(fd)
    if held:
        return fd
    os.close(fd)
    if held is False:
        raise UsageError(f"{flag} {directory} is in use by another attnlab {command} running "
                         f"now; wait for it to end, or choose another {flag}")
    return None


def try_lock(fd: int) -> bool | None:
    """Take the lock (an exclusive ``flock``, not waiting) of the file or directory open as
    ``fd``, the one file-lock rule of ``hold``, ``runs.write_through``'s temporaries and
    export's: True, held until ``fd`` is closed; False where another process holds it; None
    where the file system cannot tell (no locks: Windows, an NFS without its lock service)."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _unexpanded(path: str | Path) -> tuple[str, Path | None] | None:
    """(its first part, the path meant) where ``path`` starts with a ``~`` or ``~user`` that
    nothing expanded (the path meant None where no home is known); None for another path."""
    parts = Path(path).parts
    first = parts[0] if parts else ""
    if not first.startswith("~"):
        return None
    home = os.path.expanduser(first)
    return first, (Path(home, *parts[1:]) if home != first else None)


def is_special_file(path: str | Path) -> bool:
    """Whether ``path`` is there but is no regular file nor directory: a pipe (``--data
    <(zcat corpus.gz)``, a FIFO) or a device, which a reader that reads a file twice (a
    tokeniser fitted, then the text encoded) or by its size cannot read."""
    return os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path))


def refuse_stream(path: str | Path, what: str) -> None:
    """The one rule for a data file that is a pipe (``--data <(cat my.tsv)``, a FIFO,
    ``/dev/stdin``) or a device, checked before it is opened: ``not_found``'s one line naming
    ``what`` (its flag) and the path. A run records each data file's SHA-256 and reads the
    file again to check it (on ``--resume``, in ``evaluate``), which a stream cannot give
    twice: read, it would be recorded as a file that is gone, and a FIFO no one writes to
    would keep the command waiting forever on its first open.

        >>> refuse_stream("/dev/null", "--data")
        Traceback (most recent call last):
        attnlab.errors.UsageError: --data: /dev/null is not a regular file (a pipe, as <(...) gives, or a device); write its text to a file and give that
    """
    if is_special_file(path):
        raise not_found(what, path)


def not_found(what: str, path: str | Path) -> UsageError:
    """The error of an input file that is not there: ``WHAT: file not found: PATH`` (without
    ``WHAT: `` where ``what`` is "": a positional FILE), and where PATH starts with a ``~``
    that nothing expanded, the path meant; where PATH is ``-``, that it is not standard input;
    where PATH is there but no regular file (a pipe), that.

        >>> str(not_found("--data", "~/nowhere.csv")).startswith(
        ...     "--data: file not found: ~/nowhere.csv ('~' is not expanded here")
        True
    """
    found = _unexpanded(path)
    meant = (f" ({NOT_EXPANDED}: write it out in full, e.g. {found[1]})"
             if found and found[1] else "")
    if str(path) == "-":  # the usual name of standard input, which only --input-file reads
        meant = " ('-' is not standard input here: name the file)"
    elif is_special_file(path):
        return UsageError(f"{f'{what}: ' if what else ''}{path} is not a regular file (a pipe, "
                          f"as <(...) gives, or a device); write its text to a file and give "
                          f"that")
    return UsageError(f"{f'{what}: ' if what else ''}file not found: {path}{meant}")


def _check_no_tilde(path: Path, flag: str, hint: str) -> None:
    """A path that starts with ``~`` or ``~user`` which nothing expanded (a Python call's,
    or ``~nobody``, a user this machine lacks: the command line expands the rest, ``entered``)
    would make a directory named ``~``
    in the working directory, which a later ``rm -r ~`` to remove it would take for the home
    directory. It is refused, naming the path meant, unless such a ``~`` already exists in the
    working directory (then it is the user's own)."""
    found = _unexpanded(path)
    if found is None or Path(found[0]).exists():
        return
    first, meant = found
    why = (NOT_EXPANDED if meant else "no home directory is known here" if first == "~"
           else f"no user {first[1:]!r} has a home directory here")
    raise UsageError(f"{flag} {path}: {why}, so it would name {first!r} in "
                     f"{Path.cwd()}; "
                     f"{f'write it out in full, e.g. {meant}' if meant else 'write the full path'}"
                     f"{hint}")
