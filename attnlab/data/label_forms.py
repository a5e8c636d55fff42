"""One spelling per label: labels that differ only in their Unicode form are refused where
they enter.

"café" can be stored two ways. Composed (NFC: ``é`` is U+00E9), as Windows and most editors
write it; or decomposed (NFD: ``e`` then the combining accent U+0301), as macOS file names and
some Mac tools give it. Both print alike, but they are different strings, so a classifier would
learn two classes that look the same in every table and figure, and a tagger two tags.

Why refuse rather than merge: merging means choosing a spelling that some of the user's rows
do not have, and ``predict`` would then print a label that no longer equals, byte for byte,
the one in the user's file (their own scripts that compare labels would silently disagree).
The fix is one line of the user's (``unicodedata.normalize("NFC", s)``), and the error says
where the two spellings are. What counts is what prints alike: canonical
equivalence (the same text in NFC and NFD), and a space of another kind (a no-break space,
which French typography puts before "!" and word processors paste, where the other has a
plain one). Compatibility forms such as the ligature "ﬁ" or a full-width "Ａ" print
differently, so they are different labels by sight too.

Examples:
    >>> forms = OneSpelling("--data d.csv", "column 'label'")
    >>> forms.see("caf\\u00e9", lambda: "line 2")
    >>> forms.see("cafe\\u0301", lambda: "line 5")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    attnlab.errors.UsageError: --data d.csv: column 'label': 'café' (line 2, NFC) and ...
"""
from __future__ import annotations

import unicodedata
from collections.abc import Callable

from ..errors import UsageError

__all__ = ["OneSpelling", "form_of", "other_form"]

NFC_FIX = 'write one form (Python: unicodedata.normalize("NFC", label))'


def form_of(text: str) -> str:
    """The Unicode form ``text`` is in: "NFC", "NFD" (when not also NFC) or "mixed"."""
    if unicodedata.is_normalized("NFC", text):
        return "NFC"
    return "NFD" if unicodedata.is_normalized("NFD", text) else "mixed"


class OneSpelling:
    """Sees the labels of one file (or one column) and refuses the first one that is an earlier
    label in another Unicode form.

    Args:
        where: the file, as messages start (``"--data reviews.csv"``).
        what: what holds the labels (``"column 'label'"``, ``"the tags"``).
    """

    def __init__(self, where: str, what: str) -> None:
        self.where, self.what = where, what
        self._first: dict[str, tuple[str, str]] = {}  # _looks -> (spelling, its place)
        self._known: set[str] = set()  # spellings seen: a tag file repeats a few of them

    def see(self, label: str, place: Callable[[], str]) -> None:
        """``UsageError`` naming both places if ``label`` was seen before in another form.
        ``place()`` words where it is, called only for a label not seen before (a tag file
        repeats a few labels over many lines)."""
        if label in self._known:
            return
        self._known.add(label)
        place = place()
        spelling, first = self._first.setdefault(_looks(label), (label, place))
        if spelling != label:
            (a, b), fix = _difference(spelling, label)
            raise UsageError(f"{self.where}: {self.what}: {spelling!r} ({first}, {a}) and "
                             f"{label!r} ({place}, {b}) print alike but would be two labels; "
                             f"{fix}")


def other_form(label: str, known) -> str:
    """The end of a "never seen in training" message: how ``label`` differs from the one of
    ``known`` that prints alike; "" when none does."""
    twin = next((k for k in known if _looks(k) == _looks(label)), None)
    if twin is None:
        return ""
    (a, b), fix = _difference(twin, label)
    return f"; training has {twin!r} ({a}), which prints alike (this one: {b}); {fix}"


def _looks(label: str) -> str:
    """What ``label`` looks like: its NFC form, every kind of space a plain one."""
    return "".join(" " if c.isspace() else c for c in unicodedata.normalize("NFC", label))


def _difference(first: str, second: str) -> tuple[tuple[str, str], str]:
    """How two labels that print alike differ (a word for each) and how to make them one."""
    one, two = unicodedata.normalize("NFC", first), unicodedata.normalize("NFC", second)
    if one == two:
        return (form_of(first), form_of(second)), NFC_FIX
    a, b = next((x, y) for x, y in zip(one, two) if x != y)
    return (f"with a {_name(a)}", f"with a {_name(b)}"), "write one kind of space"


def _name(c: str) -> str:
    name = unicodedata.name(c, "")  # a control character (a tab) has none
    return name.lower() if name else f"U+{ord(c):04X}"
