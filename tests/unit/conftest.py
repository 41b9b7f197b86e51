"""Fixtures shared by the unit tests of several packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import write_run_dir


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A stored run (two sessions, a subagent, a spill log, a manifest) for the reading commands."""
    return write_run_dir(tmp_path)
