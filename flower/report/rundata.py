"""Reading a run back from disk for `flower report`, `preview` and `sessions`.

A run is a run dir (`manifest.json`, `sessions.db`) or any session store (`--store`, a SQLite path or a
`postgresql://` DSN), plus the workbench the runtime used. Everything here only reads; the analysis is pure
and lives in `flower.report.analysis` / `flower.report.preview`.

Invariants:
- Opening a store for reading never creates one: a missing SQLite file is a `StoreError` naming it.
- Sessions come in manifest order (each step's retired generations, then its session), then those of the
  manifest's session rows no step row names (a killed process's), then any other main session of the same
  projects in the run dir's own store, oldest first.
- Main and subagent transcripts come from the store's key structure: the main key has no subpath, each
  subagent is a subkey (`subagents/agent-<id>`).
- The workbench is the one the manifest names; when it names none, `<workspace>/.flower` with the
  workspace taken from the `cwd` the CLI stamped on the stored entries (never guessed from the run dir).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from claude_agent_sdk.types import SessionKey, SessionStore

from flower.errors import ConfigError
from flower.runtime.steps import read_manifest, read_session_rows
from flower.stores.jsonl import decode_line
from flower.stores.opening import (  # re-exported: the readers' one way to open a store
    StoreReader,
    close_store,
    open_store,
)
from flower.workbench.bench import strip_listing

if TYPE_CHECKING:
    from flower.workbench.stats import WorkbenchStats

__all__ = [
    "RunData",
    "close_store",
    "last_session",
    "load_run",
    "load_session",
    "open_store",
    "read_manifest",
    "read_session_rows",
    "resolve_session",
    "row_sessions",
    "session_rows",
    "strip_listing",
]

Entry = dict[str, Any]


def last_session(run_dir: Path, workspace: Path, agent: str) -> str | None:
    """The session `agent` (a spec's name) last ended with in `workspace`, by the run dir's manifest, whose
    rows are appended as steps end: what `-c/--continue` resumes. None when it has none there."""
    where = workspace.resolve()
    for row in reversed(read_manifest(run_dir if run_dir.is_dir() else None)):
        session, place = row.get("session_id"), row.get("workspace")
        if row.get("step") == agent and isinstance(session, str) and session and isinstance(place, str) \
                and Path(place).resolve() == where:
            return session
    return None


def row_sessions(row: Mapping[str, Any]) -> list[str]:
    """The sessions a step row names: its retired generations, then its last."""
    retired = row.get("retired")
    ids = [*(retired if isinstance(retired, list) else []), row.get("session_id")]
    return [s for s in ids if isinstance(s, str) and s]


@dataclass
class RunData:
    """One run (or one session) as stored: transcripts by key, manifest rows, workbench records."""

    label: str
    run_dir: Path | None
    steps: list[dict[str, Any]]
    started: list[dict[str, Any]] = field(default_factory=list)
    """The manifest's session rows: each session (and each resume of one) as it started, with its step."""
    main: dict[str, list[Entry]] = field(default_factory=dict)
    """Main transcripts by session id, in run order."""
    keys: dict[str, SessionKey] = field(default_factory=dict)
    subagents: dict[str, list[Entry]] = field(default_factory=dict)
    """Subagent transcripts by agent id."""
    parents: dict[str, str] = field(default_factory=dict)
    """The main session each subagent transcript (by its key in `subagents`) is stored under."""
    retired: set[str] = field(default_factory=set)
    workspace: Path | None = None
    workbench_root: Path | None = None
    workbench_source: str = "none"
    """`manifest`, `cwd` (fallback: `<cwd of the entries>/.flower`) or `none`."""
    spill_log: list[dict[str, Any]] = field(default_factory=list)
    cost_usd: float | None = None
    cache_costs: list[dict[str, Any]] = field(default_factory=list)
    """What each refresh and handoff paid at its first request (the manifest rows' `cache_costs`)."""


def _agent_label(subpath: str, taken: Mapping[str, Any], session: str) -> str:
    name = subpath.rsplit("/", 1)[-1]
    name = name.removeprefix("agent-")
    return name if name not in taken else f"{session[:8]}/{name}"


def _load_key(store: StoreReader, key: SessionKey) -> list[Entry]:
    entries: Sequence[object] = store.load_sync(key) or []
    # A stored row that is JSON but not an object (a broken writer) carries nothing a report counts; the
    # rewrite passes such rows through untouched, so leaving them out changes no number (issue #16 item 11).
    return [entry for entry in entries if isinstance(entry, dict)]


def _add_session(data: RunData, store: StoreReader, session: str) -> bool:
    key = store.find_session(session)
    if key is None:
        return False
    data.keys[session] = key.copy()
    data.main[session] = _load_key(store, key.copy())
    for subpath in anyio.run(store.list_subkeys, key.copy()):
        label = _agent_label(subpath, data.subagents, session)
        data.subagents[label] = _load_key(store, {**key, "subpath": subpath})
        data.parents[label] = session
    return True


def _project_keys(store: SessionStore, data: RunData) -> list[str]:
    keys = {key["project_key"] for key in data.keys.values()}
    listed = getattr(store, "project_keys", None)  # optional: a store that can list its projects
    if callable(listed):
        keys.update(listed())
    if data.workspace is not None:
        from claude_agent_sdk import project_key_for_directory

        keys.add(project_key_for_directory(str(data.workspace)))
    return sorted(keys)


def _other_sessions(store: SessionStore, data: RunData) -> list[str]:
    found: list[tuple[int, str]] = []
    for project in _project_keys(store, data):
        for item in anyio.run(store.list_sessions, project):
            if item["session_id"] not in data.main:
                found.append((int(item.get("mtime") or 0), item["session_id"]))
    return [session for _, session in sorted(found)]


def _locate_workbench(data: RunData) -> None:
    if data.workbench_source != "none":
        return
    for row in reversed(data.steps):
        for name, attr in (("workspace", "workspace"), ("workbench", "workbench_root")):
            if isinstance(row.get(name), str) and getattr(data, attr) is None:
                setattr(data, attr, Path(row[name]))
    if data.workbench_root is not None:
        data.workbench_source = "manifest"
        return
    if data.workspace is None:
        cwd = next(
            (e["cwd"] for entries in data.main.values() for e in entries if isinstance(e.get("cwd"), str)),
            None,
        )
        data.workspace = Path(cwd) if cwd else None
    if data.workspace is not None:
        data.workbench_root, data.workbench_source = data.workspace / ".flower", "cwd"


def _read_spill_log(root: Path | None) -> list[dict[str, Any]]:
    if root is None:
        return []
    try:
        lines = (root / "spill" / "log.jsonl").read_bytes().split(b"\n")
    except (FileNotFoundError, NotADirectoryError):
        return []
    records = []
    for number, line in enumerate(lines):
        text, problem = decode_line(line, first=number == 0)  # per line: one bad byte costs one line
        if problem is not None or not text.strip():
            continue
        try:
            record = json.loads(text)
        except ValueError:
            continue  # a torn line from a killed writer: skip it, keep the rest
        if isinstance(record, dict):
            records.append(record)
    return records


def _finish(data: RunData) -> RunData:
    _locate_workbench(data)
    data.spill_log = _read_spill_log(data.workbench_root)
    loaded = set(data.main)
    rows = [row for row in data.steps if row_sessions(row) and set(row_sessions(row)) <= loaded]
    costs = [row["cost_usd"] for row in rows if isinstance(row.get("cost_usd"), (int, float))]
    data.cost_usd = float(sum(costs)) if costs else None
    for row in data.steps:
        data.retired.update(s for s in (row.get("retired") or []) if isinstance(s, str))
        costs_of = row.get("cache_costs")
        data.cache_costs.extend(c for c in (costs_of if isinstance(costs_of, list) else []) if isinstance(c, dict))
    return data


def load_run(run_dir: Path, store: StoreReader, *, own_store: bool) -> RunData:
    """Every session of a run dir; `own_store` when the store is the run dir's own file (then sessions
    missing from the manifest, e.g. of a killed process, are included too)."""
    if not run_dir.is_dir():
        raise ConfigError(f"run dir {run_dir} is not a directory")
    data = RunData(str(run_dir), run_dir, read_manifest(run_dir), read_session_rows(run_dir))
    for row in data.steps:
        for session in row_sessions(row):
            if session not in data.main:
                _add_session(data, store, session)
    for started in data.started:  # sessions whose step never ended (a killed process's)
        if started["session_id"] not in data.main:
            _add_session(data, store, started["session_id"])
    if own_store:
        _locate_workbench(data)
        for session in _other_sessions(store, data):
            _add_session(data, store, session)
    if not data.main:
        raise ConfigError(f"no sessions found for run dir {run_dir}")
    return _finish(data)


def resolve_session(store: SessionStore, ref: str, run_dir: Path | None = None, workspace: Path | None = None) -> str:
    """The full session id `ref` names: itself, or the one stored session id it is a prefix of (the
    8-character ids tables show). An unknown id or an ambiguous prefix is a `ConfigError` naming the
    candidates."""
    ref = ref.strip()
    if not ref:
        raise ConfigError("empty session id")
    find = getattr(store, "find_session", None)
    if callable(find) and find(ref) is not None:
        return ref
    steps = read_manifest(run_dir) if run_dir is not None and run_dir.is_dir() else []
    data = RunData("sessions", run_dir, steps, workspace=workspace)
    known = {s for row in steps for s in row_sessions(row)}
    for project in _project_keys(store, data):
        known.update(item["session_id"] for item in anyio.run(store.list_sessions, project))
    matches = sorted(s for s in known if s.startswith(ref))
    if callable(find):
        matches = [s for s in matches if find(s) is not None]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigError(f"unknown session {ref} in {_describe(store)}")
    shown = ", ".join(matches[:6]) + (f" and {len(matches) - 6} more" if len(matches) > 6 else "")
    raise ConfigError(f"session prefix {ref} is ambiguous: {shown}")


def load_session(session: str, store: StoreReader, run_dir: Path | None) -> RunData:
    """One session and its subagents (manifest rows from `run_dir` when it has one); `session` may be a
    unique prefix of the id."""
    session = resolve_session(store, session, run_dir)
    rows = read_manifest(run_dir) if run_dir is not None and run_dir.is_dir() else []
    started = [row for row in read_session_rows(run_dir if run_dir is not None and run_dir.is_dir() else None)
               if row["session_id"] == session]
    data = RunData(session, run_dir, [row for row in rows if session in row_sessions(row)], started)
    if not _add_session(data, store, session):
        raise ConfigError(f"unknown session {session} in {_describe(store)}")
    return _finish(data)


def _describe(store: SessionStore) -> str:
    path = getattr(store, "path", None)
    return str(path) if path is not None else type(store).__name__


def session_rows(store: StoreReader, run_dir: Path | None, workspace: Path | None) -> list[dict[str, Any]]:
    """One row per main session the store holds for the run's projects: id, project, mtime, manifest step."""
    steps = read_manifest(run_dir) if run_dir is not None and run_dir.is_dir() else []
    data = RunData("sessions", run_dir, steps, workspace=workspace)
    for row in steps:
        for session in row_sessions(row):
            key = store.find_session(session)
            if key is not None:
                data.keys[session] = key.copy()
    rows: list[dict[str, Any]] = []
    for project in _project_keys(store, data):
        for item in anyio.run(store.list_sessions, project):
            sid = item["session_id"]
            step = next((r for r in steps if sid in row_sessions(r)), None)
            rows.append(
                {
                    "session_id": sid,
                    "project_key": project,
                    "mtime": item.get("mtime"),
                    "step": step.get("step") if step else None,
                    "ok": step.get("ok") if step else None,
                    "cost_usd": step.get("cost_usd") if step else None,
                    "retired": bool(step and sid in (step.get("retired") or [])),
                }
            )
    rows.sort(key=lambda r: (r["mtime"] or 0, r["session_id"]))
    return rows


def first_prompt(entries: Sequence[Entry]) -> str:
    """The user's first prompt in a transcript (the first user entry with string content, without the
    workbench listing in front of it), or ""."""
    for entry in entries:
        message = entry.get("message")
        if (
            entry.get("type") == "user"
            and isinstance(message, Mapping)
            and isinstance(message.get("content"), str)
        ):
            return strip_listing(str(message["content"]))
    return ""


# --- what the commands load -----------------------------------------------------------------------


def load_target(target: str, store: str | None, run_dir: str) -> tuple[StoreReader, RunData]:
    path = Path(target)
    if path.is_dir():
        base = open_store(store, path)
        return base, load_run(path, base, own_store=store is None)
    if path.exists():
        raise ConfigError(f"{target} is a file, not a run dir or a session id")
    if os.sep in target or target.startswith("."):
        raise ConfigError(f"run dir {target} does not exist")
    if not store and not (Path(run_dir) / "sessions.db").is_file():
        # Name what the user gave: no such run dir, and no store to look the name up as a session id.
        raise ConfigError(f"{target} is neither a run dir nor a session: no directory {target}, and no "
                          f"session store at {Path(run_dir) / 'sessions.db'} to look it up in")
    base = open_store(store, Path(run_dir))
    return base, load_session(target, base, Path(run_dir))


def workbench_stats_of(data: RunData) -> WorkbenchStats | None:
    root = data.workbench_root
    if root is None or not root.is_dir():
        return None
    from flower.workbench.bench import Workbench
    from flower.workbench.stats import workbench_stats

    workspace = data.workspace if data.workspace is not None else root.parent
    return workbench_stats(Workbench(workspace, root=root), [*data.main.values(), *data.subagents.values()])


def recorded_threshold(data: RunData, window: int | None) -> int | None:
    if window is not None:
        from flower.runtime.handoff import HandoffPolicy

        return HandoffPolicy(window=window).threshold()
    recorded = [row.get("threshold") for row in data.steps if isinstance(row.get("threshold"), int)]
    return recorded[-1] if recorded else None
