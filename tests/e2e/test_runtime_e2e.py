"""The Runtime through the real CLI: generations, compaction switches, resilience, interrupts (issue #6).

The fake's usage numbers drive the main-thread context (S-24); its errors and outages drive L-4.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flower.agent.compact import CompactPolicy
from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.resilience import RetryPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, Usage, api_error, prompt_too_long, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

HANDOFF_DOC = (
    "## Doing\nPorting the parser.\n## Decided\nKeep SQLite, because PLANTED-DECISION-77 (no server to run).\n"
    "## Dead ends\nRegex parsing: fails on nesting.\n## Next\n1. Finish the lexer.\n## Scene\nsrc/parser.py"
)
FAST = RetryPolicy(max_attempts=4, base=0.05, cap=0.2, probe_timeout=30)


def solo(**kwargs: Any) -> AgentSpec:
    return AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash", "Read"], **kwargs)


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path, **kwargs: Any) -> Runtime:
    env = api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="1")
    kwargs.setdefault("resilience", FAST)
    return Runtime(workspace, run_dir=tmp_path / "runs", env=env, **kwargs)


async def test_crossing_the_threshold_hands_over_to_a_new_generation(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """S-22, S-24: the same session writes the handoff; generation 2 starts from it."""
    scripted_api.script([
        tool_use("Bash", {"command": "echo one"}, usage=Usage(input_tokens=40_000)),
        tool_use("Bash", {"command": "echo near"}, usage=Usage(input_tokens=135_000)),
        tool_use("Bash", {"command": "echo two"}, usage=Usage(input_tokens=100_000, cache_read_input_tokens=60_000)),
        text(HANDOFF_DOC, usage=Usage(input_tokens=170_000)),
        text("generation two finished", usage=Usage(input_tokens=5_000)),
    ])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    events: list[Event] = []

    def record(event: Event) -> None:
        events.append(event)
        raise RuntimeError("a broken UI callback")  # L-3: must not kill the run

    result = await rt.run(solo(), "port the parser", on_event=record)

    assert result.ok and result.text == "generation two finished"
    assert result.contexts == (40_000, 135_000, 160_000, 5_000) and result.context == 5_000
    warnings = [e for e in events if e.payload.get("subtype") == "context_warning"]
    assert [w.payload["context"] for w in warnings] == [135_000]  # once, 20k before the 150k threshold
    (retired,) = result.retired
    assert retired != result.session_id and result.attempts == 2
    (path,) = result.handoffs
    assert Path(path) == workspace / ".flower" / "notes" / "handoff-solo.md"
    assert "PLANTED-DECISION-77" in Path(path).read_text()
    asked, first_of_gen2 = scripted_api.requests[3], scripted_api.requests[4]
    assert "Your context is nearly full" in asked.last_user_text()
    assert "PLANTED-DECISION-77" in first_of_gen2.last_user_text()
    assert len(first_of_gen2.messages) < len(asked.messages)  # a fresh session, not a continuation
    assert first_of_gen2.system_text == asked.system_text  # B-3: identical system prompt across generations
    assert [e.kind for e in events].count("handoff") == 1
    assert result.num_turns >= 3 and result.cost_usd > 0
    manifest = json.loads((tmp_path / "runs" / "manifest.json").read_text())
    assert manifest["steps"][-1]["retired"] == [retired]


@pytest.mark.parametrize(("handoff", "compact", "expected"), [
    (True, None, "DISABLE_AUTO_COMPACT=1"),
    (False, None, "DISABLE_AUTO_COMPACT=unset"),
    (False, CompactPolicy("off"), "DISABLE_COMPACT=1"),
])
async def test_compaction_switches_reach_the_cli_process(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, handoff: bool, compact: Any, expected: str
) -> None:
    """S-23: generations force no_summary unless the spec sets compact; handoff=False leaves the CLI alone."""
    name = expected.split("=")[0]
    command = f'echo {name}=${{{name}:-unset}}'
    scripted_api.script([tool_use("Bash", {"command": command}), text("ok")])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=handoff)
    result = await rt.run(solo(compact=compact), "show env")
    assert result.ok
    assert expected in scripted_api.requests[1].result_text()


async def test_overload_beyond_the_cli_retries_is_resumed_in_the_same_session(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """L-4: the CLI gives up after its own retries; the runtime classifies, waits and resumes."""
    scripted_api.script([tool_use("Bash", {"command": "echo step"}), api_error(529), api_error(529),
                         api_error(500), api_error(500), text("recovered")])
    rt = runtime(scripted_api, tmp_path, workspace)
    result = await rt.run(solo(), "work")
    assert result.ok and result.text == "recovered"
    assert result.attempts == 3 and [r["kind"] for r in result.retries] == ["transient", "transient"]
    assert len(result.errors) == 2 and "529" in result.errors[0]
    sessions = {r.headers.get("x-claude-code-session-id") for r in scripted_api.requests}
    assert len(sessions) == 1  # resumed, never restarted
    assert "connection to the model failed" in scripted_api.requests[-1].last_user_text()


async def test_fatal_errors_are_not_retried(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    scripted_api.handler = lambda request: api_error(401, "invalid x-api-key")  # however often the CLI asks
    result = await runtime(scripted_api, tmp_path, workspace).run(solo(), "work")
    assert not result.ok and result.attempts == 1 and result.retries == ()
    assert result.error and "401" in result.error and scripted_api.base_url in result.error  # issue #17 item 10
    sessions = {r.headers.get("x-claude-code-session-id") for r in scripted_api.requests}
    assert len(sessions) == 1


async def test_endpoint_down_for_a_while_is_waited_for(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """L-4: while the endpoint refuses connections the runtime probes it, then resumes."""
    # The endpoint goes down while the tool runs (1 s), so the next request cannot slip in before it.
    scripted_api.script([tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(1)"'}),
                         text("back online")])
    rt = runtime(scripted_api, tmp_path, workspace)
    down = threading.Event()

    def outage(event: Event) -> None:
        if event.kind == "tool_call" and not down.is_set():
            down.set()
            scripted_api.stop()
            threading.Timer(4.0, scripted_api.start).start()

    result = await rt.run(solo(), "work", on_event=outage)
    assert result.ok and result.text == "back online"
    assert result.attempts >= 2 and result.retries
    assert len(scripted_api.requests) == 2  # refused connections never reached the fake


async def test_prompt_too_long_forces_a_degraded_handoff(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """S-24: a context overflow cannot be handed over by the session itself; the runtime writes it."""
    scripted_api.script([prompt_too_long(), text("continued in generation two")])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    result = await rt.run(solo(), "the original task TASK-MARK")
    assert result.ok and result.text == "continued in generation two"
    assert len(result.retired) == 1 and len(result.handoffs) == 1
    doc = Path(result.handoffs[0]).read_text()
    assert "TASK-MARK" in doc and "## Next" in doc
    assert "TASK-MARK" in scripted_api.requests[-1].last_user_text()


async def test_two_degraded_handoffs_in_a_row_stop_with_a_diagnostic(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([prompt_too_long(), prompt_too_long()])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    result = await rt.run(solo(), "task")
    assert not result.ok
    assert result.error == "stopped: two degraded handoffs in a row; window 200,000 tokens, handoff threshold 150,000 tokens"


async def test_interrupt_during_a_long_tool_call_resumes_with_the_note(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """L-5: cooperative interrupt; the cancelled call is not a fault, the session goes on."""
    scripted_api.script([
        tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(30)"'}),
        text("resumed after the interrupt"),
    ])
    rt = runtime(scripted_api, tmp_path, workspace)

    def interrupt_soon(event: Event) -> None:
        if event.kind == "tool_call":
            threading.Timer(1.0, rt.interrupt, args=("USE-THE-CACHE-INSTEAD",)).start()

    started = time.monotonic()
    result = await rt.run(solo(), "long job", on_event=interrupt_soon)
    assert time.monotonic() - started < 25
    assert result.ok and result.text == "resumed after the interrupt"
    last = scripted_api.requests[-1].last_user_text()
    assert "interrupted on purpose" in last and "USE-THE-CACHE-INSTEAD" in last


async def test_workers_act_unattended_even_without_glance(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """With glance off, Bash is not approved session-wide; the runtime's approving hook lets the worker act
    (otherwise "requires approval" with nobody to ask) while the main thread stays walled."""
    from flower.agent.roles import coordinator, worker

    made = workspace / "made.txt"
    scripted_api.script(
        [tool_use("Bash", {"command": "ls"}),
         tool_use("Agent", {"description": "d", "prompt": "SUBX: make it", "subagent_type": "w",
                            "run_in_background": False}),
         text("done")],
        subagents={"SUBX": [tool_use("Bash", {"command": f"touch {made} && python3 -c 'print(41 + 1)'"}),
                            text("made")]},
    )
    spec = coordinator("lead", "goal", {"w": worker("works", "You work.", tools=["Bash", "Read"])}, glance=False)
    result = await runtime(scripted_api, tmp_path, workspace).run(spec, "go")
    assert result.ok
    assert "Dispatch a subagent" in scripted_api.main_requests[1].result_text()  # even ls is walled
    assert made.exists() and "42" in scripted_api.subagent_requests()[-1].result_text()
    # approved by a hook, not a permission callback: no AskUserQuestion tool (~4,600 chars) on every request
    assert "AskUserQuestion" not in scripted_api.main_requests[0].tool_names


async def test_a_turn_that_finishes_over_the_threshold_hands_over_at_the_next_steps_first_tool(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """S-22: a finished turn is not handed over (its work is done); the next step resuming the session
    crosses at its first tool boundary and hands over there."""
    scripted_api.script([
        text("all done in step one", usage=Usage(input_tokens=160_000)),
        tool_use("Bash", {"command": "echo next"}, usage=Usage(input_tokens=161_000)),
        text(HANDOFF_DOC),
        text("step two finished in generation two", usage=Usage(input_tokens=4_000)),
    ])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    one = await rt.run(solo(), "step one")
    assert one.ok and one.retired == () and one.text == "all done in step one"
    two = await rt.run(solo(), "step two", resume=one.session_id)
    assert two.ok and two.retired == (one.session_id,) and two.text == "step two finished in generation two"
    assert "PLANTED-DECISION-77" in scripted_api.requests[-1].last_user_text()


async def test_a_users_deny_hook_still_wins_over_the_unattended_approval(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """The approving hook says "allow" for every subagent call; a deny from another hook must win."""
    from claude_agent_sdk import HookMatcher

    from flower.agent.roles import coordinator, worker

    async def no_rm(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
        if "rm " in str((input_data.get("tool_input") or {}).get("command", "")):
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": "USER-POLICY: no rm"}}
        return {}

    keep = workspace / "keep.txt"
    keep.write_text("precious")
    scripted_api.script(
        [tool_use("Agent", {"description": "d", "prompt": "SUBX: clean", "subagent_type": "w",
                            "run_in_background": False}), text("done")],
        subagents={"SUBX": [tool_use("Bash", {"command": f"rm {keep}"}), text("tried")]},
    )
    spec = coordinator("lead", "goal", {"w": worker("works", "You work.", tools=["Bash"])},
                       hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[no_rm])]})
    result = await runtime(scripted_api, tmp_path, workspace).run(spec, "go")
    assert result.ok and keep.exists()
    assert "USER-POLICY: no rm" in scripted_api.subagent_requests()[-1].result_text()
