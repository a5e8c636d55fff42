"""Trained runs shared by tests of several folders, trained once per pytest-xdist worker.

A run trained in a module fixture is trained again by every module that defines one, in every
worker that runs one of the module's tests; a session fixture here is trained once per worker.
The run is shared, so a test must leave it as it found it: the fixture a test takes checks
after the test that no file of the run was added, removed or rewritten (a test that writes into
the run fails in its teardown, naming the files). A test that writes copies the run first.
Also the worker's fork server (``forks``), which starts ``attnlab`` commands without their
imports, and its headless Chromium (``browser``, ``page``).
"""
import os
import shutil
from pathlib import Path

import pytest

from attnlab.cli import main

from .reliability.conftest import TINY_REVERSE


def files_of(*runs) -> dict[str, tuple[int, int]]:
    """Every file under the run directories: {path: (size, modification time in ns)}."""
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns)
            for run in runs for path in sorted(run.rglob("*")) if path.is_file()}


def left_unchanged(before: dict, *runs) -> None:
    """Fails, naming the files, when the runs' files differ from ``before`` (``files_of``)."""
    after = files_of(*runs)
    changed = sorted(set(before) ^ set(after)
                     | {path for path in before.keys() & after.keys() if before[path] != after[path]})
    assert not changed, f"the test wrote into a shared run (copy it first): {changed}"


@pytest.fixture(scope="session")
def trained_reverse_run(tmp_path_factory):
    """A finished tiny reversal run (``TINY_REVERSE``), checkpoints every 10 of its 30 steps."""
    out = tmp_path_factory.mktemp("runs") / "reverse"
    assert main(["train", "reverse", "--out", str(out), *TINY_REVERSE]) == 0
    return out


@pytest.fixture(scope="session")
def trained_tag_run(tmp_path_factory):
    """A finished tiny tag run (3 steps), shared by the modules that read one."""
    from .reliability.conftest import task_data, tiny_args

    tmp = tmp_path_factory.mktemp("tag")
    out = tmp / "run"
    assert main(["train", "tag", *tiny_args("tag", task_data(tmp), "--max-steps", "3"),
                 "--out", str(out)]) == 0
    return out


@pytest.fixture
def tag_run(trained_tag_run):
    """``trained_tag_run``, checked unchanged after the test."""
    before = files_of(trained_tag_run)
    yield trained_tag_run
    left_unchanged(before, trained_tag_run)


@pytest.fixture
def reverse_run(trained_reverse_run):
    """``trained_reverse_run``, checked unchanged after the test."""
    before = files_of(trained_reverse_run)
    yield trained_reverse_run
    left_unchanged(before, trained_reverse_run)


@pytest.fixture(scope="session")
def forks(spawn_session, tmp_path_factory):
    """The directory of an ``attnlab`` that runs each command in a process forked from this
    worker's fork server (tests/forkserver.py), started at the first test that needs it: the
    docs pages' commands, and the processes of a DDP run (tests/reliability/conftest.py)."""
    from . import forkserver

    where = tmp_path_factory.mktemp("forks")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATTNLAB_RUN_DIR", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE")}
    env["MPLBACKEND"] = "Agg"   # as the docs test's run_command sets it for every command
    with forkserver.running(spawn_session, str(where), env):
        yield where


CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """A headless Chromium (Debian's ``chromium`` and ``chromium-driver``, which ``make browser``
    installs; Selenium drives it), one per worker for every module that opens a page. Its
    profile is under the session's temporary directory: left to itself Chromium makes one
    in /tmp (``org.chromium.Chromium.*``) and does not remove it when it quits."""
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")) or not (
            Path(DRIVER).exists() or shutil.which("chromedriver")):
        pytest.fail("Chromium and ChromeDriver are needed: run `make browser`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from benchmarks.explorer import CHROMIUM_ARGS  # the one list, the benchmark's and docs'

    options = webdriver.ChromeOptions()
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(
        DRIVER if Path(DRIVER).exists() else shutil.which("chromedriver")))
    # the viewport itself 1280 × 800 (a window of that size has less room for the page)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    yield driver
    driver.quit()


@pytest.fixture
def fresh_browser(browser):
    """The worker's one browser, reset from whatever width or colour scheme a test before this
    one emulated (1280 x 800, no media features): what a test that opens a page uses."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    return browser


@pytest.fixture
def page(fresh_browser, tmp_path):
    """Open the page of ``data`` (or an HTML text) from a file; return the driver; the
    console and network logs of that load are kept for the tests."""
    from attnlab.explorer import render_html

    browser = fresh_browser

    def open_page(data, name="attention.html"):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else render_html(data), encoding="utf-8")
        browser.get_log("browser"), browser.get_log("performance")  # forget earlier pages
        browser.get(path.as_uri())
        browser.page_path = path
        return browser
    return open_page
