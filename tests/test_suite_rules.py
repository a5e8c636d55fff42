"""Rules of the test suite itself, so that it passes every time on a busy two-core machine."""
import re
from pathlib import Path

TESTS = Path(__file__).parent


def test_every_process_a_test_does_not_wait_for_is_started_by_spawn():
    """``subprocess.Popen`` in a test leaves the process running when an assertion fails before
    the test ends it (a server, a training run loading the machine for every test after it);
    conftest.py's ``spawn`` fixture kills and reaps it whatever happens. ``subprocess.run``
    waits for its process, and kills it at its timeout."""
    started = [f"{path.relative_to(TESTS)}:{n}"
               for path in sorted(TESTS.rglob("*.py"))
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if re.search(r"\bPopen\(", line) and not line.lstrip().startswith("#")]
    assert not started, f"start these with the spawn fixture: {started}"


def test_every_browser_a_test_drives_is_the_workers_one_from_conftest():
    """A ``browser`` fixture defined (or imported) in a test module is a second session
    fixture: one more Chromium started per worker (seconds each) and, without conftest.py's
    ``--user-data-dir``, one more ``org.chromium.Chromium.*`` profile left in /tmp."""
    found = [f"{path.relative_to(TESTS)}:{n}"
             for path in sorted(TESTS.rglob("*.py")) if path != TESTS / "conftest.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\bwebdriver\.Chrome\(|^def browser\(|import .*\bbrowser\b", line)]
    assert not found, f"take tests/conftest.py's `browser` or `page` fixture instead: {found}"
