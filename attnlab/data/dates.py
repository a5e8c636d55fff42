"""Dates written out by babel in two locales: a second built-in translation task.

    "Friday, March 5, 2021"  →  "Freitag, 5. März 2021"

The model must reorder day and month, translate weekday and month names and copy the numbers.
Dates run from 1900-01-01 to 2099-12-31; the held-out test and validation dates are drawn once
from a fixed stream (``held_out_numbers`` over the day indices) and never reach training.
"""
from __future__ import annotations

import datetime
import random

from .numbers import PairStream, held_out_numbers

__all__ = ["FIRST_DAY", "DAYS", "check_locale", "write_date", "held_out_days", "DatePairs"]

FIRST_DAY = datetime.date(1900, 1, 1)
DAYS = (datetime.date(2099, 12, 31) - FIRST_DAY).days + 1  # 73,049 dates


def check_locale(locale: str) -> str:
    """Return ``locale`` if babel knows it ("en", "de", "fr_CA", ...).

    Raises:
        ValueError: naming the locale and listing a few valid ones.
    """
    from babel import Locale, UnknownLocaleError

    try:
        Locale.parse(locale)
    except (UnknownLocaleError, ValueError, TypeError):
        raise ValueError(f"unknown locale {locale!r}; babel writes dates in locales such as "
                         f"en, de, fr, es, it, nl, pt, ru, ja, en_GB, fr_CA") from None
    return locale


def write_date(day: int, locale: str) -> str:
    """Day ``day`` after 1900-01-01 in the locale's full format ("Freitag, 5. März 2021")."""
    from babel.dates import format_date

    return format_date(FIRST_DAY + datetime.timedelta(days=day), format="full", locale=locale)


def held_out_days(test_size: int, val_size: int) -> tuple[list[int], list[int]]:
    """Test and validation day indices: fixed, distinct, the same for every run."""
    return held_out_numbers(DAYS, test_size, val_size)


class DatePairs(PairStream):
    """An endless stream of training pairs of dates, held-out days excluded.

    Examples:
        >>> day, (en, de) = next(iter(DatePairs("en", "de")))
    """

    def __init__(self, src: str, tgt: str, *, exclude: set[int] | frozenset = frozenset(),
                 seed: int = 0) -> None:
        self.src, self.tgt = check_locale(src), check_locale(tgt)
        self.exclude, self.seed = frozenset(exclude), seed

    def draw(self, rng: random.Random) -> int:
        while True:
            day = rng.randrange(DAYS)
            if day not in self.exclude:
                return day

    def pair(self, day: int) -> tuple[str, str]:
        return write_date(day, self.src), write_date(day, self.tgt)
