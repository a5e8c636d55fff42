"""The ``attnlab`` command.

Each sub-command lives in ``attnlab/commands/NAME.py`` with ``register(subparsers)`` (adds its
parser and sets ``func``) and is imported here to build ``--help``; command modules import only
what parsing needs, so commands that do not train never import Lightning.

Exit status: 0 on success; 2 on a usage or input error, with one line on stderr naming the
offending flag, file, column or value and no traceback; 1 only for an internal fault.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import gc
import os
import re
import signal
import sys
import threading
from importlib import import_module

from .errors import TERMINATING, Interrupted, RankFailed, UsageError
from .paths import PATHS_HELP, check_named, entered, path_kind

COMMANDS = ("train", "evaluate", "predict", "translate", "generate", "prepare", "plot", "view",
            "explain", "data", "export")


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is a ``UsageError`` (one line, exit 2) instead of usage text,
    and a flag is taken only as spelled in full: argparse's abbreviations read ``translate
    --input TEXT`` as ``--input-file TEXT``, and ``generate --prom a --prompt b`` as the prompt
    b alone."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        if sys.version_info >= (3, 14):  # argparse's own hint, worded per version: ours only
            kwargs.setdefault("suggest_on_error", False)
        super().__init__(*args, **kwargs)
        # a flag given twice is refused or noted (``_StoreOnce``), for every flag of every command
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)
        # (argparse looks an action class up in the registry too: add_flags' switches)
        self.register("action", argparse.BooleanOptionalAction, _SwitchOnce)

    def _check_value(self, action, value):
        # "invalid choice: 'trian' (choose from ...); did you mean 'train'?", from the choices
        # themselves: argparse words (and quotes) its message differently from one Python to
        # the next
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError as e:
            meant = _near(str(value), [str(c) for c in action.choices or ()], cutoff=0.6)
            if not meant:
                raise
            raise argparse.ArgumentError(action, f"{e.message}; did you mean '{meant[0]}'?"
                                         ) from None

    def parse_known_args(self, args=None, namespace=None):
        # A sub-command's parser refuses what it does not know itself, so that the message
        # names the command and the closest of its own flags (argparse would hand the words
        # up to the top-level parser, which knows neither). attnlab wants no leftovers.
        args = sys.argv[1:] if args is None else list(args)
        self._words = args  # for error()'s hint
        self._given: dict[str, list] = {}  # dest -> (option string, value) of each given
        self._notes: dict[str, str] = {}  # dest -> the note of a flag given again
        try:
            namespace, extras = super().parse_known_args(args, namespace)
        except UsageError as e:
            # `data jets --singal 3` is told of its misspelt flag, not that --signal is missing
            extras = self._unknown(args) if "arguments are required" in str(e) else []
            if not extras:
                raise
        if extras:
            hint = self._of_siblings(extras) or self._closest(extras)
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}{_as_path(extras)}")
        self._check_paths(namespace)
        # a sub-command's notes go up with its values, to be said once the command has done
        # its checks (``_main``; train's before it trains, ``attnlab.commands.train``)
        namespace.flag_notes = [*getattr(namespace, "flag_notes", []), *self._notes.values()]
        return namespace, extras

    def _check_paths(self, namespace) -> None:
        """Refuse an empty or blank path (``predict RUN --input-file ""``, ``evaluate " "``)
        by the one rule of ``attnlab.paths.check_named``, naming the flag, or the placeholder
        of a positional (DIR): read on, "" was the current directory and " " a file named " ",
        and the message that followed named neither. Every path, a setting's flag's too, is
        then taken as a shell hands it on (``attnlab.paths.entered``: ``--out=~/runs/r`` is
        the home directory's). A setting (``--data FILE`` of a task,
        with its own type) is checked by the same declaration where settings are read, in
        ``--config`` files too."""
        for action in self._actions:
            # what the argument names: its own ``path_kind`` where the placeholder says less
            # (generate's DIR is a .gguf file too), else its placeholder's
            what = getattr(action, "path_kind", None) or path_kind(action.metavar)
            value = getattr(namespace, action.dest, None)
            if what is None or value is None:
                continue
            name = action.option_strings[-1] if action.option_strings else str(action.metavar)
            try:
                each_entered = []
                for each in value if isinstance(value, list) else [value]:
                    if action.type is None:  # (a setting's, typed, where settings are read)
                        check_named(each, name, what)
                    each_entered.append(entered(each, name))
            except UsageError as e:
                if action.option_strings:  # a flag names itself, as check_output's messages do
                    raise
                # a positional's placeholder, with its command: "predict: DIR is empty"
                self.error(str(e))
            setattr(namespace, action.dest,
                    each_entered if isinstance(value, list) else each_entered[0])

    def _unknown(self, args: list[str]) -> list[str]:
        """The words of ``args`` that look like flags this parser does not have (none for a
        parser of sub-commands: the words are theirs to judge)."""
        if any(isinstance(a, argparse._SubParsersAction) for a in self._actions):
            return []
        # (a word with a space is a value to argparse, as `--input "-a b"` is: not a flag)
        return [word for word in args if word.startswith("-") and len(word) > 1
                and " " not in word and not _NEGATIVE_NUMBER.match(word)
                and word.split("=", 1)[0] not in self._option_string_actions]

    def error(self, message: str):
        # "train reverse: unrecognized arguments: ..."; the top-level parser adds no prefix, as
        # main() already prints "attnlab: error:" (adding one here would print it twice)
        where = self.prog.removeprefix("attnlab").strip()
        message = self._one_dash(message)
        message += _dash_value(message, getattr(self, "_words", []), self._option_string_actions)
        raise UsageError(f"{where}: {message}" if where else message)

    def _one_dash(self, message: str) -> str:
        """argparse's "argument -h/--help: ignored explicit argument 'f'" for ``-hf`` (a flag
        written with one dash, read as -h and f), as what was typed and what was meant:
        "-hf is read as -h followed by 'f'; did you mean --hf?" where the command has that very
        flag; else that -h stands alone (``train lm -hf`` was asked "did you mean --ff?", a
        flag nobody typed)."""
        typed = re.fullmatch(r"argument -h/--help: ignored explicit argument '(.*)'", message)
        if typed is None:
            return message
        meant = f"--h{typed[1].lstrip('=')}"
        hint = (f"did you mean {meant}?" if meant in self._option_string_actions
                else "-h alone prints help; a long flag takes two dashes")
        return f"-h{typed[1]} is read as -h followed by {typed[1]!r}; {hint}"

    def _of_siblings(self, extras: list[str]) -> str:
        """"; --block-size is a flag of train lm, not of train reverse" for a flag of this
        parser's sibling commands (``_siblings``, set by ``build_parser``): a flag copied from
        another task's command line is told so, not matched to a flag it is not (--batch-size)."""
        said = []
        for word in extras:
            typed = word.split("=", 1)[0]
            owners = [p.prog.removeprefix("attnlab ") for p in getattr(self, "_siblings", ())
                      if typed in p._option_string_actions]
            if typed.startswith("--") and owners:
                said.append(f"{typed} is a flag of {', '.join(owners)}")
        where = self.prog.removeprefix("attnlab ")
        return f"; {'; '.join(said)}, not of {where}" if said else ""

    def _closest(self, extras: list[str]) -> str:
        """"; did you mean --max-steps?" for a misspelt flag of this parser: ``--max-step``,
        ``--max_steps``, or ``-max-steps`` with one dash."""
        flags = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        typed = [word.split("=", 1)[0] for word in extras
                 if word.startswith("-") and not _NEGATIVE_NUMBER.match(word)]
        meant = [m for word in typed for m in _near("--" + word.lstrip("-"), flags, typed=word)]
        return f"; did you mean {', '.join(meant)}?" if meant else ""


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, minding a flag given twice: argparse keeps the last value, unsaid,
    so ``train reverse --lr 1e-3 --lr 3e-4`` trained at 3e-4 as if 1e-3 had never been typed.
    A flag naming an input, file or column (``_ONCE_FLAGS``) is refused: ``predict --input a
    --input b`` answered b alone. Another flag given again with another value keeps the last,
    as a script that appends a flag to override its own expects, and a note says so."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            _given_again(parser, self, option_string, values)
        super().__call__(parser, namespace, values, option_string)


