"""Rewind: fork a run's session at a message and put the files back as they were then (`flower rewind`,
`Runtime.rewind`).

A point to rewind to is a main-thread message after which the conversation can go on: a prompt, the main
thread's prose, or a tool call's result (for a dispatch: the worker's reply). Points are numbered from 1
over the run's sessions in run order; a point is named by that number, by its entry's uuid (or a unique
prefix of it), or by a step name (the first prompt of its first attempt, or of its first fan-out item: the
start of the step).

Invariants:
- The original session is never changed: the fork is a new session appended to the store (the SDK's
  `fork_session_via_store`, fresh uuids, `forkedFrom` stamped), built from the raw stored entries up to and
  including the chosen one, and recorded in the manifest under the step's name, so `-c/--continue` goes on
  from it.
- Files changed after the point (by the main thread or any worker) are put back from the run dir's file
  checkpoints (`flower.runtime.checkpoints`); what they held before the rewind is recorded there first.
- Bad input (an unknown number, uuid or step, a message that is not a point, a run dir without
  checkpoints, a run dir where a step is running) is a `ConfigError` of one line, raised before anything
  is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from claude_agent_sdk import fork_session_via_store
from claude_agent_sdk.types import SessionKey, SessionStore

from flower import texts
from flower.errors import ConfigError
from flower.runtime import child
from flower.runtime.checkpoints import FileCheckpoints, Restored, parse_time
from flower.runtime.steps import append_manifest
from flower.stores.scoped import ProjectScopedStore
from flower.workbench.bench import strip_listing

__all__ = ["Point", "Rewound", "choose", "points", "rewind"]

Entry = Mapping[str, Any]
_RUNTIME_TEXTS = tuple(t[:40] for t in (texts.HANDOFF_REQUEST, texts.HANDOFF_RETRY, texts.RESUME_AFTER_ERROR,
                                         texts.RESUME_AFTER_LIMIT, texts.RESUME_AFTER_INTERRUPT,
                                         texts.RESUME_AFTER_CRASH)) + (texts.HANDOFF_CONTINUE.split("{", 1)[0],)
_INPUT_KEYS = ("description", "command", "file_path", "notebook_path", "path", "pattern", "url", "query")


@dataclass(frozen=True)
class Point:
    """A message of the main thread the run can be rewound to."""

    index: int
    """From 1, over the run's sessions in run order."""
    session: str
    uuid: str
    """The stored entry kept last."""
    time: str
    """Its timestamp (ISO, UTC): files go back to how they were then."""
    who: str
    """`you` (a prompt), `runtime` (a prompt flower wrote: handoff, resume), `main` (prose, a tool's result)."""
    text: str
    """One line: what the message says."""
    step: str | None = None


@dataclass(frozen=True)
class Rewound:
    """What a rewind did."""

    point: Point
    session: str
    """The new session: the history up to the point."""
    files: tuple[Restored, ...]


def _line(text: str) -> str:
    return " ".join(text.split())


def _summary(block: Mapping[str, Any]) -> str:
    name, data = str(block.get("name") or "?"), block.get("input")
    if isinstance(data, Mapping):
        if name in ("Agent", "Task"):
            return f"{data.get('subagent_type') or 'general-purpose'}: {_line(str(data.get('description') or ''))}"
        for key in _INPUT_KEYS:
            if isinstance(data.get(key), str):
                return f"{name}: {_line(str(data[key]))}"
    return name


def _prompt(content: Any) -> str | None:
    """A user message's prompt text, or None when it carries tool results."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(isinstance(b, Mapping) and b.get("type") == "text"
                                                      for b in content):
        return "\n".join(str(b.get("text") or "") for b in content)
    return None


def _session_points(session: str, entries: Sequence[Entry], step: str | None) -> list[Point]:
    calls: dict[str, str] = {}
    found: list[Point] = []
    for entry in entries:
        message, uuid, when = entry.get("message"), entry.get("uuid"), entry.get("timestamp")
        if not isinstance(message, Mapping) or not isinstance(uuid, str) or not isinstance(when, str):
            continue
        if entry.get("isSidechain") or entry.get("isMeta") or entry.get("isCompactSummary"):
            continue
        content = message.get("content")
        if entry.get("type") == "user":
            said = _prompt(content)
            if said is not None:
                body = strip_listing(said).strip()
                who = "runtime" if body.startswith(_RUNTIME_TEXTS) else "you"
                found.append(Point(0, session, uuid, when, who, _line(body), step))
                continue
            results = [b for b in content or [] if isinstance(b, Mapping) and b.get("type") == "tool_result"]
            if results:
                what = calls.get(str(results[0].get("tool_use_id")), "a tool")
                found.append(Point(0, session, uuid, when, "main", f"after {what}", step))
        elif entry.get("type") == "assistant" and message.get("model") != "<synthetic>":
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, Mapping):
                    continue
                if block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = _summary(block)
                elif block.get("type") == "text" and str(block.get("text") or "").strip():
                    found.append(Point(0, session, uuid, when, "main", _line(str(block["text"])), step))
                    break
    return found


def _base(label: str) -> str:
    """A step's name from an attempt's label (`fix#retry2`, `fix#round2`, `scan[3]`: `fix`, `fix`, `scan`)."""
    return label.split("#", 1)[0].split("[", 1)[0]


def _step_of(session: str, steps: Sequence[Mapping[str, Any]]) -> str | None:
    for row in steps:
        if session == row.get("session_id") or session in (row.get("retired") or []):
            return str(row.get("step"))
    return None


def points(sessions: Mapping[str, Sequence[Entry]], steps: Sequence[Mapping[str, Any]] = ()) -> list[Point]:
    """The points of a run's main transcripts (by session id, in run order), numbered from 1."""
    found = [p for session, entries in sessions.items()
             for p in _session_points(session, entries, _step_of(session, steps))]
    return [Point(i, p.session, p.uuid, p.time, p.who, p.text, p.step) for i, p in enumerate(found, 1)]


