"""Is there anything to authenticate with, before a session starts and money or time is spent? (L-11)

The bundled CLI reads its credentials from the environment (an API key, an auth token, a gateway base
URL that needs none of ours, or a cloud provider switch) or from its own login (`claude login` stores an
OAuth token in its config dir). Without any of them every request fails with 401, after the CLI has
started; flower says so in one line first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from flower.errors import ConfigError

__all__ = ["CREDENTIAL_VARIABLES", "check_credentials"]

CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
)


def _logged_in(env: Mapping[str, str]) -> bool:
    config = env.get("CLAUDE_CONFIG_DIR") or str(Path(env.get("HOME") or Path.home()) / ".claude")
    return (Path(config) / ".credentials.json").is_file()


def check_credentials(env: Mapping[str, str] | None = None) -> None:
    """Raise ConfigError naming the variables when nothing could authenticate a request."""
    env = os.environ if env is None else env
    if any((env.get(name) or "").strip() for name in CREDENTIAL_VARIABLES) or _logged_in(env):
        return
    raise ConfigError(
        "no credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, or ANTHROPIC_BASE_URL for a "
        "gateway), or log in with `claude login`"
    )
