"""The explorer's browser tests take ``browser`` and ``page``, the headless Chromium of
tests/conftest.py (one per pytest-xdist worker, shared by every module that drives a page)."""
from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"