class _SwitchOnce(argparse.BooleanOptionalAction):
    """A ``--x/--no-x`` switch: both spellings in one command keep the last, and a note says so."""

    def __call__(self, parser, namespace, values, option_string=None):
        _given_again(parser, self, option_string, not option_string.startswith("--no-"))
        super().__call__(parser, namespace, values, option_string)


def _given_again(parser, action, option_string: str, value) -> None:
    """Record ``action``'s flag (``option_string``) and ``value`` on ``parser``; given before,
    refuse it or note it (``_StoreOnce``)."""
    given = getattr(parser, "_given", {}).setdefault(action.dest, [])
    given.append((option_string, value))
    if len(given) < 2:
        return
    times = len(given)
    what = _ONCE_FLAGS.get(option_string)
    if what is not None:
        # the commands that read many inputs from a file (plot and view draw one)
        reads_many = (what == "text" and option_string != "--system"
                      and parser.prog in ("attnlab predict", "attnlab generate"))
        many = " (many inputs, one per line: --input-file FILE)" if reads_many else ""
        parser.error(f"{option_string} is given {times} times; it takes one {what}{many}")
    if len({repr(v) for _, v in given}) == 1:  # the same value again: nothing to choose
        return
    if isinstance(value, bool):  # a switch: --norm-first and --no-norm-first
        said = " and ".join(dict.fromkeys(o for o, _ in given))
        parser._notes[action.dest] = f"note: {said} are both given; the last, {option_string}, is used"
    else:
        said = ", ".join(str(v) for _, v in given)
        parser._notes[action.dest] = (f"note: {option_string} is given {times} times ({said}); "
                                      f"the last, {value}, is used")


