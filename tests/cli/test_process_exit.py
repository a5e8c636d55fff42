"""The ``attnlab`` process (``console``): ``main``'s exit status and output, with the objects it
holds frozen out of the garbage collector's reach at the end (the interpreter's exit then does
not search them all for cycles); ``main`` called from a program leaves the collector alone."""
import gc
import subprocess
import sys

import pytest

from attnlab import cli


def test_console_returns_mains_status_then_freezes_the_collector(monkeypatch):
    calls = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 2)
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    assert cli.console() == 2
    assert calls == ["main", "freeze"]


@pytest.mark.slow
def test_main_called_from_a_program_leaves_the_collector_alone(tmp_path):
    frozen = gc.get_freeze_count()
    assert cli.main(["plot", "lr", "--warmup", "5", "--max-iters", "50",
                     "--out", str(tmp_path / "lr.png")]) == 0
    assert gc.get_freeze_count() == frozen


@pytest.mark.slow
def test_the_process_writes_its_output_and_exits_with_its_status(tmp_path):
    png = tmp_path / "lr.png"
    ok = subprocess.run([sys.executable, "-m", "attnlab", "plot", "lr", "--warmup", "5",
                         "--max-iters", "50", "--out", str(png)],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert png.read_bytes().startswith(b"\x89PNG")
    bad = subprocess.run([sys.executable, "-m", "attnlab", "plot", "lr", "--warmup", "-1"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.startswith("attnlab: error:") and "--warmup" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
