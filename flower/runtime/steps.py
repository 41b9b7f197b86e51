"""What a step leaves behind: its `StepResult`, and a row in the run's manifest (L-2).

Invariant: `append_manifest` never loses a row to a parallel writer (read-modify-write under an exclusive
file lock, atomic replace) and never drops what is stored (an unreadable manifest is kept aside).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from flower.errors import StoreError
from flower.util.confined import replace_text
from flower.util.rundir import checked_path

__all__ = ["StepResult", "append_manifest"]


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


def append_manifest(run_dir: Path, row: Mapping[str, Any]) -> None:
    """Add one row to `run_dir/manifest.json`: read-modify-write under an exclusive file lock, atomic
    replace, so parallel processes never lose each other's rows and a crash never leaves half a file. A disk
    that is full (or any other OS error) is one `StoreError` naming the file; the old manifest stays whole."""
    path = checked_path(run_dir / "manifest.json", run_dir)
    try:
        with FileLock(checked_path(run_dir / ".manifest.lock", run_dir)):
            try:
                data = json.loads(path.read_text()) if path.exists() else {"steps": []}
            except ValueError:
                # Never drop what is stored: keep the unreadable file beside the new one.
                path.replace(path.with_name(f"manifest.unreadable-{int(time.time())}.json"))
                data = {"steps": []}
            data["steps"].append(dict(row))
            replace_text(path, json.dumps(data, indent=1, ensure_ascii=False))  # a fresh temp file, never planted
    except OSError as exc:
        raise StoreError(f"cannot write the run's manifest {path}: {exc.strerror or exc}") from None
