"""The ``attnlab`` command.

Each sub-command lives in ``attnlab/commands/NAME.py`` with ``register(subparsers)`` (adds its
parser and sets ``func``) and is imported here to build ``--help``; command modules import only
what parsing needs, so commands that do not train never import Lightning.

Exit status: 0 on success; 2 on a usage or input error, with one line on stderr naming the
offending flag, file, column or value and no traceback; 1 only for an internal fault.
"""
from __future__ import annotations

import argparse
import sys
from importlib import import_module

from .errors import UsageError

COMMANDS = ("train", "evaluate", "predict", "translate", "generate", "prepare", "plot", "explain")


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is a ``UsageError`` (one line, exit 2) instead of usage text."""

    def error(self, message: str):
        raise UsageError(f"{self.prog.removeprefix('attnlab ')}: {message}")


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="attnlab",
        description="The Transformer from first principles: train, evaluate, predict, plot.",
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
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"attnlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `attnlab generate ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
