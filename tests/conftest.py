"""Shared pytest configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest_plugins = ["flower.testing.pytest_plugin"]

CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
# The discard port on the loopback address: nothing listens there, so a CLI or client that was not given the
# scripted API's address gets "connection refused" instead of reaching a real model.
CLOSED_BASE_URL = "http://127.0.0.1:9"


@pytest.fixture(scope="session", autouse=True)
def no_real_model() -> Iterator[None]:
    """No test can reach a real model by accident: the real credentials of whoever runs the suite are
    removed and the API address is a closed port, for every test and every process a test starts. A test
    that starts the scripted API passes its own address and fake key (`ScriptedAPI.cli_env`). Session-wide,
    so module- and session-scoped fixtures run under it too."""
    with pytest.MonkeyPatch.context() as patch:
        for name in CREDENTIALS:
            patch.delenv(name, raising=False)
        patch.setenv("ANTHROPIC_BASE_URL", CLOSED_BASE_URL)
        yield


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
