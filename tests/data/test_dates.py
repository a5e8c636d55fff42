"""attnlab.data.dates: dates in two babel locales; held-out dates never reach training."""
import itertools

import pytest

from attnlab.data.dates import DAYS, DatePairs, check_locale, held_out_days, write_date


def test_dates_are_written_in_each_locales_full_format():
    day = 43_528  # 2019-03-06 is 43,528 days after 1900-01-01
    assert write_date(day, "en") == "Wednesday, March 6, 2019"
    assert write_date(day, "de") == "Mittwoch, 6. März 2019"
    assert write_date(0, "fr") == "lundi 1 janvier 1900"
    assert write_date(DAYS - 1, "en") == "Thursday, December 31, 2099"


@pytest.mark.slow
def test_training_stream_never_yields_a_held_out_date():
    test, val = held_out_days(2000, 200)
    assert (test, val) == held_out_days(2000, 200) and len(set(test) | set(val)) == 2200
    pairs = DatePairs("en", "fr", exclude=set(test) | set(val), seed=3)
    drawn = [d for d, _ in itertools.islice(iter(pairs), 5000)]
    assert not set(drawn) & (set(test) | set(val))
    d, (en, fr) = next(iter(pairs))
    assert (en, fr) == (write_date(d, "en"), write_date(d, "fr"))


def test_unknown_locale_names_it():
    assert check_locale("fr_CA") == "fr_CA"
    with pytest.raises(ValueError, match=r"unknown locale 'xx_YY'; babel writes dates in locales such as en, de"):
        DatePairs("en", "xx_YY")
