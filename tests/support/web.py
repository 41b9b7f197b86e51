"""`flower web` for the browser tests: the server as a subprocess on a free port, and a Playwright page
on Debian's Chromium (no browser download) that records every console error and uncaught exception."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support.browser import FLAGS, find_chromium


@dataclass
class WebServer:
    url: str
    process: subprocess.Popen[str]


def start_web(*args: str, env: dict[str, str] | None = None) -> WebServer:
    """`flower web ARGS --port 0`, once it has printed the address it listens on."""
    child = subprocess.Popen([sys.executable, "-m", "flower", "web", *args, "--port", "0"], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                             env={**os.environ, **(env or {})})
    assert child.stderr is not None
    line = child.stderr.readline()
    if not line.startswith("flower web: http://"):
        child.kill()
        raise AssertionError(f"flower web did not start: {line}{child.stderr.read()}")
    return WebServer(line.split()[2], child)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)


@dataclass
class Browser:
    page: Any
    problems: list[str] = field(default_factory=list)
    """Console errors and warnings, and uncaught exceptions, as the page produced them."""


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    path = find_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=[f for f in FLAGS if f != "--headless"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser(chromium_browser: Any) -> Iterator[Browser]:
    context = chromium_browser.new_context()
    page = context.new_page()
    seen = Browser(page)
    page.on("console", lambda m: seen.problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda exc: seen.problems.append(f"pageerror: {exc}"))
    try:
        yield seen
    finally:
        context.close()


def wait_until(check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
