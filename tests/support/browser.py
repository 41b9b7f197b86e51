"""Headless Chromium for the HTML report tests: its flags, where it is, and a page loaded through it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def load(chromium: str, page: Path, profile: Path) -> tuple[str, list[str]]:
    """The DOM after load, and the console lines the page produced."""
    logging = ["--enable-logging=stderr", "--v=0"]
    done = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *logging, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def find_chromium() -> str:
    """The chromium binary; skips the test without one, and fails it in CI, which must have one."""
    path = shutil.which("chromium")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("headless Chromium is required in CI (.ci/run installs Debian's chromium)")
        pytest.skip("headless Chromium is not installed (apt-get install chromium); CI runs this test")
    return path