def _dash_value(message: str, args: list[str], flags) -> str:
    """"; a value that starts with '-' is written --out=-r1" where ``message`` is argparse's
    "argument --out: expected one argument" and the word after --out in ``args`` starts with a
    dash but is none of the parser's ``flags``: argparse took it for a flag (``train reverse
    --out -r1``). "" otherwise."""
    flag = re.search(r"argument (--[\w-]+): expected one argument", message)
    if flag is None or flag[1] not in args:
        return ""
    after = args[args.index(flag[1]) + 1:][:1]
    if (not after or not after[0].startswith("-") or after[0].startswith("--")
            or after[0] == "-" or after[0].split("=", 1)[0] in flags):
        return ""
    return f"; a value that starts with '-' is written {flag[1]}={after[0]}"


def _as_path(extras: list[str]) -> str:
    """"; -r1 is read as a flag: write ./-r1 for the path" for a word that starts with a dash
    and names a file or directory here (``attnlab predict -r1``), as ``rm ./-f`` is written."""
    paths = [w for w in extras if w.startswith("-") and len(w) > 1 and os.path.lexists(w)]
    if not paths:
        return ""
    return f"; {paths[0]} is read as a flag: write {os.path.join('.', paths[0])} for the path"


def _near(word: str, names: list[str], cutoff: float = 0.75, typed: str = "") -> list[str]:
    """The one name of ``names`` closest to ``word`` (as ``typed``, when that differs), as a
    list (empty when none is close). A longer name that adds words (``--input`` ->
    ``--input-file``) is another flag, not a correction: translate's ``--input TEXT`` is not
    its ``--input-file``."""
    if typed and typed != word and word in names:
        return [word]
    names = [n for n in names if n != word and not n.startswith(f"{word}-")]
    return difflib.get_close_matches(word, names, n=1, cutoff=cutoff)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="attnlab",
        description="The Transformer from first principles: train, evaluate, predict, plot.",
        epilog=PATHS_HELP,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"attnlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    sub.required = True
    for name in COMMANDS:
        try:
            module = import_module(f"attnlab.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"attnlab.commands.{name}":
                raise
            continue
        module.register(sub)
    _know_siblings(parser)
    return parser


def _know_siblings(parser: argparse.ArgumentParser) -> None:
    """Give each sub-command's parser, at every depth, its siblings (``train lm``'s are the
    other tasks' parsers), for ``ArgumentParser._of_siblings``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            children = list(dict.fromkeys(action.choices.values()))
            for child in children:
                child._siblings = [other for other in children if other is not child]
                _know_siblings(child)


# argparse reads a value that starts with "-" as a flag unless it is a plain number, so
# `--input -0.4,1;0.2,3` (a set of feature rows) would fail; such values are glued to their flag.
_TEXT_FLAGS = ("--input", "--prompt", "--chat", "--system")
# what a flag given twice (``_StoreOnce``) takes one of, where that is more than "one value"
_ONCE_FLAGS = {**dict.fromkeys(_TEXT_FLAGS, "text"), "--input-file": "file", "--config": "file",
               "--text-column": "column", "--src-column": "column",
               **dict.fromkeys(("--q", "--k", "--v", "--mask"), "list")}  # explain's inputs
_NEGATIVE_NUMBER = re.compile(r"-\.?\d")


def _glue_negative_values(argv: list[str]) -> list[str]:
    """``[..., "--input", "-0.4,1"]`` -> ``[..., "--input=-0.4,1"]`` (only for values that start
    like a negative number, so a forgotten value is still reported as missing)."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in _TEXT_FLAGS and _NEGATIVE_NUMBER.match(arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


# A write that failed for lack of space or a failing device, not because of a bug: reported
# in one line, without a traceback.
_WRITE_FAULTS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF, errno.EFBIG)
# the packages of the optional `hf` extra (pyproject.toml): a command that needs one that is not
# installed says which to install, in one line (a BERT checkpoint reads without them, a GPT-2,
# Llama-family, Marian or GGUF one does not)
_HF_EXTRA = ("transformers", "sentencepiece", "gguf")


