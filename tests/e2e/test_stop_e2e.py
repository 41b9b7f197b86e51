"""A run stops when told and stays stopped, and a flower that dies takes its CLI with it (issue #26 items 5, 6;
L-7). Real `flower` processes, the real CLI, real DBOS, the scripted fake API.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from flower.testing import ScriptedAPI, text, tool_use
from tests.support.flowproc import FLOW, finish, flower, processes_in, runs_json, wait_for_request

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]

SLEEP = 'python3 -c "import time; time.sleep(61)"'
"""Step two's Bash call: it keeps the step in flight far longer than any test waits."""


def _setup(tmp_path: Path, scripted_api: ScriptedAPI) -> tuple[dict[str, str], tuple[str, ...], Path, Path]:
    (tmp_path / "flow.py").write_text(FLOW)
    home, ws, run_dir = tmp_path / "home", tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    command = ("run", f"{tmp_path / 'flow.py'}:flow", "-w", str(ws), "-r", str(run_dir))
    return scripted_api.cli_env(home), command, home, run_dir


def _gone(home: Path, timeout: float = 15) -> list[str]:
    """Waits until no process of the test's HOME is left (or `timeout`); those left."""
    deadline = time.monotonic() + timeout
    while processes_in(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    return processes_in(home)


def _in_step_two(scripted_api: ScriptedAPI) -> None:
    wait_for_request(scripted_api, "STEP-TWO")
    time.sleep(2.0)  # the Bash call is sleeping: step two is in flight


def test_cancel_interrupts_the_step_in_flight_and_is_final(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    env, command, home, run_dir = _setup(tmp_path, scripted_api)
    scripted_api.script([text("ONE"), tool_use("Bash", {"command": SLEEP})])
    child = flower(env, *command)
    _in_step_two(scripted_api)
    (row,) = runs_json(env, run_dir)
    code, out, err = finish(flower(env, "cancel", row["run_id"], "-r", str(run_dir)))
    assert (code, out.strip()) == (0, f"cancelled run {row['run_id']} (it was pending)"), err
    seen = len(scripted_api.requests)

    code, _, err = finish(child, timeout=45)  # well before the 61 s sleep ends: the step was interrupted
    assert code == 1
    assert err.splitlines() == [f"flower: run {row['run_id']} was cancelled; it stays stopped, its finished "
                                "steps stay recorded"], err
    assert _gone(home) == []  # the CLI and its Bash ended with the step
    assert len(scripted_api.requests) == seen  # no request after the cancel: the step did not go on
    (row,) = runs_json(env, run_dir)
    assert (row["state"], row["done"]) == ("cancelled", 1)

    code, _, err = finish(flower(env, "resume", row["run_id"], "-r", str(run_dir)))
    assert (code, err.splitlines()) == (1, [f"flower: run {row['run_id']} was cancelled: a cancelled run stays "
                                            "stopped (flower run --new starts a fresh run)"])
    code, _, err = finish(flower(env, *command))  # nor does running the same command again
    assert (code, err.splitlines()) == (1, [f"flower: run {row['run_id']} of three-steps was cancelled: a cancelled "
                                            "run stays stopped (flower run --new starts a fresh run)"])
    assert len(scripted_api.requests) == seen and [r["state"] for r in runs_json(env, run_dir)] == ["cancelled"]


@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_a_killed_flower_takes_its_cli_with_it(scripted_api: ScriptedAPI, tmp_path: Path, how: str) -> None:
    """Only flower's own pid is signalled (not its process group): nothing is left that calls the API or runs
    the step's Bash, and the same command then continues the run."""
    env, command, home, run_dir = _setup(tmp_path, scripted_api)
    scripted_api.script([text("ONE"), tool_use("Bash", {"command": SLEEP})])
    child = flower(env, *command)
    _in_step_two(scripted_api)
    assert any("time.sleep(61)" in p for p in processes_in(home))
    seen = len(scripted_api.requests)
    os.kill(child.pid, signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
    child.wait(timeout=30)
    try:
        assert _gone(home) == []
        time.sleep(2.0)  # a CLI that survived would have sent its next request by now
        assert len(scripted_api.requests) == seen
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
    scripted_api.script([text("TWO"), text("THREE")])
    code, _, err = finish(flower(env, *command))
    assert code == 0, err
    assert [r["state"] for r in runs_json(env, run_dir)] == ["finished"]


def test_a_killed_flower_once_takes_its_cli_with_it(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """`flower once` has no signal handling of its own: the CLI still ends with it."""
    home = tmp_path / "home"
    env = scripted_api.cli_env(home)
    (tmp_path / "ws").mkdir()
    scripted_api.script([tool_use("Bash", {"command": SLEEP})])
    child = flower(env, "once", "sleep a while", "-t", "Bash", "-w", str(tmp_path / "ws"), "-r",
                   str(tmp_path / "runs"))
    wait_for_request(scripted_api, "sleep a while")
    deadline = time.monotonic() + 60
    while not any("time.sleep(61)" in p for p in processes_in(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    seen = len(scripted_api.requests)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    try:
        assert _gone(home) == []
        time.sleep(2.0)
        assert len(scripted_api.requests) == seen
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)


def test_a_kill_before_the_cli_said_anything_names_no_session(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """flower records a new session's id before its CLI starts; a SIGTERM in that window must not write an
    `interrupted` row naming it (nothing of it is stored), or `flower run -c` would try to resume a session
    that never began."""
    (tmp_path / "spec.py").write_text('from flower import AgentSpec\n'
                                      'agent = AgentSpec(name="agent", instructions="You answer.", tools=["Read"])\n')
    home, ws, run_dir = tmp_path / "home", tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    env = scripted_api.cli_env(home)
    command = ("run", f"{tmp_path / 'spec.py'}:agent", "-w", str(ws), "-r", str(run_dir))
    child = flower(env, *command, "-p", "hi", "--events")
    assert child.stdout is not None
    for line in child.stdout:
        if '"subtype": "session"' in line:
            os.kill(child.pid, signal.SIGTERM)  # the CLI is not even spawned yet
            break
    finish(child, timeout=60)
    assert scripted_api.requests == []
    import json
    (row,) = json.loads((run_dir / "manifest.json").read_text())["steps"]
    assert (row["state"], row["session_id"]) == ("interrupted", None)
    code, _, err = finish(flower(env, *command, "-c", "-p", "more"))
    assert code == 1 and "to continue: run it once without --continue" in err, err
