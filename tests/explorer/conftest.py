"""A headless Chromium for the explorer's browser tests (Debian's ``chromium`` and
``chromium-driver``, which ``make browser`` installs; Selenium drives it).

``page(data)`` writes the page of ``data`` to a temporary file, opens it from ``file://`` and
returns the driver; the console and network logs of that load are kept for the tests."""
import shutil
from pathlib import Path

import pytest

from attnlab.explorer import render_html
from benchmarks.explorer import CHROMIUM_ARGS  # the one list, the benchmark's and docs'

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


@pytest.fixture(scope="session")
def browser():
    if not (Path(CHROMIUM).exists() or shutil.which("chromium")) or not (
            Path(DRIVER).exists() or shutil.which("chromedriver")):
        pytest.fail("Chromium and ChromeDriver are needed: run `make browser`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
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
def page(browser, tmp_path):
    """Open the page of ``data`` (or an HTML text) from a file; return the driver."""
    def open_page(data, name="attention.html"):
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else render_html(data), encoding="utf-8")
        browser.get_log("browser"), browser.get_log("performance")  # forget earlier pages
        browser.get(path.as_uri())
        browser.page_path = path
        return browser
    return open_page
