"""`flower run --model M --budget B` on PostgreSQL with a separate `flower worker` (issue #25): a branch of a
fan-out step that the worker takes runs on the starter's model (the scripted API records each request's model)
and under the starter's budget (the Claude Code CLI stops its query past it), though the worker was started
without any FLOWER_* variable and the workflow's file names neither."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from flower.flow import engine
from flower.testing import ScriptedAPI, Usage, text, tool_use
from tests.support.fleet import first_line, flower

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

MODEL = "claude-opus-4-5"
"""Not the Claude Code CLI's default: a request on it came from the flag."""
PINNED = "claude-haiku-4-5"
FLOW = """\
from flower import AgentSpec, Step, Workflow, parallel

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Read"])
pinned = AgentSpec(name="pinned", instructions="You check one item.", allowed_tools=["Read"], model="%s")
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(6)], limit=2,
                     on_fail="continue"),
                parallel(Step("a", pinned, "check ITEM-p0"), Step("b", pinned, "check ITEM-p1"), limit=2)],
               name="flags")
""" % PINNED
ENOUGH = 4
"""Requests after which the scripted API ends an item's query itself: reached only if no budget stopped it."""


def test_a_branch_the_worker_takes_runs_with_the_starters_model_and_budget(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    """Each reply of an `each` item costs $1 at the flag's model's price, over the $0.25 budget: the CLI stops
    the query after its first reply, in the lead's branches and the worker's alike. The pinned steps keep
    their own model and end by themselves."""
    lock = threading.Lock()
    seen: dict[str, list[str]] = {}

    def handler(request: Any) -> Any:
        (item,) = set(re.findall(r"ITEM-(\w\d)", request.text))
        with lock:
            seen.setdefault(item, []).append(str(request.body.get("model")))
            count = len(seen[item])
        if item.startswith("p"):
            return text(f"checked {item}", delay=1.0)
        if count >= ENOUGH:
            return text(f"unbounded {item}")
        return tool_use("Read", {"file_path": "x"}, usage=Usage(input_tokens=200_000), delay=2.0)

    scripted_api.handler = handler
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    assert not any(k.startswith("FLOWER_") for k in env)
    worker = flower(env, "worker", "--store", database, "--id", "w1", "-r", str(tmp_path / "w"))
    assert first_line(worker).startswith("worker w1 on ")
    ws = tmp_path / "ws"
    ws.mkdir()
    lead = flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(ws), "-r", str(tmp_path / "runs"),
                  "--store", database, "--model", MODEL, "--budget", "0.25", "--on-workers")
    client = engine.client(tmp_path / "runs", database)
    try:
        out, err = lead.communicate(timeout=240)
        assert lead.returncode == 0, err
        (run,) = client.list_workflows(name="flower.run")
        ran_by: dict[str, str] = run.output["_ran_by"]
        by_worker = sorted(label for label, executor in ran_by.items() if executor == "w1")
        assert {ran_by.get(f"each[{i}]") for i in range(6)} == {"w1"}, ran_by  # --on-workers: the lead took none
        rows = {row["step"]: row for row in json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]}
        for i in range(6):  # every branch of the fan-out: the flag's model, stopped by the flag's budget
            label = f"each[{i}]"
            assert seen[f"n{i}"] and set(seen[f"n{i}"]) == {MODEL}, (label, ran_by.get(label), seen[f"n{i}"])
            assert len(seen[f"n{i}"]) < ENOUGH, (label, ran_by.get(label), seen[f"n{i}"])
            assert not rows[label]["ok"] and "Reached maximum budget ($0.25)" in rows[label]["error"], (
                label, ran_by.get(label), rows[label]["error"])
        for item, label in (("p0", "a"), ("p1", "b")):  # a spec that names a model keeps it
            assert set(seen[item]) == {PINNED} and rows[label]["ok"], (label, ran_by.get(label), seen[item])
        assert {rows[label]["run_id"] for label in by_worker} == {run.workflow_id}
    finally:
        client.destroy()
        for child in (worker, lead):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)
