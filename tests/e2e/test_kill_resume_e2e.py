"""SIGKILL of the whole flower process while a worker runs, then a resume through the store (issue #6, S-18, L-2).

The store must hold every entry the CLI wrote to its own local transcript (eager flush), and the resumed
session must be accepted by the strict fake: the dangling Agent call is healed on the way out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from claude_agent_sdk import project_key_for_directory

from flower.agent.roles import coordinator, worker
from flower.runtime.runtime import Runtime
from flower.stores.sqlite import SqliteSessionStore
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CHILD = """
import sys, anyio
from flower.agent.roles import coordinator, worker
from flower.runtime.runtime import Runtime
import json
env = json.loads(sys.argv[3])
spec = coordinator("lead", "Goal: run the long job.", {"runner": worker("runs long jobs", "You run jobs.")})
rt = Runtime(sys.argv[1], run_dir=sys.argv[2], env=env)
rt.run_sync(spec, "run the long job")
"""


def _local_uuids(config_dir: Path) -> set[str]:
    uuids = set()
    for path in (config_dir / "projects").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("uuid") and not str(entry.get("type", "")).startswith("api-request"):
                uuids.add(entry["uuid"])
    return uuids


async def test_killed_mid_worker_then_resumed_through_the_store(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script(
        [tool_use("Agent", {"description": "long job", "prompt": "LONG-JOB: sleep", "subagent_type": "runner",
                            "run_in_background": False}),
         text("resumed and finished")],
        subagents={"LONG-JOB": [tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(60)"'})]},
    )
    home, run_dir = tmp_path / "home", tmp_path / "runs"
    env = scripted_api.cli_env(home)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(workspace), str(run_dir), json.dumps(env)],
                             start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not scripted_api.subagent_requests() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scripted_api.subagent_requests(), "the worker never started"
    time.sleep(2.0)  # the worker's Bash is now sleeping; every entry so far has been mirrored
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=10)

    with SqliteSessionStore(run_dir / "sessions.db") as store:
        (summary,) = await store.list_sessions(project_key_for_directory(workspace))
        session_id = summary["session_id"]
        key = store.find_session(session_id)
        assert key is not None
        stored = {e["uuid"] for e in store.load_sync(key) or [] if e.get("uuid")}
        for sub in await store.list_subkeys(key):
            stored |= {e["uuid"] for e in store.load_sync({**key, "subpath": sub}) or [] if e.get("uuid")}
    local = _local_uuids(home / ".claude")
    assert local and local <= stored, f"missing from the store: {sorted(local - stored)[:5]}"

    spec = coordinator("lead", "Goal: run the long job.", {"runner": worker("runs long jobs", "You run jobs.")})
    rt = Runtime(workspace, run_dir=run_dir, env=env)
    result = await rt.run(spec, "continue", resume=session_id)
    assert result.ok and result.text == "resumed and finished", result.error
    assert result.session_id == session_id
