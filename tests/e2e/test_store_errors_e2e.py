"""A stored row that cannot be read makes a resume fail at once, not after retries (issue #16 items 11-12, S-18).

The SDK wraps a failing `SessionStore.load()` in a RuntimeError during resume materialization; the runtime
sees the StoredDataError under it and gives up on the first attempt with the one-line message.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flower.agent.spec import AgentSpec
from flower.runtime.resilience import RetryPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_a_non_json_row_fails_the_resume_at_once(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = scripted_api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="1")
    runtime = Runtime(ws, run_dir=tmp_path / "runs", env=env,
                      resilience=RetryPolicy(max_attempts=4, base=0.05, cap=0.1, probe_timeout=5))
    spec = AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Read"])
    scripted_api.script([text("first")])
    first = await runtime.run(spec, "hello")
    assert first.ok and first.session_id
    with sqlite3.connect(tmp_path / "runs" / "sessions.db") as conn:
        (seq,) = conn.execute("SELECT MAX(seq) FROM entries").fetchone()
        conn.execute("UPDATE entries SET payload = '{torn' WHERE seq = ?", (seq,))
    asked = len(scripted_api.main_requests)
    resumed = await runtime.run(spec, "more", resume=first.session_id)
    assert not resumed.ok and resumed.attempts == 1 and resumed.retries == ()
    assert resumed.error is not None and f"row {seq} is not JSON" in resumed.error
    assert len(scripted_api.main_requests) == asked  # the CLI never started a turn
