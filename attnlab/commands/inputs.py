"""Many inputs in one process: ``--input-file FILE`` (``-``: standard input) and ``--json`` for
``predict``, ``translate`` and ``generate``.

A file holds one input per line (UTF-8; a final newline, ``\\r\\n`` endings and a byte-order
mark are fine). Every line is read and checked before the model is loaded: an empty line, a
file that is missing, a directory or not UTF-8 is one error naming the file and the line. The
command then writes one line per input, in the order read: the prediction, or with ``--json``
one JSON object (the input, the output and, where the model gives them, its probabilities).

A table (.csv, .tsv, .jsonl, .parquet, or a Hugging Face datasets directory) is read by its
column with ``--text-column NAME`` (translate: ``--src-column NAME``, as ``train translate``
names its source column): one input per row, in the file's order, read by ``read_table`` with
its rules and messages (a missing column named with those the file has; an empty cell or a
null named by its line, or row). Without the flag a table is read as lines, whole, and a note
says so.
"""
from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from signal import SIGINT

from ..data.tables import CHUNK_ROWS, FORMATS, file_format, places, read_table
from ..errors import UsageError
from ..notes import progress
from ..runs import strict_json
from ..tasks.base import check_each, each_read, line_of, refuse_blank
from ..tasks.input_lines import InputLines, LineLabels, open_inputs


def add_input_file_flags(parser, what: str = "input", column: str = "--text-column") -> None:
    """--input-file, ``column`` (the table's column of the inputs: ``args.input_column``) and
    --json."""
    parser.add_argument("--input-file", metavar="FILE",
                        help=f"many inputs, one {what} per line ('-' reads standard input); "
                             "one output line per input, in order")
    parser.add_argument(column, metavar="NAME", dest="input_column",
                        help=f"--input-file is a table ({', '.join(FORMATS)} or a Hugging "
                             f"Face datasets directory): one {what} per row, from column NAME")
    parser.add_argument("--json", action="store_true",
                        help="write each output line as a JSON object (the input, the output "
                             "and, where the model gives them, its probabilities)")


def read_inputs(path: str, column: str | None = None, flag: str = "--text-column", *,
                command: str = "predict") -> tuple[Sequence[str], Sequence[str]]:
    """(the lines of ``path``: ``InputLines``, each line's label ``--input-file PATH line N``:
    ``LineLabels``, both made when asked for); UsageError naming the file, or the first empty
    line. With ``column`` (given as ``flag``), the cells of that column of a table instead
    (``read_column``). ``command`` names what reads the lines again, in the message of a file
    changed in between."""
    if column is not None:
        return read_column(path, column, flag)
    where = "--input-file -" if path == "-" else f"--input-file {path}"
    if path == "-":
        if sys.stdin is None:  # started with standard input closed (`<&-`)
            raise UsageError(f"{where}: standard input is closed; no inputs")
        lines = InputLines(sys.stdin.buffer, where, path, command=command, flag=flag)
    else:
        lines = InputLines(open_inputs(path, where), where, path, command=command, flag=flag)
    if path != "-" and file_format(path) in ("csv", "tsv", "jsonl"):  # a table, as lines
        print(f"note: {where} is read as one input per line, whole: a table's header and "
              f"every column too ({len(lines)} inputs); for the texts of one column, give "
              f"{flag} NAME", file=sys.stderr)
    return lines, LineLabels(where, len(lines))


def read_column(path: str, column: str, flag: str = "--text-column"
                ) -> tuple[list[str], list[str]]:
    """(the cells of ``column`` of the table ``path``, one per row in the file's order, each
    row's label ``--input-file PATH line N``, or ``row N`` of a Parquet file); UsageError
    naming the flag, the file, and the column or the row at fault.

    Examples:
        >>> _ = Path("films.csv").write_text("id,review\\n1,loved it\\n2,dull\\n")
        >>> texts, labels = read_column("films.csv", "review")
        >>> texts, labels[-1]
        (['loved it', 'dull'], '--input-file films.csv line 3')
    """
    if not column.strip():
        raise UsageError(f"{flag} is empty; give the name of the table's column of inputs")
    if path == "-":
        raise UsageError(f"{flag} {column}: --input-file - (standard input) has no file type to "
                         f"read a table by; give the table's file")
    if file_format(path) is None and Path(path).exists():
        raise UsageError(f"{flag} {column}: --input-file {path} is not a table "
                         f"({', '.join(FORMATS)}); drop {flag} to read its lines, one input each")
    table = read_table(path, [column], what="--input-file", spelled=True)
    return (table.column(column),
            [f"--input-file {path} {p}" for p in places(path, table.lines)])


