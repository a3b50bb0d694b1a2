"""The e2e tier's shared Chromium (Debian's, driven by Playwright), one per test module."""

from __future__ import annotations

import os

import pytest

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian chromium is missing: run scripts/setup_env.sh (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()
