"""Fixtures of the browser tests: Chromium (required under CI, else skipped when absent), one browser
per test process, one `course lab` server per test module."""

from __future__ import annotations

import os

import pytest
from labdriver import CHROMIUM_ARGS, chromium_executable, start_lab


def _missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright's Python package is not installed (pip install -e '.[dev]')"
    if chromium_executable() is None:
        return "Chromium is not installed (Debian/Ubuntu: apt-get install chromium)"
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium. Under CI (CI=true) the browser tests are required: missing is a failure."""
    missing = _missing()
    if missing:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and the browser tests are required, but {missing}", pytrace=False)
        pytest.skip(f"browser tests skipped: {missing}")
    return chromium_executable()


@pytest.fixture(scope="session")
def browser(chromium):
    """One headless Chromium for every browser test of this test process."""
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        launched = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
    except Exception:
        pw.stop()
        raise
    yield launched
    launched.close()
    pw.stop()


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory):
    """`course lab` for this test module, with user settings of its own (empty until a test puts the
    test settings in place)."""
    server = start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        server.stop()
