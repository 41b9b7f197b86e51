"""End-to-end helpers: the real bundled CLI through the real SDK, against flower.testing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions

from flower.testing import ScriptedAPI

pytestmark = pytest.mark.e2e


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def make_options(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path):  # type: ignore[no-untyped-def]
    """Build options for a portable CLI run against the scripted API (extra env merged over it)."""

    def build(env: dict[str, str] | None = None, **kwargs: Any) -> ClaudeAgentOptions:
        base_env = scripted_api.cli_env(tmp_path / "home", **(env or {}))
        kwargs.setdefault("cwd", str(workspace))
        kwargs.setdefault("setting_sources", [])
        return ClaudeAgentOptions(env=base_env, **kwargs)

    return build
