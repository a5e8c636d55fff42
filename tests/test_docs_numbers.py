"""A memory or speed the docs quote is one that benchmarks/RESULTS.md (or a test) records.

Such numbers change with the code and the machine; a page that quotes one nobody can find again
tells a reader what attnlab no longer does (docs/language_model.md once gave `prepare`'s peak
memory with `char` and its MB/s, measured once and written down nowhere else)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_docs_tables import fenced_lines

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The units of measured memory and speed, the per-second ones before the sizes they start with;
# a size that is a rule of the code (a NUL byte in a file's first 64 KiB) is in KiB and not a
# measurement.
UNITS = "MB/s|GB/s|MiB|GiB|kB|MB|GB|jets/s|tokens/s|steps/s"
NUMBER = r"\d[\d,]*(?:\.\d+)?"
LIST = ", | and | or | / "
# A quote may be a range ("160–180 jets/s"): both ends are quotes.
QUOTE = re.compile(rf"(?<![\w.])(?:({NUMBER})\s*(?:–|-| to )\s*)?({NUMBER})\s*({UNITS})(?!\w)")
# A record may list several before the unit ("446, 445 and 473 MiB") or give KiB.
RECORD = re.compile(rf"(?<![\w.])({NUMBER}(?:(?:{LIST}){NUMBER})*)\s*({UNITS}|KiB)(?!\w)")


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _words(path: Path) -> str:
    """The file's text with every run of white space one space: a quote broken over two lines
    is still one quote."""
    return re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))


def _quotes(text: str) -> list[tuple[str, str]]:
    """Each number a page quotes with a unit, both ends of a range, outside fenced blocks."""
    # a fenced block is a command's printed output (an estimate the code computes), not a claim
    lines = text.split("\n")
    prose = re.sub(r"\s+", " ", " ".join(line for line, fenced in zip(lines, fenced_lines(text))
                                          if not fenced))
    return [(number, unit) for low, high, unit in QUOTE.findall(prose)
            for number in (low, high) if number]


def _sources() -> list[Path]:
    """benchmarks/RESULTS.md and the tests, but this one: its examples of the rule (250 MiB,
    180 jets/s) record nothing."""
    tests = [p for p in sorted((ROOT / "tests").rglob("*.py")) if p != Path(__file__).resolve()]
    return [ROOT / "benchmarks" / "RESULTS.md", *tests]


def _recorded() -> dict[str, list[float]]:
    """Every number with one of those units in the sources."""
    found: dict[str, list[float]] = {}
    for source in _sources():
        for numbers, unit in RECORD.findall(_words(source)):
            values = [_value(v) for v in re.split(LIST, numbers)]
            if unit == "KiB":
                unit, values = "MiB", [v / 1024 for v in values]
            found.setdefault(unit, []).extend(values)
    return found


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _computed() -> dict[str, float]:
    """The sizes pages quote that are the code's arithmetic, not a measurement: ``"PAGE: NUMBER
    UNIT"`` -> the value, in that unit, of the rule the page states (computed here from the
    code's own constants, so a page is caught when the code's rule changes)."""
    from attnlab.tasks.jets.generate import GENERATOR_BYTES, JetSettings
    from attnlab.tasks.jets.spec import JetsSettings

    def held(jets: int) -> float:  # bytes `attnlab data jets` holds for them at its peak
        return JetSettings(signal=jets, background=0).memory_estimate()[0][1]

    jet, frozen = _jet_bytes(), _frozen_copy_bytes()
    return {
        "docs/jets.md: 6.4 kB": held(1) / 1e3,
        "docs/jets.md: 6.4 GB": held(10**6) / 1e9,
        "docs/jets.md: 0.3 GB": GENERATOR_BYTES / 1e9,
        "docs/jets.md: 26 MB": JetsSettings().chunk_size * jet / 1e6,
        # the page's own counts (each still on its page: ``PAGE_COUNTS``) times the code's sizes
        "docs/jets.md: 3.9 GB": PAGE_COUNTS["docs/jets.md"][1] * jet / 1e9,
        "docs/scale.md: 28 GB": PAGE_COUNTS["docs/scale.md"][1] * frozen / 1e9,
    }


# Counts a page states and multiplies by a size of the code's (the code holds no such count):
# page -> (its words, the count).
PAGE_COUNTS = {"docs/jets.md": ("the 1,211,000-jet reference training file", 1_211_000),
               "docs/scale.md": ("a 7B model under LoRA", 7e9)}


def _jet_bytes() -> int:
    """The bytes of one jet's momenta as a jets file holds them (and a chunk read from it)."""
    import numpy as np

    from attnlab.tasks.jets.data import _frame, _pandas, jet_columns

    frame = _frame(_pandas(), np.zeros((1, 1, 4)), np.zeros(1), start=0)
    return frame[jet_columns()].to_numpy().nbytes


