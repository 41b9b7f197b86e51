"""The Claude Code CLI child of a session: its own process group, ended by flower on every exit path.

The SDK spawns the CLI itself and offers no hook to set up the child, so on POSIX the session hands it a
`cli_path` that is a two-line shell script running `flower.runtime._cli_launch` (see there: `setsid`, on
Linux `PR_SET_PDEATHSIG`, a record of the process in the run dir, then `exec` of the real CLI, same pid).
A CLI that outlives flower goes on with its tool call and makes one or two more paid API calls, in the
workspace and session a re-run continues (issue #26 item 6); these are the ways it cannot:

- normal end and exceptions: the SDK's `disconnect()`; then `forget` drops the record;
- a cancelled attempt (`flower cancel`, Ctrl-C twice): `end` at once (SIGTERM to the group, SIGKILL after
  a grace), rather than the SDK's seconds of waiting on a CLI that still works;
- SIGTERM / SIGHUP of flower (`flower.flow.signals`) and interpreter exit (atexit): `end_mine`;
- SIGKILL of flower: the kernel's parent-death signal (Linux); elsewhere, and as a second line, the next
  flower on the run dir ends the recorded orphan before it runs a step (`end_orphans`), after checking it
  is still that process (pid and start time) and that the flower that started it is gone.

A store-backed resume's CLI writes its transcript to the SDK's temp config folder (`claude-resume-*`), which
the SDK removes at the session's end; a killed flower leaves it, with entries the store may lack. The record
names the folder (`Child.config`) so the next flower can back-fill the store from it and remove it
(`Child.leftover`).

Invariants: only a process whose pid and start time match its record is signalled; a record of a live
flower (this process or another) is never touched; nothing here raises on a process already gone.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import claude_agent_sdk

from flower.runtime._cli_launch import started

__all__ = ["Child", "Spawn", "end", "end_mine", "end_orphans", "forget", "prepare", "running"]

GRACE = 3.0
"""Seconds a CLI gets after SIGTERM (it ends its tool commands and exits in well under one) before SIGKILL."""
DIRNAME = "children"
"""The run dir's folder of records (and the launcher script)."""
RESUME_PREFIX = "claude-resume-"
"""The SDK's temp config folders for store-backed resumes (`tempfile.mkdtemp(prefix=...)`)."""

_MINE: set[Path] = set()
"""The records of the CLI children this process started and has not ended."""


@dataclass(frozen=True)
class Child:
    """A CLI process as its launcher recorded it."""

    pid: int
    pgid: int
    start: str | None
    host: str
    parent: int
    parent_start: str | None
    path: Path
    """The record file."""
    config: str | None = None
    """The CLI's `CLAUDE_CONFIG_DIR` (where its transcript went)."""
    ended: bool = False
    """`end_orphans` found it running and ended it."""

    @classmethod
    def load(cls, path: Path) -> Child | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            config = data.get("config")
            return cls(int(data["pid"]), int(data["pgid"]), data.get("start"), str(data.get("host", "")),
                       int(data["parent"]), data.get("parent_start"), path,
                       config if isinstance(config, str) and config else None)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # not written yet, or not ours: left alone

    def alive(self) -> bool:
        """The recorded process runs still (same pid, same start time)."""
        return self.start is not None and started(self.pid) == self.start

    def owner_alive(self) -> bool:
        """The flower process that started it runs still."""
        return self.parent_start is not None and started(self.parent) == self.parent_start

    def leftover(self) -> Path | None:
        """The temp config folder of a store-backed resume this CLI wrote its transcript to, when it is still
        there (the SDK removes it at a session's end; a killed flower cannot). Only the SDK's own
        `claude-resume-*` folders count: a configured `CLAUDE_CONFIG_DIR` is never one."""
        if self.config is None:
            return None
        folder = Path(self.config)
        if not folder.name.startswith(RESUME_PREFIX) or folder.is_symlink() or not folder.is_dir():
            return None
        return folder


@dataclass(frozen=True)
class Spawn:
    """What a session hands the SDK so the CLI starts under the launcher."""

    cli_path: str
    env: dict[str, str]
    record: Path


def _real_cli() -> str | None:
    """The CLI the SDK would run: the bundled one, else `claude` on PATH."""
    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return str(bundled) if bundled.is_file() else shutil.which("claude")


def _launcher(folder: Path) -> Path:
    """The shell script that runs the launcher with this interpreter (written once, atomically)."""
    script = folder / "launch-cli"
    module = Path(__file__).with_name("_cli_launch.py")
    text = f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -I -S {shlex.quote(str(module))} \"$@\"\n"
    with contextlib.suppress(OSError):
        if script.read_text(encoding="utf-8") == text:
            return script
    tmp = folder / f".launch-cli.{os.getpid()}.{secrets.token_hex(3)}"
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    os.replace(tmp, script)
    return script


def prepare(run_dir: Path) -> Spawn | None:
    """The launcher set up for one CLI child, its record registered as this process's (None where it
    cannot apply: not POSIX, or no CLI found, which the SDK then reports itself)."""
    real = _real_cli()
    if os.name != "posix" or real is None:
        return None
    folder = run_dir / DIRNAME
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / f"{secrets.token_hex(8)}.json"
    env = {"FLOWER_CLI_REAL": real, "FLOWER_CLI_RECORD": str(record), "FLOWER_CLI_PARENT": str(os.getpid())}
    _MINE.add(record)
    return Spawn(str(_launcher(folder)), env, record)


def forget(record: Path) -> None:
    """The child of this record has ended: drop the record."""
    _MINE.discard(record)
    with contextlib.suppress(OSError):
        record.unlink()


def _signal_group(child: Child, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pgid, sig)


def end(child: Child, grace: float = GRACE) -> bool:
    """End the recorded CLI and its process group: SIGTERM, then SIGKILL after `grace` seconds. False when
    the recorded process had already ended (nothing signalled)."""
    if not child.alive():
        forget(child.path)
        return False
    _signal_group(child, signal.SIGTERM)
    if not _ended(child, grace):
        _signal_group(child, signal.SIGKILL)
        _ended(child, 1.0)  # the kernel takes a moment to make it a zombie
    forget(child.path)
    return True


def _ended(child: Child, within: float) -> bool:
    deadline = time.monotonic() + within
    while child.alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not child.alive()


def end_record(record: Path, grace: float = GRACE) -> bool:
    """`end` the child of a record this process made (False: none recorded or already gone)."""
    child = Child.load(record)
    if child is None:
        forget(record)
        return False
    return end(child, grace)


def end_mine(grace: float = GRACE) -> int:
    """End every CLI child this process started and has not ended; how many were running."""
    return sum(end_record(record, grace) for record in list(_MINE))


def end_orphans(run_dir: Path) -> list[Child]:
    """End the CLI processes recorded in `run_dir` whose flower died (a kill -9 where the kernel could not
    end them); drop their records. Every orphan found, `ended` when it was still running."""
    folder = run_dir / DIRNAME
    if not folder.is_dir():
        return []
    ended = []
    host = socket.gethostname()
    for path in sorted(folder.glob("*.json")):
        child = Child.load(path)
        if child is None or path in _MINE or child.host != host or child.owner_alive():
            continue
        ended.append(replace(child, ended=end(child)))
    return ended



def running(run_dir: Path) -> list[Child]:
    """The CLI processes recorded in `run_dir` that run still on this host (a step of some flower is live)."""
    folder = run_dir / DIRNAME
    host = socket.gethostname()
    found = [Child.load(path) for path in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return [c for c in found if c is not None and c.host == host and c.alive()]


atexit.register(end_mine)