# the lone surrogates by which Python hands over an argument's bytes that are not UTF-8
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]*")
_SURROGATES = re.compile("[\ud800-\udfff]")


def check_utf8(text: str | None, flag: str) -> None:
    r"""``UsageError`` naming ``flag`` and the byte when ``text``, a command-line argument, is
    not UTF-8. Python hands the bytes of another encoding (a Latin-1 terminal, ``$(cat
    latin1.txt)``) over as lone surrogates, which a byte-level tokenizer refused with a
    traceback and a char or word one read as unk, the continuation printed after a broken
    prompt.

    Examples:
        >>> check_utf8("caf\u00e9", "--prompt")  # UTF-8: nothing to say
        >>> check_utf8("caf\udce9 au lait", "--prompt")
        Traceback (most recent call last):
        attnlab.errors.UsageError: --prompt is not UTF-8 text (invalid continuation byte at byte 3); the shell passed it in another encoding: give UTF-8 text
    """
    if text is None or not _SURROGATES.search(text):
        return
    # the bytes the shell gave (a surrogate made otherwise: as UTF-8 would spell it)
    raw = text.encode("utf-8", "surrogateescape" if _ESCAPED_BYTES.fullmatch(
        "".join(_SURROGATES.findall(text))) else "surrogatepass")
    try:
        raw.decode("utf-8")
        reason = "a lone surrogate"  # escaped bytes that join into UTF-8: not from a shell
        at = len(text[:_SURROGATES.search(text).start()].encode("utf-8"))
    except UnicodeDecodeError as e:
        reason, at = e.reason, e.start
    raise UsageError(f"{flag} is not UTF-8 text ({reason} at byte {at}); the shell passed it "
                     f"in another encoding: give UTF-8 text")


def check_input(value: str | None, flag: str = "--input") -> None:
    """``UsageError`` when ``flag``'s one input is given but blank: ``predict``, ``plot
    attention`` and ``view`` run a model on tokens, words or elements, and blank has none; or
    when it is not UTF-8 (``check_utf8``). (A language model's prompt is not checked for blank
    here: a space is a token of a character model, and ``encode_prompt`` refuses a prompt of
    no tokens.)"""
    if value is not None:
        refuse_blank(value, flag)
    check_utf8(value, flag)


def one_or_file(value: str | None, flag: str, input_file: str | None,
                column: str | None = None, *, command: str = "predict"
                ) -> tuple[Sequence[str], Sequence[str]]:
    """(inputs, their labels) from ``flag``'s one ``value`` or from ``--input-file`` (its
    ``--text-column``'s cells where ``column`` is given: ``read_inputs``, for ``command``); a
    UsageError unless exactly one of the two is given."""
    if (value is None) == (input_file is None):
        raise UsageError(f"give {flag} TEXT or --input-file FILE (one of the two)")
    column_needs_file(column, input_file)
    if value is not None:
        return [value], [flag]
    return read_inputs(input_file, column, command=command)


def checked_ids(texts: Sequence[str], labels: Sequence[str], encode) -> Iterator[list[int]]:
    """The ids of each input, ``encode``'d as it is generated after (``generate``): every
    input is encoded and checked first (``check_each``: a bad line anywhere refused before any
    is generated after), keeping none, so that what is held grows with one input, not the file
    (the ids of 10^5 prompts were held while the first was continued)."""
    check_each(texts, labels, encode)
    return each_read(texts, labels, encode)


def column_needs_file(column: str | None, input_file: str | None,
                      flag: str = "--text-column") -> None:
    """``UsageError`` when ``flag`` (the table's column of inputs) is given without
    --input-file, which would read nothing by it."""
    if column is not None and input_file is None:
        raise UsageError(f"{flag} {column} names a column of the table given as --input-file "
                         f"FILE; give --input-file with it, or drop it")


CHUNK = CHUNK_ROWS  # inputs per call of a command's answering function: its answers are all held


