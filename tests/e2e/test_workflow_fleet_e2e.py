"""A fleet on PostgreSQL (issue #13; L-6, B-13): `flower run --on-workers` fans out 10 agent steps, 2 at a
time, through a DBOS queue; a `flower worker` process takes them (the lead takes none: a worker racing the
lead for a queue's steps could lose every race); the worker is SIGKILLed mid-step and restarted under the same
name; every step completes exactly once to a result and the run finishes. A branch the worker
takes runs under the starter's settings, not the worker's environment (issue #25)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flower import texts
from flower.flow import engine
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.fleet import first_line, flower

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Read"])
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(10)], limit=2)],
               name="fan")
"""


def test_fan_out_over_a_lead_and_a_worker_survives_a_killed_worker(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    lock = threading.Lock()
    seen: dict[str, list[Any]] = {}
    arrived: dict[str, float] = {}

    def handler(request: Any) -> Any:
        (item,) = set(re.findall(r"ITEM-(n\d)", request.text))
        with lock:
            seen.setdefault(item, []).append(request)
            arrived.setdefault(item, time.monotonic())
        return text(f"done {item}", delay=4.0)

    scripted_api.handler = handler
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    ws = tmp_path / "ws"
    ws.mkdir()
    worker_args = ("worker", "--store", database, "--id", "w1", "-r", str(tmp_path / "worker-runs"))
    worker = flower(env, *worker_args)
    assert first_line(worker).startswith("worker w1 on postgresql://postgres@127.0.0.1:5432/flow_fleet_")
    lead = flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(ws), "-r", str(tmp_path / "runs"),
                  "--store", database, "--on-workers")

    client = engine.client(tmp_path / "runs", database)
    try:
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline:
            for child in client.list_workflows(status=["PENDING"], executor_id="w1", load_input=False,
                                               load_output=False):  # DBOS says: the worker runs this step
                item = "n" + child.workflow_id.rsplit("[", 1)[-1].rstrip("]")
                with lock:
                    if time.monotonic() - arrived.get(item, 0) < 1.5:  # and its request just arrived
                        victim = (child.workflow_id, item)
            time.sleep(0.2)
        assert victim is not None, "the worker never took a step"
        time.sleep(0.5)  # its request is being answered: the step is in flight
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        worker = flower(env, *worker_args)  # the same name: DBOS puts its unfinished step back in the queue
        first_line(worker)

        out, err = lead.communicate(timeout=180)
        assert lead.returncode == 0, err

        (run,) = client.list_workflows(name="flower.run")
        ctx = run.output
        assert ctx["each"] == [f"done n{i}" for i in range(10)]  # every result, in order
        assert set(ctx["_ran_by"].values()) == {"w1"}  # the worker ran every step, the victim twice
        branches = client.list_workflows(workflow_id_prefix=f"{run.workflow_id}/", load_output=False)
        assert sorted(b.workflow_id for b in branches) == sorted(f"{run.workflow_id}/each[{i}]" for i in range(10))
        assert all(b.status == "SUCCESS" for b in branches)
        for branch in branches:  # exactly one recorded agent result per step
            steps = client.list_workflow_steps(branch.workflow_id)
            assert [s["function_name"] for s in steps if s["function_name"].startswith("agent:")] == [
                "agent:" + branch.workflow_id.split("/", 1)[1]]
        # the killed step resumed its own session with the resume prompt, once
        first, *later = seen[victim[1]]
        assert later and later[-1].headers.get("x-claude-code-session-id") == first.headers.get(
            "x-claude-code-session-id")
        assert texts.RESUME_AFTER_CRASH in later[-1].last_user_text()
    finally:
        client.destroy()
        for child in (worker, lead):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)


TRAVEL = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Bash"])
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(10)], limit=2)],
               name="travel")
