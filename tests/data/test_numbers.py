"""attnlab.data.numbers: spelled-out number pairs; held-out numbers never reach training."""
import itertools

import pytest

from attnlab.data.numbers import LANGUAGES, NumberPairs, check_language, held_out_numbers, spell


def test_spelling_reorders_units_and_tens_in_german():
    assert spell(342, "en") == "three hundred and forty-two"
    assert spell(342, "de") == "dreihundertzweiundvierzig"
    assert spell(342, "fr") == "trois cent quarante-deux"


def test_held_out_numbers_are_fixed_distinct_and_in_range():
    test, val = held_out_numbers(1_000_000, 2000, 200)
    assert (test, val) == held_out_numbers(1_000_000, 2000, 200)  # same for every run
    assert len(set(test)) == 2000 and len(set(val)) == 200 and not set(test) & set(val)
    assert all(0 <= n < 1_000_000 for n in test + val)
    assert sum(n >= 100_000 for n in test) > 1500  # uniform below one million: mostly 6 digits


def test_training_stream_never_yields_a_held_out_number():
    test, val = held_out_numbers(100, 30, 10)
    pairs = NumberPairs("en", "de", 100, exclude=set(test) | set(val), seed=1)
    drawn = [n for n, _ in itertools.islice(iter(pairs), 2000)]
    assert not set(drawn) & (set(test) | set(val))
    assert set(drawn) == set(range(100)) - set(test) - set(val)  # and every other one appears
    n, (en, de) = next(iter(pairs))
    assert (en, de) == (spell(n, "en"), spell(n, "de"))


def test_training_stream_covers_short_numbers_and_depends_on_the_seed():
    pairs = NumberPairs("en", "fr", 1_000_000, seed=0)
    import random

    drawn = [pairs.draw(random.Random(s)) for s in range(400)]
    assert sum(n < 10 for n in drawn) > 20  # ~1/12 of draws have one digit
    a = [n for n, _ in itertools.islice(iter(NumberPairs("en", "de", 10**6, seed=0)), 5)]
    b = [n for n, _ in itertools.islice(iter(NumberPairs("en", "de", 10**6, seed=1)), 5)]
    assert a != b


def test_unknown_language_names_it_and_lists_valid_ones():
    assert check_language("de") == "de" and "fr" in LANGUAGES
    with pytest.raises(ValueError, match=r"unknown language 'klingon'.*e\.g\. en, de, fr"):
        check_language("klingon")
    with pytest.raises(ValueError, match=r"unknown language 'xx'"):
        NumberPairs("en", "xx", 100)


def test_held_out_numbers_must_leave_numbers_for_training():
    with pytest.raises(ValueError, match=r"test_size \+ val_size \(60\) must be at most half of "
                                         r"the numbers below max_number \(100\)"):
        held_out_numbers(100, 50, 10)
