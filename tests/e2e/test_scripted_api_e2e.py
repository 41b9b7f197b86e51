"""The scripted API drives the real bundled CLI through the real SDK (issue #2, B-8,
docs/sdk-notes.md#threads-on-the-wire, #session-stores, #errors-and-interrupts).

Nothing is mocked: each test spawns the CLI, which talks HTTP to `flower.testing.ScriptedAPI`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AgentDefinition,
    ClaudeAgentOptions,
    HookMatcher,
    InMemorySessionStore,
    ResultMessage,
)

from flower.testing import Drop, ScriptedAPI, api_error, collect, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_text_only_reply(scripted_api: ScriptedAPI, make_options) -> None:
    scripted_api.script([text("HELLO-FROM-SCRIPT")])
    run = await collect("say hello", make_options())
    assert run.result.result == "HELLO-FROM-SCRIPT"
    assert run.result.is_error is False
    (request,) = scripted_api.requests
    assert request.thread == "main" and request.stream
    assert "say hello" in request.last_user_text()


async def test_bash_runs_for_real_and_its_output_is_in_the_next_request(
    scripted_api: ScriptedAPI, make_options, workspace: Path
) -> None:
    (workspace / "marker.txt").write_text("MARKER-CONTENT-42\n")
    scripted_api.script([tool_use("Bash", {"command": "cat marker.txt", "description": "read marker"}), text("ok")])
    run = await collect("read the marker", make_options(allowed_tools=["Bash"]))
    assert run.result.result == "ok"
    first, second = scripted_api.requests
    assert "MARKER-CONTENT-42" not in first.text
    assert "MARKER-CONTENT-42" in second.result_text()
    assert second.chars > first.chars


async def test_subagent_requests_are_told_apart_and_hooks_see_agent_id(
    scripted_api: ScriptedAPI, make_options
) -> None:
    seen: list[dict[str, Any]] = []

    async def record(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append(dict(input_data))
        return {}

    scripted_api.script(
        [
            tool_use("Agent", {"description": "echo job", "prompt": "SUBTASK-ECHO: run echo",
                               "subagent_type": "worker", "run_in_background": False}),
            text("main done"),
        ],
        subagents={"SUBTASK-ECHO": [tool_use("Bash", {"command": "echo from-sub"}), text("sub report: from-sub")]},
    )
    worker = AgentDefinition(description="runs commands", prompt="You run commands.", tools=["Bash"])
    options = make_options(agents={"worker": worker}, allowed_tools=["Bash", "Agent"],
                           hooks={"PreToolUse": [HookMatcher(matcher=None, hooks=[record])]})
    run = await collect("delegate it", options)
    assert run.result.result == "main done"
    (agent_id,) = scripted_api.subagent_ids
    sub = scripted_api.subagent_requests(agent_id)
    assert len(sub) == 2 and "SUBTASK-ECHO" in sub[0].text and "from-sub" in sub[1].result_text()
    assert "sub report: from-sub" in scripted_api.main_requests[-1].result_text()
    by_tool = {h["tool_name"]: h for h in seen}
    assert "agent_id" not in by_tool["Agent"]
    assert by_tool["Bash"]["agent_id"] == agent_id and by_tool["Bash"]["agent_type"] == "worker"


async def test_overloaded_529_is_retried_by_the_cli_then_succeeds(scripted_api: ScriptedAPI, make_options) -> None:
    scripted_api.script([api_error(529), text("after overload")])
    run = await collect("go", make_options())
    assert run.result.result == "after overload" and not run.result.is_error
    assert len(scripted_api.requests) == 2
    assert not any("529" in str(m) for m in run.messages if isinstance(m, ResultMessage))


async def test_dropped_stream_is_retried_then_succeeds(scripted_api: ScriptedAPI, make_options) -> None:
    scripted_api.script([Drop(after_events=3), text("after drop")])
    run = await collect("go", make_options())
    assert run.result.result == "after drop"
    assert len(scripted_api.requests) == 2


class _CorruptingStore(InMemorySessionStore):
    """A store whose load() hands back a broken history: the ids of every tool call are made invalid."""

    async def load(self, key):  # type: ignore[no-untyped-def]
        entries = await super().load(key)
        if not entries:
            return entries
        entries = copy.deepcopy(entries)
        for entry in entries:
            for block in (entry.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    block["id"] = block["id"].replace("_", " ")
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    block["tool_use_id"] = block["tool_use_id"].replace("_", " ")
        return entries


async def test_broken_history_resumed_through_a_store_is_rejected_like_the_real_api(
    tmp_path: Path, workspace: Path
) -> None:
    store = _CorruptingStore()
    api = ScriptedAPI([tool_use("Bash", {"command": "echo one"}), text("first done"), text("never sent")])
    api.start()
    try:
        env = api.cli_env(tmp_path / "home")
        base: dict[str, Any] = dict(cwd=str(workspace), env=env, allowed_tools=["Bash"], setting_sources=[],
                                    session_store=store)
        first = await collect("first", ClaudeAgentOptions(**base))
        second = await collect("second", ClaudeAgentOptions(**base, resume=first.session_id))
    finally:
        api.stop()
    assert first.result.result == "first done"
    assert second.result.is_error
    assert "tool_use.id: String should match pattern" in (second.result.result or "")
    assert api.failures and all("should match pattern" in f for f in api.failures)
    assert api.remaining() == {"main": 1}
    with pytest.raises(Exception, match="should match pattern"):
        api.assert_done()