"""


def test_a_branch_the_worker_takes_runs_under_the_starters_settings(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    """The lead's environment sets a 300-char spill threshold and a 30k handoff threshold; the worker is started
    without any FLOWER_* variable (its own defaults would be 4000 chars and 750k tokens). Every branch prints
    1,000 chars: a branch the worker ran spilled them (the model saw the pointer) and its manifest row has the
    starter's thresholds."""
    lock = threading.Lock()
    seen: dict[str, str] = {}

    def handler(request: Any) -> Any:
        (item,) = set(re.findall(r"ITEM-(n\d)", request.text))
        if request.tool_results():
            with lock:
                seen[item] = request.result_text()
            return text(f"done {item}")
        return tool_use("Bash", {"command": f"python3 -c \"print('{item}' * 500)\""}, delay=2.0)

    scripted_api.handler = handler
    (tmp_path / "flow.py").write_text(TRAVEL)
    env = scripted_api.cli_env(tmp_path / "home")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("FLOWER_")}
    worker = subprocess.Popen(
        [sys.executable, "-m", "flower", "worker", "--store", database, "--id", "w1", "-r", str(tmp_path / "w")],
        env={**plain, **env}, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert not any(k.startswith("FLOWER_") for k in env)
    assert first_line(worker).startswith("worker w1 on ")
    ws = tmp_path / "ws"
    ws.mkdir()
    lead = flower({**env, "FLOWER_SPILL_THRESHOLD": "300", "FLOWER_HANDOFF_AT": "30k"},
                  "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(ws), "-r", str(tmp_path / "runs"), "--store", database,
                  "--on-workers")
    client = engine.client(tmp_path / "runs", database)
    try:
        out, err = lead.communicate(timeout=240)
        assert lead.returncode == 0, err
        (run,) = client.list_workflows(name="flower.run")
        assert run.output["each"] == [f"done n{i}" for i in range(10)]
        ran_by: dict[str, str] = run.output["_ran_by"]
        by_worker = sorted(label for label, executor in ran_by.items() if executor == "w1")
        assert len(by_worker) == 10, f"the lead took a branch: {ran_by}"
        rows = {row["step"]: row for row in json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]}
        pointer = re.compile(re.escape(texts.SPILL_POINTER).replace(re.escape("{chars}"), r"[\d,]+")
                             .replace(re.escape("{path}"), r"(\S+)"))
        for label in ran_by:  # every branch the worker ran
            item = "n" + label.rsplit("[", 1)[-1].rstrip("]")
            spilled = pointer.match(seen[item])
            assert spilled, (label, ran_by[label], seen[item][:200])  # the model saw a pointer, not the output
            assert Path(spilled.group(1)).read_text().strip() == item * 500
            assert rows[label]["threshold"] == 30_000, (label, ran_by[label], rows[label]["threshold"])
            assert rows[label]["policies"]["spill_threshold"] == 300
        assert {rows[label]["run_id"] for label in by_worker} == {run.workflow_id}
    finally:
        client.destroy()
        for child in (worker, lead):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)


SEQUENTIAL = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Read"])
seq = Workflow([Step("one", spec, "work on ITEM-n0")], name="seq")
"""


def test_a_run_left_to_workers_says_none_is_alive_then_waits_for_one(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    scripted_api.handler = lambda request: text("done " + re.findall(r"ITEM-(n\d)", request.text)[0])
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    (tmp_path / "ws").mkdir()
    lead = flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(tmp_path / "ws"), "-r", str(tmp_path / "runs"),
                  "--store", database, "--on-workers")
    worker = None
    try:
        said = first_line(lead)
        assert said == "flower: no flower worker is alive on this store: the parallel steps wait for one\n", said
        time.sleep(3)
        assert scripted_api.requests == [] and lead.poll() is None  # nothing runs the steps meanwhile
        worker = flower(env, "worker", "--store", database, "--id", "w1", "-r", str(tmp_path / "w"))
        out, err = lead.communicate(timeout=180)
        assert lead.returncode == 0, err
        client = engine.client(tmp_path / "runs", database)
        try:
            (run,) = client.list_workflows(name="flower.run")
        finally:
            client.destroy()
        assert set(run.output["_ran_by"].values()) == {"w1"} and len(run.output["_ran_by"]) == 10
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        (tmp_path / "seq.py").write_text(SEQUENTIAL)  # no parallel step: nothing to wait for, nothing said
        alone = flower(env, "run", f"{tmp_path / 'seq.py'}:seq", "-w", str(tmp_path / "ws"), "-r",
                       str(tmp_path / "runs"), "--store", database, "--on-workers")
        out, err = alone.communicate(timeout=120)
        assert alone.returncode == 0 and "worker" not in err, err
    finally:
        for child in (worker, lead):
            if child is not None and child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)