def choose(found: Sequence[Point], to: str, steps: Sequence[Mapping[str, Any]] = (),
           sessions: Mapping[str, Sequence[Entry]] | None = None) -> Point:
    """The point `to` names: a number, a step name (its first prompt) or an entry uuid (a unique prefix)."""
    to = to.strip().lstrip("#")
    if not to:
        raise ConfigError("--to is empty: give a message number, a message uuid or a step name")
    if to.isdigit():
        number = int(to)
        if not 1 <= number <= len(found):
            raise ConfigError(f"no message #{number}: the run has {len(found)} to rewind to (1-{len(found)})")
        return found[number - 1]
    rows = [row for row in steps if _base(str(row.get("step"))) == to and not row.get("rewound_from")]
    if rows:
        row = min(rows, key=lambda r: str(r.get("started") or ""))
        ids = {*(row.get("retired") or []), row.get("session_id")}
        started = parse_time(str(row.get("started") or "1970-01-01T00:00:00+00:00"))
        start = next((p for p in found if p.session in ids and p.who == "you" and parse_time(p.time) >= started),
                     None)
        if start is None:
            raise ConfigError(f"step {to} has no prompt in the store to rewind to")
        return start
    matches = [p for p in found if p.uuid == to] or [p for p in found if len(to) >= 6 and p.uuid.startswith(to)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise ConfigError(f"message prefix {to} is ambiguous: {', '.join(p.uuid for p in matches[:4])}")
    known = any(e.get("uuid") == to for entries in (sessions or {}).values() for e in entries)
    if known:
        raise ConfigError(f"message {to} is not a point to rewind to (a tool call before its result, or an entry "
                          "of the CLI's own); `flower rewind RUN` lists them")
    raise ConfigError(f"no message or step {to} in this run; `flower rewind RUN` lists the points")


async def rewind(run_dir: str | Path, store: SessionStore, keys: Mapping[str, SessionKey],
                 sessions: Mapping[str, Sequence[Entry]], to: str, *,
                 steps: Sequence[Mapping[str, Any]] = (), workspace: str | Path | None = None,
                 workbench: str | Path | None = None, run_id: str | None = None) -> Rewound:
    """Fork the session at the point `to` names into a new session of `store` (the raw store, not a
    rewriting one: the fork copies what is stored) and put the files back as they were then: those inside
    `workspace` or `workbench` (a file elsewhere is left as it is and reported `skipped`). The fork's
    manifest row has `run_id` (default: the run's whose session it forks) and the step's name."""
    checkpoints = FileCheckpoints(run_dir)
    if not checkpoints.exists:
        raise ConfigError(f"run dir {run_dir} has no file checkpoints (its runs predate them): cannot rewind")
    point = choose(points(sessions, steps), to, steps, sessions)
    live = child.running(Path(run_dir))
    if live:
        raise ConfigError(f"a step is running in run dir {run_dir} (Claude Code CLI pid {live[0].pid}): stop it "
                          "before rewinding the files under it")
    if workspace is None:
        raise ConfigError(f"cannot tell the workspace of run dir {run_dir} (no manifest row names it): cannot "
                          "put its files back")
    roots = list(dict.fromkeys(Path(p) for w in (workspace, workbench) if w is not None
                               for p in (Path(w).absolute(), Path(w).resolve())))
    key = keys[point.session]
    scoped = ProjectScopedStore(store, key["project_key"])
    # Files first: the SDK stamps the fork's last entry with the current time, so a later rewind to that
    # entry finds the files as this rewind leaves them.
    files = checkpoints.restore(parse_time(point.time), roots=roots, session=point.session)
    forked = await fork_session_via_store(scoped, point.session, up_to_message_id=point.uuid)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    origin = next((r for r in steps if point.session == r.get("session_id") or point.session in (r.get("retired") or [])),
                  {})
    append_manifest(Path(run_dir), {
        "run_id": run_id or origin.get("run_id") or "rewind", "step": point.step or "rewind", "session_id": forked.session_id, "ok": True,
        "cost_usd": 0.0, "num_turns": 0, "text": "", "error": None, "started": now, "ended": now,
        "retired": [], "workspace": str(workspace), "workbench": str(workbench) if workbench else None,
        "rewound_from": {"session_id": point.session, "message": point.uuid, "index": point.index},
    })
    return Rewound(point, forked.session_id, tuple(files))