def main(argv: list[str] | None = None) -> int:
    stderr = closed = sys.stderr
    if stderr is None:  # started with `2>&-`: print(file=None) wrote the notes into stdout,
        # and the progress line failed, ending the run. The null device takes descriptor 2,
        # so that no file the command opens gets it, to be written into by C libraries.
        closed = open(os.devnull, "w")
    sys.stderr = _Diagnostics(closed)
    stdout = sys.stdout
    sys.stdout = _whole_writes(stdout)
    try:
        return _main(argv)
    finally:
        if sys.stdout is not stdout:
            with contextlib.suppress(OSError, ValueError):  # (said already, by _main)
                sys.stdout.flush()
        sys.stdout = stdout
        sys.stderr = stderr
        if stderr is None:
            closed.close()


def _whole_writes(stream):
    """Standard output that writes each text whole or fails. Under ``PYTHONUNBUFFERED=1`` (or
    ``python -u``: set in many Docker images and batch scripts) Python's standard output writes
    straight to the file with one ``write`` call and drops what it did not take: on a disk that
    filled, ``predict --input-file FILE --json > out.jsonl`` ended with exit status 0 and the
    file cut short. A buffered writer over the same descriptor, flushed at each line as
    unbuffered output is seen, writes the rest or raises. Any other stream is left as it is:
    a Windows console's (``_WindowsConsoleIO``, a RawIOBase too) writes text through the
    console's own writer, which a FileIO over its descriptor would bypass."""
    import io

    raw = getattr(stream, "buffer", None)
    if type(raw) is not io.FileIO:
        return stream
    # a FileIO of its own (closefd=False): closing this wrapper closes neither descriptor 1 nor
    # the FileIO of the interpreter's sys.stdout, which is put back afterwards
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(raw.fileno(), "w", closefd=False)),
                            encoding=stream.encoding, errors=stream.errors,
                            line_buffering=True, write_through=True)