def _frozen_copy_bytes() -> int:
    """The bytes a frozen weight's copy takes (``--precision bf16-true``: ``frozen_weights``)."""
    import torch

    from attnlab.training.module import frozen_weights

    layer = torch.nn.Linear(3, 5, bias=False).requires_grad_(False)
    return sum(t.numel() * t.element_size() for t in frozen_weights(layer).values()) // 15


def test_the_pages_still_state_the_counts_their_sizes_multiply():
    for page, (words, _) in PAGE_COUNTS.items():
        assert words in _words(ROOT / page), f"{page} no longer says {words!r}"


def _significant(number: str) -> int:
    return len(number.replace(",", "").replace(".", "").lstrip("0"))


def _backs(record: float, number: str) -> bool:
    """A record backs a page's number if it is that number, or rounds to it and the page gives
    two significant digits or more (42 MiB for 42.1): one digit (2 GB) would take anything
    from 1.5 to 2.5, so it must be recorded as the page gives it."""
    if record == _value(number):
        return True
    return _significant(number) >= 2 and round(record, _decimals(number)) == _value(number)


def test_every_memory_and_speed_a_page_quotes_is_recorded():
    recorded, computed = _recorded(), _computed()
    unbacked = []
    for page in PAGES:
        for number, unit in _quotes(page.read_text(encoding="utf-8")):
            quote = f"{page.relative_to(ROOT)}: {number} {unit}"
            if quote in computed:
                if round(computed[quote], _decimals(number)) != _value(number):
                    unbacked.append(f"{quote}, where the code's rule gives {computed[quote]:g}")
                continue
            if not any(_backs(v, number) for v in recorded.get(unit, [])):
                unbacked.append(quote)
    assert not unbacked, (
        "numbers no benchmarks/RESULTS.md entry or test records (a measurement belongs in "
        "benchmarks/RESULTS.md; a figure that is the code's own rule, not a measurement, belongs "
        "in _computed here, computed from the code's constants):\n" + "\n".join(unbacked))


def test_every_computed_size_is_still_quoted_where_it_is_listed():
    """A page reworded away from a computed size leaves no stale entry in ``_computed``."""
    quoted = {f"{page.relative_to(ROOT)}: {number} {unit}" for page in PAGES
              for number, unit in _quotes(page.read_text(encoding="utf-8"))}
    assert set(_computed()) <= quoted, sorted(set(_computed()) - quoted)


def test_the_check_finds_a_quote_nobody_recorded(tmp_path):
    """The rule itself: a page's 250 MiB is found, a record's list and KiB read, and a page's
    42 MiB matches a record of 42.1."""
    assert _quotes("a 100 MB file peaks at 250 MiB with `char`") == [("100", "MB"),
                                                                        ("250", "MiB")]
    assert _quotes("6.4 kB a jet, 6.4 GB for a million") == [("6.4", "kB"), ("6.4", "GB")]
    assert _quotes("160–180 jets/s, 1.4 MB/s") == [("160", "jets/s"), ("180", "jets/s"),
                                                   ("1.4", "MB/s")]
    assert _quotes("prepare says\n```console\nabout 250 MiB\n```\nthen 12 MiB") == [
        ("12", "MiB")]
    assert _quotes("~~~\nabout 250 MiB\n~~~\n  ```\n1 GB\n  ```\nthen 12 MiB") == [("12", "MiB")]
    assert Path(__file__).resolve() not in [p.resolve() for p in _sources()]
    assert RECORD.findall("446, 445 and 473 MiB; 284,408 KiB") == [("446, 445 and 473", "MiB"),
                                                                   ("284,408", "KiB")]
    assert _backs(42.1, "42") and _backs(1.39, "1.4") and _backs(277.74, "278")
    assert _backs(2.0, "2") and _backs(0.4, "0.4") and _backs(1500, "1,500")
    # a one-digit quote is not backed by whatever rounds to it: 1.5 GB is not 2 GB
    assert not _backs(1.5, "2") and not _backs(0.38, "0.4") and not _backs(1.51, "1.4")


def _sections(results: str, date: str) -> list[str]:
    """The sections of benchmarks/RESULTS.md whose heading carries the date."""
    return [s for s in re.split(r"\n(?=## )", results) if date in s.split("\n", 1)[0]]


