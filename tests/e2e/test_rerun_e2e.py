"""The same command after a run ended never starts it over silently, nor after its records were lost (issue
#26 item 4; L-7): one line says what was found, nothing is run, and `--new` starts a fresh run. Real `flower`
processes, the real CLI, real DBOS, the scripted fake API.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from flower.testing import ScriptedAPI, text, tool_use
from tests.support.flowproc import FLOW, finish, flower, runs_json, wait_for_request

pytestmark = [pytest.mark.e2e]


def _setup(tmp_path: Path, scripted_api: ScriptedAPI) -> tuple[dict[str, str], tuple[str, ...], Path]:
    (tmp_path / "flow.py").write_text(FLOW)
    ws, run_dir = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    command = ("run", f"{tmp_path / 'flow.py'}:flow", "-w", str(ws), "-r", str(run_dir))
    return scripted_api.cli_env(tmp_path / "home"), command, run_dir


def test_a_finished_run_is_not_run_again_and_new_starts_over(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    env, command, run_dir = _setup(tmp_path, scripted_api)
    scripted_api.script([text("ONE"), text("TWO"), text("THREE")])
    code, _, err = finish(flower(env, *command))
    assert code == 0, err
    (first,) = runs_json(env, run_dir)
    seen = len(scripted_api.requests)

    code, out, err = finish(flower(env, *command))
    assert (code, out) == (0, "")
    assert err.splitlines() == [f"flower: run {first['run_id']} of three-steps has already finished: nothing to "
                                "continue (flower run --new starts a fresh run)"]
    assert len(scripted_api.requests) == seen and len(runs_json(env, run_dir)) == 1

    scripted_api.script([text("ONE again"), text("TWO again"), text("THREE again")])
    code, _, err = finish(flower(env, *command, "--new"))
    assert code == 0, err
    assert [r["state"] for r in runs_json(env, run_dir)] == ["finished", "finished"]
    assert "STEP-ONE" in scripted_api.requests[seen].text


def test_a_lost_write_ahead_log_is_said_not_started_over(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """SIGKILL leaves the newest DBOS records in dbos.sqlite-wal; without that file the database does not know
    the run, but its lock file and manifest rows say it was there."""
    env, command, run_dir = _setup(tmp_path, scripted_api)
    scripted_api.script([text("ONE"), tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(60)"'})])
    child = flower(env, *command)
    wait_for_request(scripted_api, "STEP-TWO")
    (row,) = runs_json(env, run_dir)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    for side in ("dbos.sqlite-wal", "dbos.sqlite-shm"):
        (run_dir / side).unlink()
    with contextlib.closing(sqlite3.connect(run_dir / "dbos.sqlite")) as db:  # the database lost the run
        tables = {name for (name,) in db.execute("select name from sqlite_master where type='table'")}
        assert "workflow_status" not in tables or not db.execute(
            "select 1 from workflow_status where workflow_uuid = ?", (row["run_id"],)).fetchall()
    seen = len(scripted_api.requests)

    code, _, err = finish(flower(env, *command))
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith(f"flower: {run_dir} holds run {row['run_id']} with 1 recorded step(s) (one) ")
    assert "does not know it" in line and line.endswith("Not starting a fresh run that would repeat its steps: "
                                                        "--new starts one")
    assert len(scripted_api.requests) == seen

    scripted_api.script([text("ONE"), text("TWO"), text("THREE")])
    code, _, err = finish(flower(env, *command, "--new"))
    assert code == 0, err
    assert [r["state"] for r in runs_json(env, run_dir)] == ["finished"]
    assert not (run_dir / "locks" / f"{row['run_id']}.lock").exists()  # --new acknowledged the lost run
