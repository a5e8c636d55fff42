"""What a file's header lacks or holds twice, said once for every reader
(``attnlab.data.tables``' CSV, TSV and JSON Lines, ``attnlab.data.columnar``'s Parquet files
and datasets directories): the columns asked for that it does not have, the ones it has, and,
where the header shows it, why; a column read whose name the header holds twice.
"""
from __future__ import annotations

from ..errors import UsageError

__all__ = ["missing_columns", "check_unique"]


def missing_columns(columns: list[str], have: list[str], where: str, hint: str = "") -> None:
    """``UsageError`` naming the ``columns`` that the file's ``have`` lacks, and the columns it
    has; then why, where the header shows it (``_why``), else ``hint``."""
    missing = [c for c in columns if c not in have]
    if missing:
        s = "s" if len(missing) > 1 else ""
        why = _why(missing, have) or hint
        raise UsageError(f"{where}: no column{s} {', '.join(map(repr, missing))} "
                         f"(columns: {', '.join(have) or 'none'}){why}")


def _why(missing: list[str], have: list[str]) -> str:
    """What a header whose names are not those asked for shows, where it shows something: a
    name that differs only in case (names are matched exactly: "Text" is no "text"), Excel's
    ``sep=`` line above the header, or a header read as one name that holds another
    separator (a .csv separated by semicolons, as a spreadsheet in many locales saves it).

    Examples:
        >>> _why(["text"], ["Text", "label"])
        "; 'Text' differs from 'text' only in case (names must match exactly)"
    """
    folded = {h.casefold(): h for h in have}
    case = next((c for c in missing if c.casefold() in folded), None)
    if case is not None:
        return (f"; {folded[case.casefold()]!r} differs from {case!r} only in case (names "
                f"must match exactly)")
    if have and have[0].startswith("sep="):
        return "; the first line is Excel's 'sep=' line, not the header: delete it"
    named = [h for h in have if h]
    other = next((c for c in ";\t|," if len(named) == 1 and c in named[0]), None)
    if other is not None:
        return (f"; the header is one name holding {other!r}: a .csv is read separated by "
                f"commas, a .tsv by tabs")
    return ""


def check_unique(names, *, what: str, where: str = "", only=None) -> None:
    """``UsageError`` naming the first name that ``names`` holds twice.

    Args:
        names: column names, in order.
        what: what the names are, for the message ("the header", "--feature-columns").
        where: the file (and line) the names come from, to start the message.
        only: check only these names (the columns that will be used; a repeated column that
            nothing reads cannot change a result).
    """
    seen: dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        if only is not None and name not in only:
            continue
        if name in seen:
            start = f"{where}: " if where else ""
            raise UsageError(f"{start}column {name!r} appears twice in {what} (positions "
                             f"{seen[name]} and {i}), so which one to read is not clear")
        seen[name] = i
