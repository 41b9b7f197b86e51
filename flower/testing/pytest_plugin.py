"""pytest fixtures for flower.testing: add `pytest_plugins = ["flower.testing.pytest_plugin"]` to a conftest.

- `scripted_api`: a started `ScriptedAPI` with an empty script; the test adds steps with `.script(...)`.
  At teardown the server stops and `assert_done()` runs, so violations, exhaustion and unused steps fail the
  test even when the CLI swallowed the error.
- `cli_home`: a throwaway HOME for the CLI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flower.testing.server import ScriptedAPI


@pytest.fixture
def scripted_api() -> Iterator[ScriptedAPI]:
    api = ScriptedAPI().start()
    try:
        yield api
    finally:
        api.stop()
    api.assert_done()


@pytest.fixture
def cli_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    return home
