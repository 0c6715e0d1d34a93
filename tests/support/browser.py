"""Debian's chromium driven by Playwright for Python (no browser download)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        missing = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):  # .ci/run installs it: there, its absence is a failure
            pytest.fail(missing)
        pytest.skip(missing)
    return path


def launched() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: object, name: str, *, full_page: bool = True) -> None:
    """Into HOOKLATCH_SCREENSHOTS (docs/screenshots when the docs are remade), if set:
    the whole page, or (``full_page=False``) what the window shows, as a phone's screen."""
    folder = os.environ.get("HOOKLATCH_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        path = str(Path(folder) / f"{name}.png")
        page.screenshot(path=path, full_page=full_page)  # type: ignore[attr-defined]
