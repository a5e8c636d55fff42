"""Spelled-out numbers in two languages, generated with num2words: a translation task.

    342 → "three hundred and forty-two"  →  "dreihundertzweiundvierzig"

German puts the units before the tens ("zwei-und-vierzig"), so a model must learn an alignment,
not a copy. The held-out numbers (test and validation) are drawn once from a fixed random
stream, the same for every run and seed; training numbers are drawn without end and never
include a held-out one.

Training draws half its numbers uniformly below ``max_number`` and half with a uniformly chosen
number of digits, so that short numbers ("seven", "twelve") are seen as often as the long ones
that dominate a uniform draw. The test set is uniform below ``max_number``, as the task states.
"""
from __future__ import annotations

import random
import re
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["LANGUAGES", "check_language", "spell", "german_cardinal_fix", "held_out_numbers",
           "PairStream", "NumberPairs"]

HELD_OUT_SEED = 20240605  # fixed: every run tests on the same numbers


def _languages() -> tuple[str, ...]:
    from num2words import CONVERTER_CLASSES

    return tuple(sorted(CONVERTER_CLASSES))


LANGUAGES = _languages()


def check_language(lang: str) -> str:
    """Return ``lang`` if num2words can spell numbers in it.

    Raises:
        ValueError: naming the language and listing a few valid ones.

    Examples:
        >>> check_language("de")
        'de'
    """
    if lang not in LANGUAGES:
        common = [c for c in ("en", "de", "fr", "es", "it", "nl", "pt", "ru") if c in LANGUAGES]
        raise ValueError(f"unknown language {lang!r}; num2words spells numbers in "
                         f"{len(LANGUAGES)} languages, e.g. {', '.join(common)} "
                         f"(all: {' '.join(LANGUAGES)})")
    return lang


# num2words costs far more than a cache lookup (benchmarks/RESULTS.md, "Numbers once quoted in
# the code"), and small ranges repeat a lot
@lru_cache(maxsize=1 << 17)
def spell(number: int, lang: str) -> str:
    """The number written out in words: ``spell(342, "de") == "dreihundertzweiundvierzig"``;
    German corrected by ``german_cardinal_fix`` (num2words writes "eins" inside some numbers)."""
    from num2words import num2words

    words = num2words(number, lang=lang)
    return german_cardinal_fix(words) if lang == "de" else words


# "eins" that does not end the number: inside a word ("…hunderteinstausend") or before a noun
# (Million, Milliarde, ...: capitalised, a word of its own)
_EINS_IN_WORD = re.compile(r"eins(?=[a-zäöüß])")
_EINS_BEFORE_NOUN = re.compile(r"eins(?= [A-ZÄÖÜ])")


def german_cardinal_fix(words: str) -> str:
    """num2words' German (0.5.14) with the form of one corrected: "eins" is the counting form
    and stands only at the very end of a number; inside a word it is "ein", before the
    feminine nouns Million, Milliarde, ... it is "eine" (as num2words already writes "eine
    Million"). num2words writes "eins" before "tausend" and the nouns when the group of three
    digits ends in 01 and is not 1: 101,000 "einhunderteinstausend", 101,000,000
    "einhunderteins Millionen". Its other spellings (every number below one million, every
    value of every group of three digits up to 10^12) match the speller written from the
    rules in tests/data/test_german_numbers.py unchanged (docs/translation.md).

    Examples:
        >>> german_cardinal_fix("dreihunderteinstausendeinhundertachtundfünfzig")
        'dreihunderteintausendeinhundertachtundfünfzig'
        >>> german_cardinal_fix("einhunderteins Millionen einhunderteins")
        'einhunderteine Millionen einhunderteins'
    """
    return _EINS_BEFORE_NOUN.sub("eine", _EINS_IN_WORD.sub("ein", words))


def held_out_numbers(max_number: int, test_size: int, val_size: int) -> tuple[list[int], list[int]]:
    """Distinct numbers below ``max_number`` for the test and validation splits.

    Drawn from a fixed seed, so the same arguments always give the same numbers.

    Raises:
        ValueError: if the held-out numbers would take more than half of the range.

    Examples:
        >>> test, val = held_out_numbers(1_000_000, 2000, 200); len(set(test) | set(val))
        2200
    """
    if max_number < 2:
        raise ValueError(f"max_number must be at least 2, got {max_number}")
    if test_size < 1 or val_size < 0:
        raise ValueError(f"test_size ({test_size}) must be >= 1 and val_size ({val_size}) >= 0")
    if 2 * (test_size + val_size) > max_number:
        raise ValueError(f"test_size + val_size ({test_size + val_size}) must be at most half "
                         f"of the numbers below max_number ({max_number}), so that training "
                         f"has numbers left")
    drawn = random.Random(HELD_OUT_SEED).sample(range(max_number), test_size + val_size)
    return drawn[:test_size], drawn[test_size:]


class PairStream:
    """An endless stream of training pairs: subclasses define ``draw(rng) -> item`` (never a
    held-out one) and ``pair(item) -> (source text, target text)``; ``seed`` fixes the stream."""

    seed: int = 0

    def draw(self, rng: random.Random) -> int:
        raise NotImplementedError

    def pair(self, item: int) -> tuple[str, str]:
        raise NotImplementedError

    def sample(self, count: int, seed: int | str | None = None) -> list[tuple[str, str]]:
        """``count`` training pairs from their own stream (to fit tokenisers on)."""
        rng = random.Random(self.seed if seed is None else seed)
        return [self.pair(self.draw(rng)) for _ in range(count)]

    def __iter__(self) -> Iterator[tuple[int, tuple[str, str]]]:
        rng = random.Random(self.seed)
        while True:
            item = self.draw(rng)
            yield item, self.pair(item)


class NumberPairs(PairStream):
    """An endless stream of training pairs (source words, target words), held-out excluded.

    Args:
        src: source language code (num2words).
        tgt: target language code.
        max_number: numbers are drawn from 0 .. max_number - 1.
        exclude: numbers never to produce (the held-out ones).
        seed: the stream's seed (the run's ``--seed``).

    Examples:
        >>> pairs = NumberPairs("en", "de", 1000, exclude={7})
        >>> number, (en, de) = next(iter(pairs))
    """

    def __init__(self, src: str, tgt: str, max_number: int, *,
                 exclude: set[int] | frozenset = frozenset(), seed: int = 0) -> None:
        self.src, self.tgt = check_language(src), check_language(tgt)
        if len(exclude) >= max_number:
            raise ValueError(f"every number below max_number ({max_number}) is excluded")
        self.max_number, self.exclude, self.seed = max_number, frozenset(exclude), seed
        self.digits = len(str(max_number - 1))

    def draw(self, rng: random.Random) -> int:
        """One training number: uniform, or uniform within a uniformly chosen digit count."""
        while True:
            if rng.random() < 0.5:
                n = rng.randrange(self.max_number)
            else:
                d = rng.randint(1, self.digits)
                low = 0 if d == 1 else 10 ** (d - 1)
                n = rng.randrange(low, min(10**d, self.max_number))
            if n not in self.exclude:
                return n

    def pair(self, number: int) -> tuple[str, str]:
        return spell(number, self.src), spell(number, self.tgt)
