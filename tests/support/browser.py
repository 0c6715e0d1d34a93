"""Debian's chromium driven by Playwright for Python (no browser download)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tests.support.tools import needed_tool

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
    """Debian's chromium (CI installs it); a test without it is skipped, or fails in CI."""
    return needed_tool("chromium", "chromium-browser", apt="chromium")


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
