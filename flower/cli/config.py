"""Settings of the `flower` command: flag > environment > config file > default (issue #18).

The config file is `flower.toml` (top-level keys) or the `[tool.flower]` table of `pyproject.toml`, found in
the current directory or the nearest parent that has one (`flower.toml` wins when a directory has both).
Its values become click's `default_map`, so a flag or an environment variable still wins over them, and
`flower config` shows each setting's value and where it came from.

Invariants:
- An unknown key, or a value of the wrong type, is one `ConfigError` line naming the file and the key.
- Reading the config never creates or changes a file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["ENVIRONMENT", "SETTINGS", "Setting", "default_map", "find_config", "load_config", "resolve"]


@dataclass(frozen=True)
class Setting:
    name: str
    """The key in the config file."""
    env: str | None
    """The environment variable that sets it."""
    default: Any
    kind: type
    help: str
    options: tuple[tuple[str, str], ...] = ()
    """(command, click parameter name) pairs the setting feeds."""


_ALL = ("report", "preview", "logs")
SETTINGS: tuple[Setting, ...] = (
    Setting("workspace", "FLOWER_WORKSPACE", ".", str, "the agent's working directory",
            (("run", "workspace"), ("once", "workspace"), ("sessions.list", "workspace"))),
    Setting("run_dir", "FLOWER_RUN_DIR", "runs", str, "where manifest.json and sessions.db live",
            tuple((c, "run_dir") for c in ("run", "once", *_ALL, "sessions.list", "sessions.show"))),
    Setting("store", "FLOWER_STORE", None, str, "session store: a postgresql:// DSN or a SQLite file",
            tuple((c, "store") for c in ("run", "once", *_ALL, "sessions.list", "sessions.show"))),
    Setting("model", "FLOWER_MODEL", None, str, "model id or alias for run and once",
            (("run", "model"), ("once", "model"))),
    Setting("window", "FLOWER_WINDOW", None, int, "context window in tokens (handoff threshold, report)",
            (("report", "window"),)),
    Setting("handoff_at", "FLOWER_HANDOFF_AT", None, int,
            "hand off once the main context reaches this many tokens, whatever the window (cost-driven)"),
    Setting("trim", "FLOWER_TRIM", False, bool, "trim large old tool results on resume (S-19)"),
    Setting("spill_threshold", "FLOWER_SPILL_THRESHOLD", 4000, int,
            "tool outputs longer than this many chars are spilled to the workbench"),
    Setting("otlp", "FLOWER_OTLP", None, str, "OTLP/HTTP collector URL for tracing",
            (("run", "otlp"), ("once", "otlp"))),
)

ENVIRONMENT: tuple[tuple[str, str], ...] = (
    *((s.env, s.help) for s in SETTINGS if s.env),
    ("ANTHROPIC_API_KEY", "API key; `ANTHROPIC_AUTH_TOKEN` or `CLAUDE_CODE_OAUTH_TOKEN` work too"),
    ("ANTHROPIC_BASE_URL", "the Messages API endpoint (a local address runs without credentials)"),
    ("ANTHROPIC_MODEL", "read by the Claude Code CLI when neither the spec nor --model names a model"),
    ("CLAUDE_CODE_USE_BEDROCK / _VERTEX", "use Bedrock or Vertex credentials instead of a key"),
    ("ANTHROPIC_*, CLAUDE_*, DISABLE_*, FLOWER_*", "passed on to the Claude Code CLI as they are"),
    ("HOME, HTTP(S)_PROXY, NO_PROXY", "passed on to the Claude Code CLI"),
)
"""Every environment variable flower reads, for `docs/cli.md` (a test keeps the two in step)."""

_BY_NAME = {s.name: s for s in SETTINGS}


def find_config(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The nearest config file from `start` (default: the current directory) up, and its flower table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in ("flower.toml", "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            data = _read(path)
            table = data if name == "flower.toml" else data.get("tool", {}).get("flower")
            if isinstance(table, dict):
                return path, table
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
            return data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def load_config(start: Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """The config file's checked values by setting name ({} without a file)."""
    found = find_config(start)
    if found is None:
        return None, {}
    path, table = found
    values: dict[str, Any] = {}
    for key, value in table.items():
        setting = _BY_NAME.get(key.replace("-", "_"))
        if setting is None:
            raise ConfigError(f"{path}: unknown flower setting {key!r} (known: {', '.join(_BY_NAME)})")
        if setting.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{path}: {key} must be a whole number, not {value!r}")
        if setting.kind is bool and not isinstance(value, bool):
            raise ConfigError(f"{path}: {key} must be true or false, not {value!r}")
        if setting.kind is str and not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a string, not {value!r}")
        values[setting.name] = value
    return path, values


def default_map(values: Mapping[str, Any]) -> dict[str, Any]:
    """click's `default_map` for the file's values: {command: {parameter: value}}, nested for groups."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        for command, param in _BY_NAME[name].options:
            node = out
            for part in command.split("."):
                node = node.setdefault(part, {})
            node[param] = value
    return out


def _parse_env(setting: Setting, raw: str) -> Any:
    if setting.kind is bool:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if setting.kind is int and setting.name not in ("window", "handoff_at"):  # these take 200k; HandoffPolicy parses
        try:
            return int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(f"{setting.env} must be a whole number, not {raw!r}") from None
    return raw


def resolve(
    flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None, start: Path | None = None
) -> list[dict[str, Any]]:
    """Each setting's value and source (`flag`, `env NAME`, the config file's path, or `default`)."""
    env = os.environ if env is None else env
    path, values = load_config(start)
    rows = []
    for s in SETTINGS:
        if flags and flags.get(s.name) is not None:
            value, source = flags[s.name], "flag"
        elif s.env and env.get(s.env):
            value, source = _parse_env(s, env[s.env]), f"env {s.env}"
        elif s.name in values:
            value, source = values[s.name], str(path)
        else:
            value, source = s.default, "default"
        rows.append({"name": s.name, "value": value, "source": source, "env": s.env, "help": s.help})
    return rows


def setting(name: str, rows: list[dict[str, Any]]) -> Any:
    return next(row["value"] for row in rows if row["name"] == name)
