"""A fleet worker whose link to PostgreSQL is cut does not stall the run, and does no harm when the link comes
back (issue #26 item 3; B-13).

`flower run --on-workers` fans out 6 agent steps, 2 at a time, over two `flower worker` processes on
PostgreSQL (the lead takes none: with three processes polling one queue, w1 could lose every race for a
step). Worker w1 reaches the database through a TCP proxy the test runs; w2 starts once w1 holds a step
(its tool call runs). Then the test cuts w1's link: nothing passes, nothing is closed, as in a network partition.
While it is cut, `flower runs` names w1, the step it holds and its last heartbeat; after w1's heartbeat
timeout a live process has DBOS recover the step, which finishes on another process, resuming its session.
w1 itself stops the step once its lease ran out (no beat landed for its timeout less one beat interval),
its tool call and CLI end with it, so it makes no late API call; when the link comes back it records nothing
(the step's output is the one the other process recorded, once) and goes on as a worker. Cut off again, it
exits within seconds of a SIGTERM.
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
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.fleet import first_line, flower
from tests.support.tcpproxy import TcpProxy

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Bash"])
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(6)], limit=2)],
               name="fan")
"""
TOOL = """\
import os, sys, time
from pathlib import Path

here = Path(__file__).parent
held = here / f"held-{sys.argv[1]}"
if os.environ.get("FLEET_NAME") == "w1":
    try:  # the first call on w1 waits until the test lets it end
        os.rename(here / "hold", held)
        held.write_text(str(os.getpid()))
    except FileNotFoundError:
        pass
    deadline = time.monotonic() + 100  # within the CLI's 120 s Bash timeout
    while held.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
else:
    time.sleep(3)  # the others take a while, so that w1 gets a step too
print("slept", sys.argv[1])
"""
TIMEOUT = 20  # w1's heartbeat timeout, seconds


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_worker_cut_off_from_the_database_is_replaced_and_its_late_result_is_dropped(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    lock = threading.Lock()
    arrived: dict[str, float] = {}
    answers: dict[str, list[str]] = {}

    def handler(request: Any) -> Any:
        (item,) = set(re.findall(r"ITEM-(n\d)", request.text))
        with lock:
            arrived.setdefault(item, time.monotonic())
        results = request.result_text()
        if not request.tool_results():
            return tool_use("Bash", {"command": f"python3 {tmp_path / 'tool.py'} {item}", "description": "work"})
        answer = f"done {item}" + ("" if "slept" in results else " resumed")
        with lock:
            answers.setdefault(item, []).append(answer)
        return text(answer)

    scripted_api.handler = handler
    (tmp_path / "flow.py").write_text(FLOW)
    (tmp_path / "tool.py").write_text(TOOL)
    (tmp_path / "hold").touch()
    env = scripted_api.cli_env(tmp_path / "home")
    ws = tmp_path / "ws"
    ws.mkdir()
    runs = tmp_path / "runs"
    proxy = TcpProxy(("127.0.0.1", 5432))
    cut_dsn = database.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    workers = {
        "w1": flower({**scripted_api.cli_env(tmp_path / "home-w1"), "FLEET_NAME": "w1"}, "worker", "--store",
                     cut_dsn, "--id", "w1", "--heartbeat-timeout", str(TIMEOUT), "-r", str(tmp_path / "w1-runs")),
    }
    assert first_line(workers["w1"]).startswith("worker w1 on ")
    lead = flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(ws), "-r", str(runs), "--store", database,
                  "--on-workers")
    client = engine.client(runs, database)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("held-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        (held,) = tmp_path.glob("held-*")  # w1's tool call runs now, and waits
        while not held.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        workers["w2"] = flower(env, "worker", "--store", database, "--id", "w2", "-r", str(tmp_path / "w2-runs"))
        assert first_line(workers["w2"]).startswith("worker w2 on ")
        tool = int(held.read_text())
        item = held.name.split("-", 1)[1]
        (pending,) = [c.workflow_id for c in client.list_workflows(status=["PENDING"], executor_id="w1",
                                                                   load_input=False, load_output=False)
                      if c.workflow_id.endswith(f"[{item[1:]}]")]
        victim = pending
        proxy.partition()
        cut = time.monotonic()

        time.sleep(12)  # silent past two beats, not yet past its timeout
        shown = subprocess.run([sys.executable, "-m", "flower", "runs", "-r", str(runs), "--store", database],
                               env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert time.monotonic() - cut < TIMEOUT + 2, "too slow to look while w1 still holds its step"
        stalled = [line for line in shown.stdout.splitlines() if "stalled" in line]
        assert len(stalled) == 1, shown.stdout
        assert re.search(rf"{re.escape(victim.split('/', 1)[1])}.* held by worker w1, last heartbeat \d+ s ago",
                         stalled[0]), stalled[0]

        out, err = lead.communicate(timeout=150)  # no stall: w1's step was released and finished elsewhere
        assert lead.returncode == 0, err
        (run,) = client.list_workflows(name="flower.run")
        assert run.output["each"] == [f"done n{i}" for i in range(6)]
        assert run.output["_ran_by"][victim.split("/", 1)[1]] not in ("w1", "?")
        assert set(run.output["_ran_by"].values()) == {"w1", "w2"}  # --on-workers: the lead took none

        (branch,) = client.list_workflows(workflow_ids=[victim])
        recorded = branch.output
        assert not _running(tool), "w1's tool call goes on after its step was released"

        proxy.heal()  # the link is back
        time.sleep(TIMEOUT / 2)  # w1 had every chance to go on with its step and record a late result
        assert answers[item] == [f"done {item}"]  # w1 stopped its step: no late turn
        (run,) = client.list_workflows(name="flower.run")
        assert run.output["each"][int(item[1:])] == f"done {item}"  # the run's output stands
        (branch,) = client.list_workflows(workflow_ids=[victim])
        assert (branch.status, branch.output) == ("SUCCESS", recorded)  # recorded once, not overwritten
        steps = client.list_workflow_steps(victim)
        assert [s["function_name"] for s in steps].count(f"agent:each[{item[1:]}]") == 1
        assert workers["w1"].poll() is None, "w1 died instead of going on"

        proxy.partition()  # cut off again, w1 is stopped: it exits at once instead of waiting on the database
        time.sleep(12)
        os.killpg(workers["w1"].pid, signal.SIGTERM)
        asked = time.monotonic()
        _, said = workers["w1"].communicate(timeout=60)
        assert time.monotonic() - asked < 8, said[-2000:]
        assert "worker w1: stopped while cut off from the database" in said, said[-2000:]
        assert re.search(r"worker w1: no heartbeat landed for \d+ s \(its timeout is 20 s\): its steps may run "
                         r"elsewhere now; stopped the [12] it ran", said), [x for x in said.splitlines() if "w1" in x]
    finally:
        proxy.heal()
        client.destroy()
        for child in (*workers.values(), lead):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)
        proxy.close()
