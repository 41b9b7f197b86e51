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
        assert child.end_orphans(run_dir) == []
        assert other.poll() is None and not record.exists()
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
