"""The wall in depth through the real CLI: a glance the judge wrongly allows still cannot act.

The test-only hook is a monkeypatch of the judge (`describe_refusal`), which the wall calls on each Bash
call: for one command the judge says "a glance", as a wrong judge would. The command then runs confined
(`flower.walls.confine`) and must fail to write, to connect to a listener the test runs, and to outlive its
timeout.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

import pytest

import flower.walls.glance.judge as judge
from flower.agent.options import build_options
from flower.agent.roles import coordinator, worker
from flower.testing import ScriptedAPI, collect, text, tool_use
from flower.walls import confine

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
def wrong_judge(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Commands the judge lets through whatever they are."""
    fooled: set[str] = set()
    real = judge.describe_refusal

    def describe(command: str, cwd: str | None = None) -> str | None:
        return None if command in fooled else real(command, cwd)

    monkeypatch.setattr(judge, "describe_refusal", describe)
    return fooled


def _accept(server: socket.socket, accepted: list[object]) -> None:
    """Record a connection, if one comes before the test closes `server` (which ends the wait)."""
    with contextlib.suppress(OSError):
        accepted.append(server.accept())


async def test_a_wrongly_allowed_glance_cannot_write_connect_or_outlive_its_timeout(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, wrong_judge: set[str]
) -> None:
    if confine.mechanism() is None:
        pytest.fail("bubblewrap must work on the test machine (.ci/run installs it)")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[object] = []
    threading.Thread(target=_accept, args=(listener, accepted), daemon=True).start()
    unix_path = str(tmp_path / "agent.sock")  # a socket outside the masked folders, as an agent's would be
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    unix.listen()
    threading.Thread(target=_accept, args=(unix, accepted), daemon=True).start()
    marker = workspace / "marker"
    loop_marker = tmp_path / "still-running"
    commands = [
        f"touch {marker}",
        f"echo hi > /dev/tcp/127.0.0.1/{port}",
        f"for i in $(seq 600); do sleep 1; done; echo done > {loop_marker}",
        f"python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{unix_path}\")'",
    ]
    wrong_judge.update(commands)
    calls = [{"command": commands[0]}, {"command": commands[1]}, {"command": commands[2], "timeout": 4000},
             {"command": commands[3]}]
    scripted_api.script([*[tool_use("Bash", c) for c in calls], text("looked")])
    lead = coordinator("lead", "Goal: look around.", {"hands": worker("does the work", "You work.")})
    options = build_options(lead, cwd=workspace)
    options.env = scripted_api.cli_env(tmp_path / "home")
    started = time.monotonic()
    run = await collect("go", options)
    assert run.result.result == "looked"
    results = [scripted_api.main_requests[i].result_text() for i in (1, 2, 3, 4)]
    assert not marker.exists() and "Read-only file system" in results[0]
    assert accepted == [] and ("Connection refused" in results[1] or "Network is unreachable" in results[1])
    assert "stopped after 3.0s" in results[2] and "background" not in results[2].lower()
    assert time.monotonic() - started < 300  # the loop did not run its ten minutes
    assert "Operation not permitted" in results[3]
    listener.close()
    unix.close()
    # control: outside the wall the same commands do act
    import subprocess
    subprocess.run(["bash", "-c", commands[0]], check=True)
    assert marker.exists()
    probe = socket.socket(socket.AF_UNIX)
    probe.bind(unix_path + "2")
    probe.listen()
    subprocess.run(["bash", "-c", commands[3].replace("agent.sock", "agent.sock2")], check=True)
    probe.close()


async def test_without_a_sandbox_only_the_fallback_programs_run(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confine, "mechanism", lambda: None)
    (workspace / "a.txt").write_text("alpha\n")
    calls = [{"command": "cat a.txt"}, {"command": "grep alpha a.txt"}]
    scripted_api.script([*[tool_use("Bash", c) for c in calls], text("looked")])
    lead = coordinator("lead", "Goal: look around.", {"hands": worker("does the work", "You work.")})
    options = build_options(lead, cwd=workspace)
    options.env = scripted_api.cli_env(tmp_path / "home")
    await collect("go", options)
    results = [scripted_api.main_requests[i].result_text() for i in (1, 2)]
    assert "alpha" in results[0]
    assert "no sandbox for glances" in results[1] and "`grep`" in results[1]
