"""A workflow run survives its process (issue #13; L-7, B-13): `flower run` in a subprocess is killed
during step 2 (SIGKILL, or SIGTERM), the same command runs again, and DBOS continues the run: no request for
step 1, step 2 resumes its recorded session, step 3 runs, and the final context equals an uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from flower import texts
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.flowproc import FLOW, finish, flower, outputs, runs_json, session

pytestmark = [pytest.mark.e2e]

@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_killed_in_step_two_then_the_same_command_continues(
    scripted_api: ScriptedAPI, tmp_path: Path, how: signal.Signals
) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    ws, run_dir = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    command = ("run", f"{tmp_path / 'flow.py'}:flow", "-w", str(ws), "-r", str(run_dir))

    # An uninterrupted run of the same workflow, for the final comparison.
    clean_ws, clean_runs = tmp_path / "clean", tmp_path / "clean-runs"
    clean_ws.mkdir()
    scripted_api.script([text("ONE"), text("TWO"), text("THREE")])
    code, _, err = finish(flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(clean_ws), "-r",
                                 str(clean_runs)))
    assert code == 0, err
    before = len(scripted_api.requests)

    scripted_api.script([text("ONE"), tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(60)"'})])
    child = flower(env, *command)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any("STEP-TWO" in r.text for r in scripted_api.requests[before:]):
        time.sleep(0.1)
    (two,) = [r for r in scripted_api.requests[before:] if "STEP-TWO" in r.text]
    time.sleep(2.0)  # the Bash call is sleeping: step 2 is in flight
    if how == signal.SIGKILL:
        os.killpg(child.pid, signal.SIGKILL)
    else:
        os.kill(child.pid, signal.SIGTERM)  # flower alone: its handler records the step, then dies
    child.wait(timeout=30)
    with_signal = -child.returncode
    with pytest.raises(ProcessLookupError):  # nothing of flower's process group is left (issue #26 item 6)
        os.killpg(child.pid, 0)
    assert with_signal == how

    (row,) = runs_json(env, run_dir)
    assert (row["state"], row["done"], row["total"]) == ("interrupted", 1, 3)
    manifest = json.loads((run_dir / "manifest.json").read_text())["steps"]
    if how == signal.SIGTERM:
        assert manifest[-1]["state"] == "interrupted" and manifest[-1]["step"] == "two"
        assert manifest[-1]["session_id"] == session(two) and manifest[-1]["error"] == "killed by SIGTERM"
    else:
        assert [r["step"] for r in manifest] == ["one"]  # SIGKILL: nothing written on the way out

    if how == signal.SIGKILL:  # a copied workspace and run dir start fresh, with a notice, never an error
        copy = tmp_path / "copy"
        shutil.copytree(ws, copy / "ws")
        shutil.copytree(run_dir, copy / "runs")
        scripted_api.script([text("one again"), text("two again"), text("three again")])
        code, _, err = finish(flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(copy / "ws"), "-r",
                                     str(copy / "runs")))
        assert code == 0, err
        assert f"flower: run {row['run_id']} of three-steps belongs to {ws}; starting a fresh run in {copy / 'ws'}" \
            in err.splitlines()
        states = {r["run_id"]: r["state"] for r in runs_json(env, copy / "runs")}
        assert states.pop(row["run_id"]) == "interrupted" and list(states.values()) == ["finished"]

    if how == signal.SIGTERM:  # a copy of the stopped run, cancelled for good: its record stays
        cancelled = tmp_path / "cancelled-runs"
        shutil.copytree(run_dir, cancelled)
        code, out, err = finish(flower(env, "cancel", row["run_id"], "-r", str(cancelled)))
        assert (code, out.strip()) == (0, f"cancelled run {row['run_id']} (it was pending)"), err
        (gone,) = runs_json(env, cancelled)
        assert (gone["state"], gone["done"]) == ("cancelled", 1)

    restart = len(scripted_api.requests)
    scripted_api.script([text("TWO"), text("THREE")])
    code, _, err = finish(flower(env, *command))
    assert code == 0, err
    assert f"continuing run {row['run_id']}" in err
    after = scripted_api.requests[restart:]
    assert not any("STEP-ONE" in r.text for r in after)  # step 1 is replayed from its checkpoint
    assert session(after[0]) == session(two)  # step 2 resumes its own recorded session...
    assert "STEP-TWO" in after[0].text and texts.RESUME_AFTER_CRASH in after[0].last_user_text()
    assert "STEP-THREE: after TWO" in after[1].text and session(after[1]) != session(two)
    assert outputs(run_dir) == outputs(clean_runs) == {"one": "ONE", "two": "TWO", "three": "THREE"}
    (row,) = runs_json(env, run_dir)
    assert (row["state"], row["done"], row["total"]) == ("finished", 3, 3) and row["cost_usd"] > 0


def test_ctrl_c_once_interrupts_the_turn_twice_stops_and_the_run_resumes(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    """Without a terminal, Ctrl-C once interrupts the current turn and the same session continues; a second
    Ctrl-C stops flower with the resume command, and `flower resume RUN` finishes the run (L-7)."""
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    ws, run_dir = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    sleeper = tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(60)"'})
    scripted_api.script([text("ONE"), sleeper, text("TWO after the interrupt"), sleeper])
    child = flower(env, "run", f"{tmp_path / 'flow.py'}:flow", "-w", str(ws), "-r", str(run_dir))

    def wait_for(needle: str, count: int = 1) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and sum(needle in r.last_user_text() for r in scripted_api.requests) < count:
            time.sleep(0.1)
        assert sum(needle in r.last_user_text() for r in scripted_api.requests) >= count, needle

    wait_for("STEP-TWO")
    time.sleep(2.0)
    os.kill(child.pid, signal.SIGINT)  # once: a cooperative interrupt
    wait_for("interrupted on purpose")
    resumed = [r for r in scripted_api.requests if "interrupted on purpose" in r.last_user_text()][0]
    two = [r for r in scripted_api.requests if "STEP-TWO" in r.last_user_text()][0]
    assert session(resumed) == session(two)  # the same session continues
    wait_for("STEP-THREE")
    time.sleep(2.0)
    os.kill(child.pid, signal.SIGINT)
    time.sleep(0.5)
    os.kill(child.pid, signal.SIGINT)  # twice: stop
    code, _, err = finish(child)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)  # a CLI left behind
    assert code == 130, err
    (row,) = runs_json(env, run_dir)
    assert f"Continue it with: flower resume {row['run_id']} -r {run_dir}" in err
    assert (row["state"], row["done"]) == ("interrupted", 2)

    scripted_api.script([text("THREE")])
    code, _, err = finish(flower(env, "resume", row["run_id"], "-r", str(run_dir)))
    assert code == 0, err
    assert outputs(run_dir) == {"one": "ONE", "two": "TWO after the interrupt", "three": "THREE"}
