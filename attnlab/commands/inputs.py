"""Many inputs in one process: ``--input-file FILE`` (``-``: standard input) and ``--json`` for
``predict``, ``translate`` and ``generate``.

A file holds one input per line (UTF-8; a final newline, ``\\r\\n`` endings and a byte-order
mark are fine). Every line is read and checked before the model is loaded: an empty line, a
file that is missing, a directory or not UTF-8 is one error naming the file and the line. The
command then writes one line per input, in the order read: the prediction, or with ``--json``
one JSON object (the input, the output and, where the model gives them, its probabilities).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..data.tables import file_format
from ..errors import UsageError
from ..tasks.base import line_of


def add_input_file_flags(parser, what: str = "input") -> None:
    parser.add_argument("--input-file", metavar="FILE",
                        help=f"many inputs, one {what} per line ('-' reads standard input); "
                             "one output line per input, in order")
    parser.add_argument("--json", action="store_true",
                        help="write each output line as a JSON object (the input, the output "
                             "and, where the model gives them, its probabilities)")


def read_inputs(path: str) -> tuple[list[str], list[str]]:
    """(the lines of ``path``, each line's label ``--input-file PATH line N``); UsageError
    naming the file, or the first empty line."""
    where = "--input-file -" if path == "-" else f"--input-file {path}"
    if path == "-":
        if sys.stdin is None:  # started with standard input closed (`<&-`)
            raise UsageError(f"{where}: standard input is closed; no inputs")
        data = sys.stdin.buffer.read()
    else:
        p = Path(path)
        if p.is_dir():
            raise UsageError(f"{where}: is a directory, not a file of inputs")
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise UsageError(f"{where}: not found") from None
        except OSError as e:
            raise UsageError(f"{where}: cannot read it ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if data[:4] == b"PAR1":  # Parquet's magic bytes
            raise UsageError(f"{where}: is a Parquet file; give a text file of inputs, one "
                             f"per line") from None
        line = data[:e.start].count(b"\n") + 1
        raise UsageError(f"{where} line {line}: not UTF-8 text") from None
    # lines end at "\n" (and "\r\n") only: str.splitlines would also cut at a form feed,
    # U+0085, U+2028 and others inside a line, and the outputs would no longer match the lines
    lines = text.split("\n")
    if lines[-1] == "":  # the last line's newline ends it; it does not start another
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    if not lines:
        raise UsageError(f"{where}: no inputs (the file is empty)")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            raise UsageError(f"{where} line {n} is empty; give one input per line")
    if path != "-" and file_format(path) in ("csv", "tsv", "jsonl"):  # a table, as lines
        print(f"note: {where} is read as one input per line, whole: a table's header and "
              f"every column too ({len(lines)} inputs); for its texts alone, save their "
              f"column as a text file, one per line", file=sys.stderr)
    return lines, [f"{where} line {n}" for n in range(1, len(lines) + 1)]


def check_input(value: str | None, flag: str = "--input") -> None:
    """``UsageError`` when ``flag``'s one input is given but blank: ``predict``, ``plot
    attention`` and ``view`` run a model on tokens, words or elements, and blank has none. (A
    language model's prompt is not checked here: a space is a token of a character model, and
    ``encode_prompt`` refuses a prompt of no tokens.)"""
    if value is not None and not value.strip():
        raise UsageError(f"{flag} is empty")


def one_or_file(value: str | None, flag: str, input_file: str | None
                ) -> tuple[list[str], list[str]]:
    """(inputs, their labels) from ``flag``'s one ``value`` or from ``--input-file``; a
    UsageError unless exactly one of the two is given."""
    if (value is None) == (input_file is None):
        raise UsageError(f"give {flag} TEXT or --input-file FILE (one of the two)")
    return ([value], [flag]) if value is not None else read_inputs(input_file)


def write_results(results: list[dict], inputs: list[str], *, as_json: bool,
                  input_key: str = "input", output_key: str = "prediction") -> None:
    """One line per result: its line (a runtime's ``predict_many``), or a JSON object with the
    input, the prediction and the other keys but ``"line"``."""
    for text, result in zip(inputs, results, strict=True):
        if as_json:
            record = {input_key: text, output_key: result["prediction"],
                      **{k: v for k, v in result.items() if k not in ("prediction", "line")}}
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(line_of(result))