def _inner_loop_as_timed(readme: str, results: str) -> bool:
    """The README's time for `make test-fast` is the longest of a timing that the section of
    benchmarks/RESULTS.md of the date it cites records."""
    said = re.search(r"(\d+) s on two cores when benchmarks/RESULTS\.md timed it on "
                     r"(\d{4}-\d\d-\d\d)", re.sub(r"\s+", " ", readme))
    assert said, "the README no longer times make test-fast with a date of benchmarks/RESULTS.md"
    timed = [[float(s) for s in re.findall(r"passed[^.;]*? in (\d+(?:\.\d+)?) ?s\b", p)]
             for section in _sections(results, said[2])
             for p in re.split(r"\n\s*\n", section) if "make test-fast" in p]
    timed = [seconds for seconds in timed if seconds]
    return any(round(max(seconds)) == int(said[1]) for seconds in timed)


def _stress_campaign_as_timed(readme: str, results: str) -> bool:
    """The README's minutes for `make test-stress` are the sum of a campaign's runs that
    benchmarks/RESULTS.md records on the date the README cites."""
    said = re.search(r"the campaign benchmarks/RESULTS\.md records from (\d{4}-\d\d-\d\d), "
                     r"[^;]*? took (\d+) minutes", re.sub(r"\s+", " ", readme))
    assert said, "the README no longer cites a dated make test-stress campaign"
    campaigns = [s for s in _sections(results, said[1]) if s.startswith("## suite_stress")]
    minutes = [sum(float(m) for m in re.findall(
        r"^\| \d+ \| [^|]+ \| [^|]+ \| [^|]+ \| ([\d.]+) \|", c, re.M)) for c in campaigns]
    return any(round(m) == int(said[2]) for m in minutes)


def test_the_readme_times_the_test_targets_as_the_records_it_cites():
    """The README promised `make test-fast` "in under 30 s" after benchmarks/RESULTS.md had
    timed it at 35 and 36 s, and `make test-stress` "about an hour" after a campaign of 76
    minutes: each time is now the one the dated record it cites holds."""
    readme = (ROOT / "README.md").read_text("utf-8")
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text("utf-8")
    assert _inner_loop_as_timed(readme, results)
    assert _stress_campaign_as_timed(readme, results)


def test_a_new_record_leaves_the_readmes_times_true():
    """`make test-stress ARGS=--write`, a documented command, appends a campaign to
    benchmarks/RESULTS.md; the README's times were once checked against the newest record, so
    the next `make test` failed until someone edited the README."""
    readme = (ROOT / "README.md").read_text("utf-8")
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text("utf-8") + (
        "\n## suite_stress — the whole suite repeated, 2099-01-01 00:00 UTC, commit 0000000\n\n"
        "| run | started | how | load average (1 min) | minutes | result | failed tests |\n"
        "|---|---|---|---|---|---|---|\n"
        "| 1 | 2099-01-01 00:00 UTC | plain | 1.0 | 9.0 | 9 passed in 540.00s | — |\n\n"
        "## test-fast, 2099-01-01\n\n`make test-fast`: 900 passed in 50.00s\n")
    assert _inner_loop_as_timed(readme, results)
    assert _stress_campaign_as_timed(readme, results)
    # and a README that cites a time its record does not hold is still caught
    assert not _stress_campaign_as_timed(readme.replace("took 76 minutes", "took 60 minutes"),
                                         results)
    assert not _inner_loop_as_timed(readme.replace("36 s on two", "30 s on two"), results)


LICENCES = Path("/usr/share/common-licenses")


@pytest.mark.skipif(not LICENCES.is_dir(), reason="Debian's licence texts are not here")
def test_the_licence_example_counts_the_characters_of_its_texts():
    """docs/language_model.md once said 86 distinct characters where its five licence texts
    have 82: the 86 are the character tokeniser's ids, with its 4 special tokens."""
    from attnlab.tokenizers import CharTokenizer

    page = _words(ROOT / "docs" / "language_model.md")
    names = re.search(r"cat /usr/share/common-licenses/\{([^}]*)\}", page)[1].split(",")
    text = "".join((LICENCES / name).read_text(encoding="utf-8") for name in names)
    said = re.search(r"(\d+) distinct characters(?:, (\d+) token ids)?", page)
    assert said, "docs/language_model.md no longer counts the licence texts' characters"
    ids = CharTokenizer.fit([text]).vocab_size
    assert (int(said[1]), said[2] and int(said[2])) == (len(set(text)), ids)
    assert f"uniform guessing over the {ids} ids: {ids})" in page
