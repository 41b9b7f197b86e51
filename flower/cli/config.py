"""The `flower` command's side of settings: the config file's values as click defaults, and the variables.

Settings are resolved by `flower.runtime.config.resolve_config` (flag > environment > config file >
default); `flower config` prints exactly what it returns. Here the config file's values also become
click's `default_map`, so a command's flag or environment variable still wins over them; a file inside
the workspace feeds none of the settings that choose where data goes (`trusted_config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flower.runtime.config import (
    SETTINGS,
    TRUST_ENV,
    Setting,
    find_config,
    load_config,
    resolve_config,
    trusted_config,
)

__all__ = ["ENVIRONMENT", "OPTIONS", "SETTINGS", "Setting", "default_map", "find_config", "load_config",
           "resolve_config", "trusted_config"]

_ALL = ("report", "preview", "logs")
OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "workspace": (("run", "workspace"), ("once", "workspace"), ("sessions.list", "workspace")),
    "run_dir": tuple((c, "run_dir") for c in ("run", "once", *_ALL, "sessions.list", "sessions.show")),
    "store": tuple((c, "store") for c in ("run", "once", *_ALL, "sessions.list", "sessions.show")),
    "model": (("run", "model"), ("once", "model")),
    "budget": (("run", "budget"), ("once", "budget")),
    "window": (("report", "window"),),
    "otlp": (("run", "otlp"), ("once", "otlp")),
}
"""Setting -> the (command, click parameter name) pairs its config-file value feeds as a default."""

ENVIRONMENT: tuple[tuple[str, str], ...] = (
    *((s.env, s.help) for s in SETTINGS if s.env),
    (TRUST_ENV, "1: a config file inside the workspace may set run_dir, store, otlp and workspace too"),
    ("ANTHROPIC_API_KEY", "API key; `ANTHROPIC_AUTH_TOKEN` or `CLAUDE_CODE_OAUTH_TOKEN` work too"),
    ("ANTHROPIC_BASE_URL", "the Messages API endpoint (a local address runs without credentials)"),
    ("ANTHROPIC_MODEL", "read by the Claude Code CLI when neither the spec nor --model names a model"),
    ("CLAUDE_CODE_USE_BEDROCK / _VERTEX", "use Bedrock or Vertex credentials instead of a key"),
    ("ANTHROPIC_*, CLAUDE_*, DISABLE_*, FLOWER_*", "passed on to the Claude Code CLI as they are"),
    ("HOME, HTTP(S)_PROXY, NO_PROXY", "passed on to the Claude Code CLI"),
)
"""Every environment variable flower reads, for `docs/cli.md` (a test keeps the two in step)."""


def default_map(values: Mapping[str, Any]) -> dict[str, Any]:
    """click's `default_map` for the file's values: {command: {parameter: value}}, nested for groups."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        for command, param in OPTIONS.get(name, ()):
            node = out
            for part in command.split("."):
                node = node.setdefault(part, {})
            node[param] = value
    return out