def write_in_chunks(texts: Sequence[str], labels: Sequence[str], answer, *, as_json: bool,
                    output_key: str = "prediction", command: str = "predict",
                    chunk: int = CHUNK) -> None:
    """Answer ``texts`` ``chunk`` at a time (``answer(part, its labels)``: a runtime's results,
    as ``predict_many`` gives them) and write each chunk's lines (``write_results``), flushed,
    before the next is answered: the answers held grow with the chunk, not the file, ``|
    head`` stops the command after the first chunk, and a file of more than one chunk says on
    stderr how far ``command`` is (``progress``). A stop or a bad input of a later chunk says
    what the output holds (``stop_said``)."""
    started = time.perf_counter()  # the rate from the first chunk: not of reading the file
    for start in range(0, len(texts), chunk):
        with stop_said(start, len(texts)):  # a chunk of a file changed since it was checked too
            part, named = texts[start:start + chunk], labels[start:start + chunk]
            results = answer(part, named)
        with stop_said(start, len(texts), writing=len(part)):
            write_results(results, part, as_json=as_json, output_key=output_key)
            sys.stdout.flush()  # this chunk's answers out before the next is answered
        progress(command, start, start + len(part), len(texts), started, chunk)


@contextmanager
def stop_said(done: int, total: int, writing: int = 0) -> Iterator[None]:
    """A stop (Ctrl-C, SIGTERM, SIGHUP) or a bad input of a later chunk, its message saying
    what the output holds after ``done`` of ``total`` answers were written whole, and while
    ``writing`` more were being written."""
    from ..errors import Interrupted

    try:
        yield
    except UsageError as e:  # a bad input no first pass read: the answers above stand
        raise UsageError(f"{e}{_written(done, total)}") from None
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted{_written(done, total, writing)}", SIGINT) from None
    except Interrupted as e:
        raise Interrupted(f"{e}{_written(done, total, writing)}", e.signum) from None


def _written(done: int, total: int, writing: int = 0) -> str:
    """What the output holds when the command stops after ``done`` of ``total`` answers, and
    while the next ``writing`` were being written (a pipe that was full: some of them got
    out, the last maybe in part)."""
    if writing:
        return (f"; the output holds the answers to the first {done + writing:,} of {total:,} "
                f"inputs at most, its last line maybe cut short: the answers to inputs "
                f"{done + 1:,} to {done + writing:,} were being written")
    if done == 0:
        return ""
    return (f"; the output holds the answers to the first {done:,} of {total:,} inputs, each "
            f"line whole, and none of the {total - done:,} after them")


def write_results(results: list[dict], inputs: list[str], *, as_json: bool,
                  input_key: str = "input", output_key: str = "prediction") -> None:
    """One line per result (``result_lines``), all written to standard output at once."""
    sys.stdout.write("".join(f"{line}\n" for line in result_lines(
        results, inputs, as_json=as_json, input_key=input_key, output_key=output_key)))


def result_lines(results: list[dict], inputs: list[str], *, as_json: bool,
                 input_key: str = "input", output_key: str = "prediction") -> Iterator[str]:
    """Each result's line: its line (a runtime's ``predict_many``), or a JSON object with the
    input, the prediction and the other keys but ``"line"`` (``json_line``)."""
    for text, result in zip(inputs, results, strict=True):
        if as_json:
            yield json_line({input_key: text, output_key: result["prediction"],
                             **{k: v for k, v in result.items() if k not in ("prediction", "line")}})
        else:
            yield line_of(result)


# line ends of str.splitlines that JSON leaves unescaped in a string written with
# ensure_ascii=False (the others are control characters, which it escapes)
_UNESCAPED_LINE_ENDS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028",
                                      "\u2029": "\\u2029"})


def json_line(record: dict) -> str:
    r"""``record`` as one line of standard JSON, text as written (not ``\u00e9``): a number
    that is not finite (a model whose outputs are NaN) is null, not the ``NaN`` that ``jq``
    and ``JSON.parse`` refuse; NEL, U+2028 and U+2029 are escaped, since ``str.splitlines``
    ends a line at each.

    Examples:
        >>> print(json_line({"input": "caf\u00e9\u2028au lait", "p": float("nan")}))
        {"input": "café\u2028au lait", "p": null}
    """
    text = json.dumps(strict_json(record), ensure_ascii=False, allow_nan=False)
    return text.translate(_UNESCAPED_LINE_ENDS)
