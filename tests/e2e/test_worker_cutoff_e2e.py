"""A worker cut off by a transient API failure is noticed and dispatched again (issue #16 item 16, L-4).

The worker's thread gets 529 until the real CLI gives up on it (CLAUDE_CODE_MAX_RETRIES=1: two requests);
the CLI ends the Agent call with "Agent terminated early due to an API error: ..." and would let the run end
ok with the work undone. The runtime records it (an error event, StepResult.errors) and its
PostToolUseFailure hook tells the coordinator to dispatch again; the second worker does the work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AgentDefinition

from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.resilience import RetryPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, api_error, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def dispatch(marker: str) -> Any:
    return tool_use("Agent", {"description": "write the result", "prompt": f"{marker}: write result.txt",
                              "subagent_type": "worker", "run_in_background": False})


async def test_a_worker_cut_off_by_529s_is_reported_and_dispatched_again(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    scripted_api.script(
        [dispatch("WORKER-A"), dispatch("WORKER-A-AGAIN"), text("all done")],
        subagents={
            "WORKER-A": [api_error(529), api_error(529)],  # the CLI's first try and its one retry
            "WORKER-A-AGAIN": [tool_use("Bash", {"command": "echo written > result.txt"}), text("wrote it")],
        },
    )
    env = scripted_api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="1")
    runtime = Runtime(ws, run_dir=tmp_path / "runs", env=env,
                      resilience=RetryPolicy(max_attempts=2, base=0.05, cap=0.1, probe_timeout=5))
    spec = AgentSpec(name="lead", instructions="Delegate the work.", allowed_tools=["Agent"],
                     agents={"worker": AgentDefinition(description="writes files", prompt="You write files.",
                                                       tools=["Bash"])})
    events: list[Event] = []
    result = await runtime.run(spec, "get result.txt written", on_event=events.append)

    assert result.ok and (ws / "result.txt").read_text() == "written\n"  # the work is done after all
    (cut,) = [e for e in events if e.kind == "error" and e.payload.get("subtype") == "worker_cut_off"]
    assert cut.text.startswith("worker cut off (toolu_") and "Agent terminated early" in cut.text
    assert "529" in cut.text
    assert [e for e in result.errors if "Agent terminated early" in e] == [cut.text]
    told = scripted_api.main_requests[1]  # the coordinator's turn after the failed dispatch
    assert "Agent terminated early due to an API error" in told.result_text()
    assert "Dispatch it again with the same prompt" in told.text
