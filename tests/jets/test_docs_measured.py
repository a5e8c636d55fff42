"""docs/jets.md's measured numbers on generated jets are the ones benchmarks/RESULTS.md records:
each row of its 50,000-test-jet table, read off the benchmark's printed output (the default
tagger and the baselines) or its first table (the course's model), rounded as the page gives
it, and the numbers its prose draws from them. The page names the records it quotes by their
headings, and each must be the newest of its benchmark: a newer record that the page does not
quote fails here (the first record under a heading's start was read, so a newer one was
ignored and the page could go stale unsaid). (The rejections 1471, 481 and 265 were quoted with
no check that a record still holds them.)"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the page's row -> the benchmark's name for it (its printed output), or (table, row name)
PRINTED = {"**tagger, default**": "default tagger", "(mass, τ3/τ2) likelihood":
           "(mass, tau32) likelihood", "PFN, same jets and steps": "PFN, same jets and steps",
           "jet mass alone": "jet mass alone", "τ3/τ2 alone": "tau3/tau2 alone"}
COURSE = ("the course's model, `--no-pair-bias`", "tagger, default (76,034 parameters")
DATED = re.compile(r", \d{4}-\d{2}-\d{2}$")  # a heading's date: the benchmark is what precedes it


def _page() -> str:
    return (ROOT / "docs" / "jets.md").read_text(encoding="utf-8")


def _named_records(page: str) -> tuple[str, str]:
    """The headings of the records the page quotes: (the tagger and baselines', the course
    model's)."""
    found = re.search(r'records in `benchmarks/RESULTS\.md`,\s+"([^"]+)" \(the tagger and the '
                      r'baselines\) and\s+"([^"]+)" \(the course\'s model\)', page)
    assert found, "docs/jets.md does not name the records of benchmarks/RESULTS.md it quotes"
    return tuple(" ".join(name.split()) for name in found.groups())


def _record(results: str, heading: str) -> str:
    """The section of ``results`` under ``heading`` (exactly), which must be the newest of its
    benchmark: no later heading is the same but for its date."""
    headings = [(m.start(), m.group(2)) for m in re.finditer(r"^(#+) (.+)$", results, re.M)]
    named = [i for i, (_, text) in enumerate(headings) if text == heading]
    assert len(named) == 1, f"benchmarks/RESULTS.md has {len(named)} records {heading!r}"
    newer = [text for _, text in headings[named[0] + 1:]
             if DATED.sub("", text) == DATED.sub("", heading)]
    assert not newer, (f"docs/jets.md quotes {heading!r}; benchmarks/RESULTS.md has a newer "
                       f"record {newer[-1]!r}")
    start = headings[named[0]][0]
    end = results.find("\n#", start + len(heading))
    return results[start:end if end > 0 else None]


def _page_rows(page: str) -> dict[str, list[str]]:
    """The 50,000-test-jet table of docs/jets.md: the row's name -> its four numbers."""
    table = page[page.index("| model (50,000 test jets) |"):]
    table = table[:table.index("\n\n")]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = [c.strip("*") for c in cells[1:5]]
    return rows


def _matches(page: str, record: str) -> bool:
    """``page`` is ``record`` rounded to the page's decimals."""
    decimals = len(page.split(".")[1]) if "." in page else 0
    return f"{float(record):.{decimals}f}" == page


def _recorded(results: str, page: str) -> dict[str, list[str]]:
    """The page's table row -> the record's four numbers (AUC, accuracy, 1/ε_B at 0.3, 0.5)."""
    tagger, course = _named_records(page)
    printed, first = _record(results, tagger), _record(results, course)
    found = {}
    for name in _page_rows(page):
        key = next((k for k in PRINTED if name.startswith(k)), None)
        if key is not None:
            row = re.search(rf"^\s*{re.escape(PRINTED[key])}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                            rf"\s+([\d.]+)", printed, re.M)
        else:
            assert name.startswith(COURSE[0]), f"docs/jets.md row {name!r} has no record"
            row = re.search(rf"^\| {re.escape(COURSE[1])}[^|]*\| \**([\d.]+)\** \| \**([\d.]+)"
                            rf"\** \| \**([\d.]+)\** \| \**([\d.]+)\** \|", first, re.M)
        assert row, f"benchmarks/RESULTS.md has no row for docs/jets.md's {name!r}"
        found[name] = list(row.groups())
    return found


def _check(page: str, results: str) -> None:
    recorded, checked = _recorded(results, page), 0
    for name, numbers in _page_rows(page).items():
        for said, record in zip(numbers, recorded[name], strict=True):
            assert _matches(said, record), f"{name}: the page says {said}, the record {record}"
        checked += 1
    assert checked == 6
    # the prose under the table, from the same records
    by = {k: [float(x) for x in v] for k, v in recorded.items()}
    tagger = next(v for k, v in by.items() if k.startswith("**tagger, default**"))
    likelihood = by["(mass, τ3/τ2) likelihood"]
    course = next(v for k, v in by.items() if k.startswith(COURSE[0]))
    qcd = re.search(r"[\d,]+ \+ ([\d,]+) test", _record(results, _named_records(page)[0]))
    qcd = int(qcd.group(1).replace(",", ""))
    prose = " ".join(page.split())
    for claim in (f"{tagger[3] / likelihood[3]:.1f}× its rejection at half the top jets kept "
                  f"({tagger[3]:.0f} against {likelihood[3]:.0f})",
                  f"{tagger[2] / likelihood[2]:.1f}× at ε_S = 0.3, with AUC {tagger[0]:.4f}",
                  f"({course[3] / likelihood[3]:.2f}× at ε_S = 0.5)",
                  f"a rejection of {tagger[2]:,.0f} is {qcd / tagger[2]:.0f} of the {qcd:,} QCD"):
        assert claim in prose, f"docs/jets.md does not say {claim!r}, which the records give"


def test_the_measured_table_and_its_prose_are_the_benchmarks_newest_record():
    _check(_page(), (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8"))


def test_a_newer_record_than_the_one_quoted_fails():
    """A record of the same benchmark added after the quoted one (another date, a better
    rejection): the page, which still quotes the older, is refused, naming the newer."""
    page = _page()
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    tagger = _named_records(page)[0]
    newer = _record(results, tagger).replace(tagger, DATED.sub(", 2026-12-24", tagger), 1)
    newer = newer.replace("1470.6", "1612.9")
    with pytest.raises(AssertionError, match="a newer record .*2026-12-24"):
        _check(page, results + "\n" + newer)
