"""A fleet worker killed for good does not stall the run (issue #26 item 3; B-13).

`flower run --on-workers` fans out 6 agent steps, 2 at a time, over two `flower worker` processes on
PostgreSQL (w2 starts once w1 holds a step, so that w1 cannot lose every race for one). Worker w1 is SIGKILLed
while it holds a step and never comes back. While it is silent,
`flower runs` names it, the step it holds and its last heartbeat; after its heartbeat timeout a live
process has DBOS recover its pending work, and every step finishes, the killed one on another process.
"""

from __future__ import annotations

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

from flower.flow import engine
from flower.testing import ScriptedAPI, text
from tests.support.fleet import first_line, flower

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Read"])
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(6)], limit=2)],
               name="fan")
"""
TIMEOUT = 20  # the workers' heartbeat timeout, seconds


def test_a_worker_killed_for_good_is_named_then_its_steps_finish_elsewhere(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    lock = threading.Lock()
    arrived: dict[str, float] = {}

    def handler(request: Any) -> Any:
        (item,) = set(re.findall(r"ITEM-(n\d)", request.text))
        with lock:
            arrived.setdefault(item, time.monotonic())
        return text(f"done {item}", delay=3.0)

    scripted_api.handler = handler
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    ws = tmp_path / "ws"
    ws.mkdir()
    runs = tmp_path / "runs"
    workers = {}

    def start(name: str) -> None:
        workers[name] = flower(env, "worker", "--store", database, "--id", name, "--heartbeat-timeout", str(TIMEOUT),
                               "-r", str(tmp_path / f"{name}-runs"))
        assert first_line(workers[name]).startswith(f"worker {name} on ")

    start("w1")
    lead = flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(ws), "-r", str(runs), "--store", database,
                  "--on-workers")
    client = engine.client(runs, database)
    try:
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline:
            for child in client.list_workflows(status=["PENDING"], executor_id="w1", load_input=False,
                                               load_output=False):  # DBOS says: w1 runs this step
                item = "n" + child.workflow_id.rsplit("[", 1)[-1].rstrip("]")
                with lock:
                    if item in arrived:  # and its request reached the API: the step is in flight
                        victim = child.workflow_id.split("/", 1)[1]
            time.sleep(0.2)
        assert victim is not None, "w1 never took a step"
        start("w2")
        os.killpg(workers["w1"].pid, signal.SIGKILL)  # for good: it never comes back
        workers["w1"].wait(timeout=30)
        killed = time.monotonic()

        time.sleep(12)  # silent past two beats, not yet past its timeout
        shown = subprocess.run([sys.executable, "-m", "flower", "runs", "-r", str(runs), "--store", database],
                               env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert time.monotonic() - killed < TIMEOUT, "too slow to look while w1 still holds its step"
        (line,) = [line for line in shown.stdout.splitlines() if "stalled" in line]
        assert re.search(rf"{re.escape(victim)}.* held by worker w1, last heartbeat \d+ s ago "
                         rf"\(its steps go back to the queue after {TIMEOUT} s\)", line), line

        out, err = lead.communicate(timeout=150)  # no stall: the live processes released w1's step
        assert lead.returncode == 0, err
        (run,) = client.list_workflows(name="flower.run")
        assert run.output["each"] == [f"done n{i}" for i in range(6)]  # every result, in order
        ran_by: dict[str, str] = run.output["_ran_by"]
        assert ran_by[victim] == "w2"  # the killed step finished elsewhere (the lead takes none)
        branches = client.list_workflows(workflow_id_prefix=f"{run.workflow_id}/", load_output=False)
        assert sorted(b.status for b in branches) == ["SUCCESS"] * 6
        after = subprocess.run([sys.executable, "-m", "flower", "runs", "-r", str(runs), "--store", database],
                               env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        assert "stalled" not in after.stdout and "finished" in after.stdout
    finally:
        client.destroy()
        for child in (*workers.values(), lead):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)
