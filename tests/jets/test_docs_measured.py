"""docs/jets.md's measured numbers on generated jets are the ones benchmarks/RESULTS.md records:
each row of its 50,000-test-jet table, read off the benchmark's printed output (the default
tagger and the baselines) or its first table (the course's model), rounded as the page gives
it. (The rejections 1471, 481 and 265 were quoted with no check that a record still holds
them.)"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the page's row -> the benchmark's name for it (its printed output), or (table, row name)
PRINTED = {"**tagger, default**": "default tagger", "(mass, τ3/τ2) likelihood":
           "(mass, tau32) likelihood", "PFN, same jets and steps": "PFN, same jets and steps",
           "jet mass alone": "jet mass alone", "τ3/τ2 alone": "tau3/tau2 alone"}
COURSE = ("the course's model, `--no-pair-bias`", "tagger, default (76,034 parameters")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start:end if end > 0 else None]


def _page_rows() -> dict[str, list[str]]:
    """The 50,000-test-jet table of docs/jets.md: the row's name -> its four numbers."""
    page = (ROOT / "docs" / "jets.md").read_text(encoding="utf-8")
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


def test_the_measured_table_is_the_benchmarks_record():
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    printed = _section(results, "### jets — the default tagger (pairwise bias on by default)")
    first = _section(results, "## jets — the top tagger vs the mass")
    rows, checked = _page_rows(), 0
    for name, numbers in rows.items():
        key = next((k for k in PRINTED if name.startswith(k)), None)
        if key is not None:
            found = re.search(rf"^\s*{re.escape(PRINTED[key])}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                              rf"\s+([\d.]+)", printed, re.M)
        else:
            assert name.startswith(COURSE[0]), f"docs/jets.md row {name!r} has no record"
            found = re.search(rf"^\| {re.escape(COURSE[1])}[^|]*\| \**([\d.]+)\** \| \**([\d.]+)"
                              rf"\** \| \**([\d.]+)\** \| \**([\d.]+)\** \|", first, re.M)
        assert found, f"benchmarks/RESULTS.md has no row for docs/jets.md's {name!r}"
        for page, record in zip(numbers, found.groups(), strict=True):
            assert _matches(page, record), f"{name}: the page says {page}, the record {record}"
        checked += 1
    assert checked == 6
