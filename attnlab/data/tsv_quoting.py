'''What a double quote means in a TSV file: a quote that encloses a value, or a character of it.

A TSV has two traditions, and a file does not say which one it follows:

- Written by a program that quotes (pandas ``to_csv(sep="\\t")``, Python's csv module, Excel's
  "Text (Tab delimited)", R's ``write.table``): a value holding a tab, a line break or a quote
  is enclosed in quotes, each quote inside it doubled; ``She said "hi"`` is written
  ``"She said ""hi"""``. Other values are written as they are (R and ``QUOTE_ALL`` also
  enclose values that need nothing, the header's names included).
- Written by hand, by ``cut``/``paste`` or by any program that just joins values with tabs
  (the IANA text/tab-separated-values type: a value holds no tab and no line break): a quote
  is text, wherever it stands. ``"Hi" she said`` and ``"Hi"`` are values that start with a
  quote.

Reading every TSV as the first kind (as Python's csv module does) silently drops the quotes of
``"Hi"``, a value of the second kind; reading every one as the second keeps pandas' doubled
quotes as text. So the file is read one way or the other, decided once for the whole file from
what only one kind of writer produces (``quoting``):

- no value starts with a quote: both readings agree (a quote inside a value is text);
- a quoted value that needed its quotes (it holds a tab, a line break or a doubled quote), or
  a header whose every name is quoted: a program wrote it; values are read unquoted;
- a quote that no quoting program leaves (inside a value that is not quoted, after a closing
  quote, never closed) or a quoted value that needs no quoting and holds no comma: a person
  wrote it; quotes are text;
- evidence of both, or only quoted values that hold a comma (Excel may quote those; a person
  may mean the quotes): ``UsageError`` naming the file and the line, never a guess.

Examples:
    >>> import csv
    >>> quoting('text\\tlabel\\n"Hi" she said\\tpos\\n', "--data d.tsv") == csv.QUOTE_NONE
    True
    >>> quoting('text\\tlabel\\n"""Hi"" she said"\\tpos\\n', "--data d.tsv") == csv.QUOTE_MINIMAL
    True
'''
from __future__ import annotations

import csv
import re

from ..errors import UsageError

__all__ = ["quoting"]

# A value enclosed in quotes, matched where a field starts (``_enclosed``): no lone quote inside
# (a quote inside is doubled; written "unrolled", as runs of non-quotes between doubled quotes),
# and it ends at a tab, a line end or the text's end.
_ENCLOSED = re.compile(r'"([^"]*(?:""[^"]*)*)"(?=[\t\r\n]|$)')
_STARTS_QUOTED = re.compile(r'(?:^|[\t\n])"')
_NEEDED = re.compile(r'[\t\r\n]|""')  # what makes a quoting program enclose a value


def quoting(text: str, where: str) -> int:
    """``csv.QUOTE_MINIMAL`` (quotes enclose values) or ``csv.QUOTE_NONE`` (quotes are text)
    for the TSV ``text``, as the module doc decides it.

    Raises:
        UsageError: naming the file and line where the file shows both kinds of quote, or only
            quoted values whose quotes may be either.
    """
    if not _STARTS_QUOTED.search(text):
        return csv.QUOTE_NONE  # a quote inside a value is text either way
    enclosed = _enclosed(text)
    # a doubled quote or a quoted header: a program wrote the file, and may have quoted a
    # value holding both a tab and a line break
    if not (_header_quoted(text) or any('""' in m.group(1) for m in enclosed)):
        _no_rows_inside(text, enclosed, where)
    needed = next((m for m in enclosed if _NEEDED.search(m.group(1))), None)
    program = needed or _header_quoted(text)
    person = _text_quote(text, enclosed)
    if program and person is not None:
        line = _line(text, needed.start()) if needed else 1
        raise UsageError(f"{where} line {_line(text, person)}: a quote that is text, but line "
                         f"{line} encloses a value in quotes as pandas or Excel do; in such a "
                         f"file a value with a quote must be quoted and the quote doubled "
                         f"(\"5\"\" screen\")")
    if program:
        return csv.QUOTE_MINIMAL
    # no program encloses a value that needs nothing and holds no comma
    if person is not None or any("," not in m.group(1) for m in enclosed):
        return csv.QUOTE_NONE
    first = enclosed[0]
    raise UsageError(f"{where} line {_line(text, first.start())}: value {first.group(0)!r} is "
                     f"enclosed in quotes, and nothing in the file says whether they only enclose "
                     f"it (Excel) or are text (a TSV written by hand); remove them, or save the "
                     f"file as CSV")


def _enclosed(text: str) -> list[re.Match]:
    """The enclosed values of ``text``, in order: from each quote that starts a field (the
    text's start, or after a tab or a line end) that ``_ENCLOSED`` matches there. Found by
    jumping from quote to quote: a regular expression tried at every character took longer
    than reading the file."""
    found, at = [], text.find('"')
    while at >= 0:
        m = _ENCLOSED.match(text, at) if at == 0 or text[at - 1] in "\t\n" else None
        if m:
            found.append(m)
        at = text.find('"', m.end() if m else at + 1)
    return found


def _no_rows_inside(text: str, enclosed: list[re.Match], where: str) -> None:
    """``UsageError`` for a quoted value that runs over lines holding tabs: what a quote that
    is text at a value's start, closed by one lines later, makes of the rows between (they
    would be one value). A program writes such a value only for text with both a tab and a
    line break in it; unless the file shows a program wrote it (``quoting``), it is refused
    rather than lose its rows."""
    for m in enclosed:
        if "\n" in m.group(1) and "\t" in m.group(1):
            end = _line(text, m.end())
            raise UsageError(f"{where} line {_line(text, m.start())}: a quote opens a value that "
                             f"runs to line {end} across tabs, so those lines would be one value; "
                             f"if the quotes are text, keep each row's quotes on its own line's "
                             f"value, and double a quote inside a quoted value")


def _header_quoted(text: str) -> bool:
    """Whether every name of the header (the first line with text) is enclosed in quotes, as
    R's write.table and csv.QUOTE_ALL write it."""
    start, header = 0, ""
    while start < len(text) and not header.strip():  # not text.split: a copy of the file
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        header, start = text[start:end], end + 1
    names = header.rstrip("\r").split("\t")
    return all(len(n) >= 2 and n[0] == n[-1] == '"' for n in names)


def _text_quote(text: str, enclosed: list[re.Match]) -> int | None:
    """Where the first quote stands that is not part of an enclosed value (inside a value that
    is not quoted, after a closing quote, or one never closed), which no quoting program
    writes. None if there is none."""
    start = 0
    for m in enclosed:
        at = text.find('"', start, m.start())
        if at >= 0:
            return at
        start = m.end()
    at = text.find('"', start)
    return None if at < 0 else at


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1
