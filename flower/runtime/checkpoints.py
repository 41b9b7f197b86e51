"""File checkpoints: what each file held before an agent (the main thread or any worker) changed it, so a
rewind can put the workspace back as it was at any moment of the run (`flower rewind`).

The CLI's own checkpointing (`enable_file_checkpointing`, `rewind_files`) cannot serve flower: the SDK
refuses it beside a `session_store` (its checkpoints live in the CLI's config dir, which a store-backed
resume replaces with a temporary one each time). So the runtime keeps its own, in the run dir:
`checkpoints/log.jsonl` has one line per change (`time`, `path`, `blob`, `session`, `agent`, `tool`, `call`)
and `checkpoints/blobs/<sha256>` the content the file had just before (`blob` null: it did not exist).

Invariants:
- A PreToolUse hook on Write, Edit, MultiEdit and NotebookEdit records the file before the tool runs, in
  the main thread and in every worker (hooks see subagent tool calls too). Changes made by Bash are not
  recorded, as in the CLI's own checkpointing.
- The state of a file at time `t` is the content recorded by its first change after `t`; a file with no
  change after `t` is as it is now.
- `restore` records each file's current content before it puts the old one back (tool `rewind`), so a later
  rewind to any moment, of the original history or of the fork, finds the right content again.
- Blobs are content-addressed and written atomically; the log is only appended to, one line per write.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from claude_agent_sdk import HookMatcher
from claude_agent_sdk.types import HookContext, HookInput, HookJSONOutput

from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.runtime.layers import Layer, Part
from flower.util.rundir import checked_path

__all__ = ["EDIT_TOOLS", "Checkpoints", "FileCheckpoints", "Restored", "parse_time"]

EDIT_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
"""The tools whose changes are checkpointed."""
_PATH_KEYS = ("file_path", "notebook_path")
_BLOB = re.compile(r"[0-9a-f]{64}")


def parse_time(stamp: str) -> datetime:
    """An ISO timestamp (the CLI's `...Z` or an offset) as an aware datetime; a naive one is UTC."""
    value = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Restored:
    """One file a rewind put back: `action` is `restored` (old content written), `removed` (it did not
    exist then) or `skipped` (outside the workspace and the workbench: left as it is)."""

    path: str
    action: str


class FileCheckpoints:
    """The run dir's file checkpoints."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.folder = self.run_dir / "checkpoints"
        self.log = self.folder / "log.jsonl"

    def ensure(self) -> None:
        """Create the folder and an empty log: from now on this run dir records checkpoints. A symlink on
        the way (a committed `runs/checkpoints` link) is refused before anything is created."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for folder in (self.folder, self.folder / "blobs"):
            checked_path(folder, self.run_dir, directory=True).mkdir(exist_ok=True)
        checked_path(self.log, self.run_dir).touch(exist_ok=True)

    @property
    def exists(self) -> bool:
        return self.log.is_file()

    def record(self, path: str | os.PathLike[str], *, session: str | None = None, agent: str | None = None,
               tool: str = "", call: str | None = None) -> None:
        """Keep what `path` holds now (or that it does not exist), stamped with the current time."""
        target = Path(path)
        try:
            data: bytes | None = target.read_bytes() if target.is_file() else None
        except OSError:
            data = None
        blob = None
        if data is not None:
            blob = hashlib.sha256(data).hexdigest()
            where = checked_path(self.folder / "blobs" / blob, self.run_dir)
            if not where.exists():
                temp = checked_path(where.with_name(f".{blob}.{os.getpid()}.tmp"), self.run_dir)
                temp.write_bytes(data)
                temp.replace(where)
        line = json.dumps({"time": _now(), "path": str(target), "blob": blob, "session": session,
                           "agent": agent, "tool": tool, "call": call}, ensure_ascii=False)
        with open(checked_path(self.log, self.run_dir), "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def records(self) -> list[dict[str, Any]]:
        """The log's lines, oldest first (a torn last line is skipped)."""
        if not self.exists:
            raise ConfigError(f"run dir {self.run_dir} has no file checkpoints (its runs predate them)")
        rows = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("path"), str) and isinstance(row.get("time"), str):
                rows.append(row)
        return rows

    def state_at(self, moment: datetime) -> dict[str, str | None]:
        """The files changed after `moment`, each with the blob it held then (None: it did not exist)."""
        then: dict[str, str | None] = {}
        for row in self.records():
            if parse_time(row["time"]) > moment and row["path"] not in then:
                then[row["path"]] = row.get("blob")
        return then

    def restore(self, moment: datetime, *, roots: Sequence[Path], session: str | None = None) -> list[Restored]:
        """Put every file changed after `moment` back as it was then; each one's current content is
        recorded first. Only files inside `roots` (the workspace, the workbench) are written; one elsewhere
        is `skipped`. Every path is checked before anything is written: a symlink on the way, or a blob the
        log names that is missing, is one error line and nothing changes."""
        plan: list[tuple[Path, str | None]] = []
        skipped: list[Restored] = []
        for path, blob in self.state_at(moment).items():
            target = Path(os.path.normpath(path))
            root = next((r for r in roots if target.is_absolute() and target.is_relative_to(r)), None)
            if root is None:
                skipped.append(Restored(path, "skipped"))
                continue
            if blob is not None and (not _BLOB.fullmatch(blob) or not (self.folder / "blobs" / blob).is_file()):
                raise ConfigError(f"the checkpoint of {path} is missing from {self.folder / 'blobs'}: nothing "
                                  "was restored")
            plan.append((checked_path(target, root), blob))
        done = []
        for target, blob in plan:
            self.record(target, session=session, tool="rewind")
            if blob is None:
                if target.is_file():
                    target.unlink()
                    done.append(Restored(str(target), "removed"))
                continue
            data = (self.folder / "blobs" / blob).read_bytes()
            if target.is_file() and target.read_bytes() == data:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.with_name(f".{target.name}.flower-rewind")
            temp.write_bytes(data)
            temp.replace(target)
            done.append(Restored(str(target), "restored"))
        return done + skipped

    def hook(self) -> HookMatcher:
        """PreToolUse on the edit tools of every thread: record the file before the tool changes it."""

        async def keep(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
            data: Mapping[str, Any] = input_data
            args = data.get("tool_input")
            raw = next((args[k] for k in _PATH_KEYS if isinstance(args, Mapping) and isinstance(args.get(k), str)),
                       None)
            if raw:
                path = Path(raw) if os.path.isabs(raw) else Path(str(data.get("cwd") or ".")) / raw
                self.record(path, session=data.get("session_id"), agent=data.get("agent_id"),
                            tool=str(data.get("tool_name") or ""), call=tool_use_id)
            return {}

        return HookMatcher(matcher="|".join(EDIT_TOOLS), hooks=[keep])


@dataclass(frozen=True)
class Checkpoints(Layer):
    """The layer that records file checkpoints in every session of the run."""

    checkpoints: FileCheckpoints

    def part(self, spec: AgentSpec) -> Part:
        return Part(hooks={"PreToolUse": [self.checkpoints.hook()]})

