"""Back-filling a store from the CLI's own transcript: no acknowledged entry is missing from the store.

The SDK mirrors each transcript frame to the store in the background; a batch its attempts cannot deliver
(a store locked or unreachable for a while) is dropped with a `mirror_error` message, and the run goes on.
The CLI's local JSONL (`<CLAUDE_CONFIG_DIR>/projects/<project-key>/<session-id>.jsonl`, and the subagents'
`<session-id>/subagents/agent-<id>.jsonl`) still holds every entry. `backfill` appends to the store each
entry of those files whose uuid the store lacks, in the file's order.

Invariants:
- Nothing stored is changed: entries only go through the store's `append`, which skips stored uuids.
- Only entries with a uuid are back-filled (the others cannot be told apart from stored ones), and never the
  `api-request*` lines, which the SDK never mirrors.
- An entry a store's `load()` hands out but never stored (a rewrite's synthetic result, which a resumed
  session's materialized transcript carries) is not back-filled: the stored history stays the CLI's own.
- A torn last line (a writer killed mid-line) is skipped, not fatal.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from claude_agent_sdk.types import SessionKey, SessionStore, SessionStoreEntry

from flower.stores.rewrite import RewritingSessionStore

__all__ = ["backfill", "projects_dir", "transcript_files"]

_NEVER_MIRRORED = ("api-request", "api-request-blob", "api-request-shape")


def projects_dir(env: Mapping[str, str]) -> Path:
    """The CLI's projects folder under the effective `CLAUDE_CONFIG_DIR` (`env` first, then this process's)."""
    config = env.get("CLAUDE_CONFIG_DIR") or os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(config) if config else Path.home() / ".claude") / "projects"


def transcript_files(projects: Path, key: SessionKey) -> list[tuple[str | None, Path]]:
    """The session's main transcript (subpath None) and its subagents' (subpath `subagents/agent-<id>`)."""
    folder = projects / key["project_key"]
    found: list[tuple[str | None, Path]] = []
    main = folder / f"{key['session_id']}.jsonl"
    if main.is_file():
        found.append((None, main))
    session_dir = folder / key["session_id"]
    subagents = session_dir / "subagents"
    if subagents.is_dir():
        for path in sorted(subagents.rglob("agent-*.jsonl")):
            if path.is_file() and not path.is_symlink():
                found.append((path.relative_to(session_dir).with_suffix("").as_posix(), path))
    return found


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The mirrorable entries of one JSONL transcript that carry a uuid, in order."""
    entries: list[dict[str, Any]] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a torn line: its writer died mid-line, nothing of it was acknowledged
            if isinstance(entry, dict) and isinstance(entry.get("uuid"), str) \
                    and entry.get("type") not in _NEVER_MIRRORED:
                entries.append(entry)
    return entries


async def _uuids(store: SessionStore, key: SessionKey) -> set[str]:
    return {e["uuid"] for e in await store.load(key) or [] if isinstance(e, Mapping) and isinstance(e.get("uuid"), str)}


async def _missing(store: SessionStore, key: SessionKey, entries: list[dict[str, Any]]) -> list[SessionStoreEntry]:
    """The entries whose uuid the store holds not, nor hands out in its rewritten copy (checked only when
    something is missing: one plain load in the common case)."""
    base = store.base if isinstance(store, RewritingSessionStore) else store
    stored = await _uuids(base, key)
    missing = [e for e in entries if e["uuid"] not in stored]
    if missing and base is not store:
        handed = await _uuids(store, key)
        missing = [e for e in missing if e["uuid"] not in handed]
    return missing  # type: ignore[return-value]


async def backfill(store: SessionStore, projects: Path, key: SessionKey) -> dict[str, int]:
    """Append to `store` every entry of the session's local transcripts it lacks; how many, per file
    (`main` or the subpath). Store errors propagate (the caller decides whether to wait and try again)."""
    added: dict[str, int] = {}
    for subpath, path in transcript_files(projects, key):
        target: SessionKey = {**key, "subpath": subpath} if subpath else {**key}
        missing = await _missing(store, target, read_entries(path))
        if missing:
            await store.append(target, missing)
            added[subpath or "main"] = len(missing)
    return added
