"""The CLI child's record and the orphan sweep (issue #26 item 6, `flower.runtime.child`): a CLI whose flower
died is ended before the next step; one whose flower lives, or a process that only has a recorded pid, is not.

A stand-in for the CLI that ignores SIGTERM plays the orphan the kernel's parent-death signal could not end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from flower.agent.events import Event
from flower.runtime import child
from flower.runtime.runtime import Runtime

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX process groups")

STUBBORN = """#!{python}
import pathlib, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path("{ready}").touch()
time.sleep(120)
"""

PARENT = """
import os, subprocess, sys, time
from pathlib import Path
from flower.runtime import child
spawn = child.prepare(Path(sys.argv[1]))
subprocess.Popen([spawn.cli_path, "--verbose"], env={**os.environ, **spawn.env, "FLOWER_CLI_REAL": sys.argv[2]})
time.sleep(120)
"""


def _wait(predicate, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert predicate()


def _records(run_dir: Path) -> list[Path]:
    return sorted((run_dir / child.DIRNAME).glob("*.json"))


def test_an_orphaned_cli_is_ended_and_a_live_flowers_is_left_alone(tmp_path: Path) -> None:
    run_dir, ws = tmp_path / "runs", tmp_path / "ws"
    ws.mkdir()
    stub = tmp_path / "stubborn-cli"
    ready = tmp_path / "ready"
    stub.write_text(STUBBORN.format(python=sys.executable, ready=ready))
    stub.chmod(0o755)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(run_dir), str(stub)])
    orphan: child.Child | None = None
    try:
        _wait(ready.exists)
        (record,) = _records(run_dir)
        orphan = child.Child.load(record)
        assert orphan is not None and orphan.alive() and orphan.parent == parent.pid
        assert orphan.pgid == orphan.pid  # a process group (and session) of its own
        assert json.loads(record.read_text())["cli"] == str(stub)

        assert child.end_orphans(run_dir) == []  # its flower lives: not an orphan
        assert orphan.alive()

        parent.kill()
        parent.wait()
        time.sleep(0.5)
        assert orphan.alive()  # it ignored the parent-death SIGTERM: a real orphan now
        events: list[Event] = []
        Runtime(ws, run_dir=run_dir)._end_orphans(events.append)
        assert not orphan.alive() and _records(run_dir) == []
        assert [e.payload["subtype"] for e in events] == ["orphan"]
        assert f"pid {orphan.pid}" in events[0].text and f"(pid {parent.pid})" in events[0].text
    finally:
        parent.kill()
        if orphan is not None and orphan.alive():
            os.kill(orphan.pid, signal.SIGKILL)


def test_a_recorded_pid_that_is_another_process_now_is_not_signalled(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs"
    (run_dir / child.DIRNAME).mkdir(parents=True)
    other = subprocess.Popen(["sleep", "60"])
    try:
        record = run_dir / child.DIRNAME / "reused.json"
        record.write_text(json.dumps({"pid": other.pid, "pgid": other.pid, "start": "an earlier start",
                                      "host": socket.gethostname(), "parent": 1, "parent_start": "gone"}))
        (orphan,) = child.end_orphans(run_dir)  # its flower is gone, and so is the recorded process
        assert not orphan.ended and orphan.leftover() is None
        assert other.poll() is None and not record.exists()
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()


def test_a_killed_flowers_resume_transcript_is_back_filled_then_removed(tmp_path: Path) -> None:
    """A store-backed resume's CLI writes its transcript to the SDK's temp folder; a killed flower leaves it
    (issue #26, the kill sweep). The next step back-fills what the store lacks and removes the folder (with
    the credentials the SDK copied there); a record naming a folder that is not such a temp one is left be."""
    run_dir, ws = tmp_path / "runs", tmp_path / "ws"
    ws.mkdir()
    runtime = Runtime(ws, run_dir=run_dir)
    key = runtime._key("0b7c4e2a-1f5e-4d8e-9c41-2a1c3e5b7d90")
    temp = tmp_path / "tmp" / "claude-resume-abc123"
    project = temp / "projects" / key["project_key"]
    project.mkdir(parents=True)
    (temp / ".credentials.json").write_text("{}")
    entries = [{"type": "user", "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None,
                "sessionId": key["session_id"], "message": {"role": "user", "content": f"line {i}"}}
               for i in range(3)]
    (project / f"{key['session_id']}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    mine = tmp_path / "configured"
    mine.mkdir()
    (run_dir / child.DIRNAME).mkdir(parents=True)
    for name, config in (("resumed", temp), ("plain", mine)):
        (run_dir / child.DIRNAME / f"{name}.json").write_text(json.dumps({
            "pid": 2**22 + 1, "pgid": 2**22 + 1, "start": "gone", "host": socket.gethostname(), "parent": 1,
            "parent_start": "gone", "config": str(config)}))

    events: list[Event] = []
    anyio.run(runtime._recover, runtime._end_orphans(events.append), events.append)
    stored = anyio.run(runtime.store.load, key) or []
    assert [e["uuid"] for e in stored] == ["u0", "u1", "u2"]
    assert not temp.exists() and mine.is_dir() and _records(run_dir) == []
    assert [(e.payload["subtype"], e.payload.get("entries")) for e in events] == [("backfill", 3)]
