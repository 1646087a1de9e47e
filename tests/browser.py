"""Headless Chromium for the tests that check what a page draws (the report, the Data Docs, a
notebook's figures): Debian's chromium driven by playwright, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["Visit", "browser", "open_page"]


def _chromium() -> str:
    for candidate in (os.environ.get("TXN_AUDIT_CHROMIUM"), "chromium", "chromium-browser"):
        found = candidate and shutil.which(candidate)
        if found:
            return found
    pytest.fail("Chromium is missing: `make test` installs it (scripts/ensure-browser.sh)")


def _offline_launcher(tmp: Path, chromium: str) -> tuple[str, bool]:
    """Chromium inside a network namespace with no interfaces but loopback, when the kernel
    allows it; requests are also intercepted and recorded either way."""
    if subprocess.run(["unshare", "--net", "--map-root-user", "true"], capture_output=True).returncode == 0:
        wrapper = tmp / "chromium-offline"
        wrapper.write_text(f'#!/bin/sh\nexec unshare --net --map-root-user "{chromium}" "$@"\n')
        wrapper.chmod(0o755)
        return str(wrapper), True
    return chromium, False


class Visit:
    """What a page tried: the addresses outside files it asked for, its console errors."""

    def __init__(self) -> None:
        self.outside: list[str] = []
        self.console_errors: list[str] = []


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    launcher, _ = _offline_launcher(tmp_path_factory.mktemp("browser"), _chromium())
    with sync_playwright() as pw:
        instance = pw.chromium.launch(
            executable_path=launcher,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
        )
        yield instance
        instance.close()


def open_page(browser: Any, page_file: Path, visit: Visit) -> Any:
    """``page_file`` opened in a new context whose requests outside files are refused and
    recorded in ``visit``, as are the page's console errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 2000})

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            visit.outside.append(url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("console", lambda msg: visit.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda err: visit.console_errors.append(str(err)))
    page.goto(page_file.as_uri(), wait_until="load")
    return page


