"""What a step leaves behind: its `StepResult`, and rows in the run's manifest (L-2).

The manifest (`run_dir/manifest.json`) holds two lists: `steps`, one row per finished step, and `sessions`,
one row per session the instant it starts (or is resumed), naming the step label it belongs to (a fan-out
item's `step[i]`, a round's `step#round2`), so a session whose step never ended still has its step.

Invariant: `append_manifest` and `record_session` never lose a row to a parallel writer (read-modify-write
under an exclusive file lock, atomic replace) and never drop what is stored (an unreadable manifest is kept
aside).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock

from flower.agent.output import json_value
from flower.errors import ConfigError, StoreError
from flower.util.confined import replace_text
from flower.util.rundir import checked_path

__all__ = ["StepResult", "append_manifest", "now", "read_manifest", "read_session_rows", "record_session"]


@dataclass(frozen=True)
class StepResult:
    """What one step did, added up over its generations and attempts."""

    step: str
    """The step's name."""
    session_id: str | None
    """The last generation's session id."""
    ok: bool
    """The step ended with a successful result."""
    cost_usd: float
    """Summed over every query of every attempt and generation."""
    num_turns: int
    """Summed likewise."""
    text: str
    """The main thread's prose of the last result."""
    output: Any = None
    """The typed value of the final reply when the step has an output type: an instance of the pydantic
    model, or the JSON value for a schema (None without an output type, or when the step failed)."""
    error: str | None = None
    """Why the step failed, one line."""
    errors: tuple[str, ...] = ()
    """Every error met on the way, retried or not."""
    attempts: int = 1
    """Sessions started or resumed to finish the step."""
    resumed: bool = False
    """The step began by resuming an earlier session."""
    retired: tuple[str, ...] = ()
    """Session ids of earlier generations, oldest first."""
    handoffs: tuple[str, ...] = ()
    """Paths of the handoff documents written."""
    refreshes: int = 0
    """Times the live session was resumed to drop stale results (`flower.runtime.refresh`)."""
    context: int = 0
    """The main thread's context in tokens at the last API message."""
    contexts: tuple[int, ...] = ()
    """Main-thread context per API message, across generations."""
    retries: tuple[dict[str, Any], ...] = ()
    """Each retry: attempt, kind, error, delay."""
    started: str = ""
    ended: str = ""
    duration: float = 0.0
    """Seconds."""
    tool_errors: int = 0
    """Tool calls that came back as errors (refused, denied or failed), main thread and subagents."""
    tool_error_samples: tuple[str, ...] = ()
    """The last few of them, `tool: first line`."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens summed over every API message of the step, main thread and subagents, each message once
    (`input_tokens`, `output_tokens`, `cache_read_input_tokens`, `cache_creation_input_tokens`)."""
    fallbacks: tuple[dict[str, str], ...] = ()
    """Each time the CLI switched to the spec's fallback model: `model`, `fallback_model`, `trigger`."""
    cache_costs: tuple[dict[str, Any], ...] = ()
    """What each refresh and handoff paid at its first request (the `cache_cost` events: `kind`, `session_id`,
    `message_id`, `before`, `context`, `input`, `cache_read`, `cache_write`, `priced`, `usd`)."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data: a typed output as JSON (manifest rows, `--json`)."""
        data = asdict(replace(self, output=None))
        data["output"] = json_value(self.output)
        return data


def now() -> str:
    """The time manifest rows carry: UTC, ISO 8601, in milliseconds (orders steps finer than a second)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def append_manifest(run_dir: Path, row: Mapping[str, Any]) -> None:
    """Add one step row to `run_dir/manifest.json`: read-modify-write under an exclusive file lock, atomic
    replace, so parallel processes never lose each other's rows and a crash never leaves half a file. A disk
    that is full (or any other OS error) is one `StoreError` naming the file; the old manifest stays whole."""
    _append(run_dir, "steps", row)


def record_session(run_dir: Path, row: Mapping[str, Any]) -> None:
    """Add one session row (`run_id`, `step`, `session_id`, `resumed`, `forked_from`, `started`) to the
    manifest's `sessions`, as `append_manifest` adds a step row."""
    _append(run_dir, "sessions", row)


def _append(run_dir: Path, key: str, row: Mapping[str, Any]) -> None:
    path = checked_path(run_dir / "manifest.json", run_dir)
    try:
        with FileLock(checked_path(run_dir / ".manifest.lock", run_dir)):
            try:
                data = json.loads(path.read_text()) if path.exists() else {"steps": []}
            except ValueError:
                data = None
            if not isinstance(data, dict) or not isinstance(data.get("steps", []), list) \
                    or not isinstance(data.get(key, []), list):
                # Never drop what is stored: keep the unreadable file beside the new one.
                path.replace(path.with_name(f"manifest.unreadable-{int(time.time())}.json"))
                data = {"steps": []}
            data.setdefault(key, []).append(dict(row))
            replace_text(path, json.dumps(data, indent=1, ensure_ascii=False))  # a fresh temp file, never planted
    except OSError as exc:
        raise StoreError(f"cannot write the run's manifest {path}: {exc.strerror or exc}") from None


def _manifest_list(run_dir: Path | None, key: str) -> list[dict[str, Any]]:
    if run_dir is None:
        return []
    path = run_dir / "manifest.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the manifest {path}: {exc}") from None
    rows = data.get(key, []) if isinstance(data, Mapping) else data if key == "steps" else []
    if not isinstance(rows, list):
        raise ConfigError(f"{path} is not a flower manifest (no list of {key})")
    return [dict(row) for row in rows if isinstance(row, Mapping)]


def read_manifest(run_dir: Path | None) -> list[dict[str, Any]]:
    """The manifest's step rows; [] when the run dir has no manifest."""
    return _manifest_list(run_dir, "steps")


def read_session_rows(run_dir: Path | None) -> list[dict[str, Any]]:
    """The manifest's session rows (each session as it started or was resumed, with its step); [] when none."""
    return [row for row in _manifest_list(run_dir, "sessions")
            if isinstance(row.get("session_id"), str) and row["session_id"] and isinstance(row.get("step"), str)]