def _main(argv: list[str] | None) -> int:
    try:
        if sys.stdout is None:  # started with `>&-`: print() would drop every result silently
            raise UsageError("standard output is closed; attnlab writes its results there "
                             "(send them to /dev/null to discard them)")
        argv = _glue_negative_values(sys.argv[1:] if argv is None else list(argv))
        args = build_parser().parse_args(argv)
        with _sigterm_interrupts():
            code = int(args.func(args) or 0)
        # a flag given twice, said once the command is done: a refusal stays the one line of
        # its error (train says its notes itself, before it trains, and leaves none here)
        for note in getattr(args, "flag_notes", []):
            print(note, file=sys.stderr)
        sys.stdout.flush()  # here, so a full disk is reported below, not at interpreter exit
        return code
    except UsageError as e:
        print(f"attnlab: error: {e}", file=sys.stderr)
        return 2
    except (Interrupted, RankFailed) as e:  # RankFailed: another process's fault, said once
        if not e.quiet:
            print(f"attnlab: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("attnlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `attnlab generate ... | head`: the reader has what it wanted
        # Python's convention (the signal module's "Note on SIGPIPE"): nothing more is written
        # to the closed pipe, not even by the interpreter's exit, and the status is 1
        _discard(sys.stdout)
        return 1
    except ModuleNotFoundError as e:
        name = e.name or ""
        package = name.split(".")[0]
        if package not in _HF_EXTRA:
            raise
        # a module the installed package lacks (transformers 4.40, which the extra allows,
        # has no modeling_gguf_pytorch_utils) is not a package that is not installed
        what = (f"the {package} package, which is not installed: pip install" if name == package
                else f"{name}, which the installed {package} lacks: pip install --upgrade")
        print(f"attnlab: error: this needs {what} 'attnlab[hf]'", file=sys.stderr)
        return 2
    except OSError as e:
        if e.errno not in _WRITE_FAULTS:
            raise
        where = e.filename or "standard output"
        if not e.filename:  # else the interpreter's exit fails on it again, with a traceback
            _discard(sys.stdout)
        print(f"attnlab: cannot write to {where}: {e.strerror}", file=sys.stderr)
        return 1
    except (MemoryError, RuntimeError) as e:
        # torch's out-of-memory is a RuntimeError (torch.OutOfMemoryError on GPUs): a resource
        # fault, not a bug, so it is reported in one line; anything else keeps its traceback
        text = " ".join(str(e).split())
        if not isinstance(e, MemoryError) and "allocate" not in text and "out of memory" not in text:
            raise
        print(f"attnlab: out of memory: {text[:300]}", file=sys.stderr)
        return 1


class _Diagnostics:
    """Standard error while a command runs: a write that fails (``2>/dev/full``, a pipe whose
    reader is gone, the terminal of a dropped ssh session) is dropped with the rest of what
    would follow, instead of ending the command. A training run went down with its first
    note, losing the run; after a SIGHUP its checkpoint could not be written, as the progress
    line failed first. Results go to standard output and the run directory, whose failures
    are still said."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._drop()

    def _drop(self) -> None:
        _discard(self._stream)
        self._stream = open(os.devnull, "w")

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _discard(stream) -> None:
    """Point ``stream``'s file descriptor at the null device: what it still holds, flushed at
    the interpreter's exit, goes nowhere, instead of failing once more (exit status 120 and
    an "Exception ignored" traceback). A stream without a descriptor is left as it is."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (``kill PID``, a batch scheduler's stop, ``timeout``) and SIGHUP (the terminal
    closed, an ssh session dropped) raise ``Interrupted`` in the command, as Ctrl-C raises
    KeyboardInterrupt: what a command undoes when it is stopped (prepare's half-written token
    files, export's partial directory, a run stopped before its first checkpoint) it undoes on
    a kill too, and it exits 128 + the signal's number with one line. Killed at once, prepare
    left token files that its next run took for a prepared corpus. (``train``'s loop and
    ``view --serve`` set their own handlers inside.) A process forked from this one inherits
    the handler, which there puts the default back and ends the process by the same signal;
    but only once its main thread runs Python: one waiting in C (a pool's worker waiting for
    its next task) would never end, so a pool that forks sets its workers' signals back to
    the default itself (``attnlab.tasks.jets.generate._init_worker``). A signal not at its
    default (ignored, as ``nohup`` leaves SIGHUP, or a program's own handler) is left as it
    is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = os.getpid()

    def interrupt(signum, frame):
        if os.getpid() != ours:  # a forked child: the default, which ends it
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Interrupted(f"terminated ({signal.Signals(signum).name})", signum)

    taken = [s for s in TERMINATING if signal.getsignal(s) is signal.SIG_DFL]
    for s in taken:
        signal.signal(s, interrupt)
    try:
        yield
    finally:
        for s in taken:
            signal.signal(s, signal.SIG_DFL)


def console() -> int:
    """The ``attnlab`` process (the console script and ``python -m attnlab``): ``main()``, then
    the objects the process holds frozen out of the garbage collector's reach.

    When the interpreter exits it searches every object for reference cycles once more. With
    torch (and Lightning, transformers) imported, that search is a noticeable wait after the
    last line of output (benchmarks/RESULTS.md, "finetune after the fixed costs"), spent
    freeing memory that the operating system takes back at once anyway. ``gc.freeze()`` moves
    the objects out of the collector's reach, so the exit skips them; atexit handlers still
    run, and every file attnlab writes is closed where it is written. This is done only for
    the process's own command line: a program that calls ``main`` keeps its collector.
    """
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(console())
