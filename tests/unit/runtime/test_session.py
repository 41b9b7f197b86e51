"""A session's message handlers, fed the SDK's own message objects: what they make of the session's outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    TaskNotificationMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.handoff import ContextMeter
from flower.runtime.host import Step
from flower.runtime.runtime import Runtime
from flower.runtime.session import Session
from flower.runtime.tally import Tally


def _session(tmp_path: Path, events: list[Event] | None = None) -> Session:
    runtime = Runtime(tmp_path, run_dir=tmp_path / "runs", workbench=False)
    sink = events.append if events is not None else None
    step = Step(AgentSpec(name="a", instructions="x"), "go", "a", ContextMeter(), Tally(), sink)
    return Session(runtime, step, resume="s0")


def _result(subtype: str = "success", *, is_error: bool = False, result: str | None = "all done",
            status: int | None = None, cost: float | None = 0.5) -> ResultMessage:
    return ResultMessage(subtype, 10, 5, is_error, 2, "s1", total_cost_usd=cost, result=result,
                         api_error_status=status)


def test_a_result_ends_the_session_done_with_its_text_cost_and_turns(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.base_cost = 0.2  # the resumed transcript's last cost-state
    session._on_result(_result())
    outcome = session.outcome()
    assert (outcome.kind, outcome.text, outcome.session_id, outcome.settled) == ("done", "all done", "s1", True)
    assert outcome.cost == pytest.approx(0.3) and outcome.turns == 2


def test_an_error_result_fails_with_its_first_line_and_status(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session._on_result(_result("error_during_execution", is_error=True, result="API Error: 529 overloaded\nmore",
                               status=529))
    outcome = session.outcome()
    assert (outcome.kind, outcome.error, outcome.status) == ("failed", "API Error: 529 overloaded", 529)


def test_a_cap_is_named_so_it_is_final(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session._on_result(_result("error_max_turns", is_error=True, result="Reached the limit"))
    assert session.outcome().error == "error_max_turns: Reached the limit"


def test_an_interrupt_the_user_asked_for_is_not_an_error(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.runtime._steering.note = "look at the parser"  # type: ignore[attr-defined]
    session._on_result(_result("error_during_execution", is_error=True, result="aborted"))
    outcome = session.outcome()
    assert (outcome.kind, outcome.error) == ("interrupted", None)


def test_a_session_the_runtime_cut_keeps_the_runtimes_reason(tmp_path: Path) -> None:
    session = _session(tmp_path)
    session.cut, session.fatal, session.error = True, True, "API Error: 401 refused"
    session._on_result(_result("error_during_execution", is_error=True, result="Request aborted"))
    assert (session.outcome().kind, session.outcome().error) == ("fatal", "API Error: 401 refused")


def test_a_worker_cut_off_is_recorded_once_per_call(tmp_path: Path) -> None:
    events: list[Event] = []
    session = _session(tmp_path, events)
    text = "Agent terminated early due to an API error: API Error: 529 Overloaded"
    session._on_user(UserMessage([ToolResultBlock("toolu_1", text, is_error=True)], parent_tool_use_id=None))
    session._on_task_notification(TaskNotificationMessage("task_notification", {}, "t1", "failed", "", text, "u",
                                                          "s1", tool_use_id="toolu_1"))
    assert session.outcome().worker_errors == (f"worker cut off (toolu_1): {text}",)
    assert [e.payload.get("subtype") for e in events] == ["worker_cut_off"]


def test_a_background_agent_call_is_a_running_task_until_it_fails_to_launch(tmp_path: Path) -> None:
    session = _session(tmp_path)
    call = ToolUseBlock("toolu_bg", "Agent", {"prompt": "p", "run_in_background": True})
    session._on_assistant(AssistantMessage([call], "claude-sonnet-4-5", message_id="m1",
                                           usage={"input_tokens": 10}), generations=False)
    assert session.tasks.running == {"toolu_bg"} and "toolu_bg" in session._seen
    session._on_user(UserMessage([ToolResultBlock("toolu_bg", "refused", is_error=True)]))
    assert session.tasks.running == set()


@pytest.mark.anyio
async def test_the_stop_hook_waits_for_its_call_then_stops_a_crossed_turn(tmp_path: Path) -> None:
    import anyio

    session = _session(tmp_path)
    hook = session.stop_hook().hooks[0]
    assert await hook({"agent_id": "sub"}, "toolu_x", {"signal": None}) == {}  # type: ignore[arg-type, typeddict-item]
    session.crossed = True
    decided: list[object] = []

    async def ask() -> None:
        decided.append(await hook({}, "toolu_1", {"signal": None}))  # type: ignore[arg-type, typeddict-item]

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.sleep(0.05)
        assert decided == []  # the receive loop has not seen the call yet
        session._on_assistant(AssistantMessage([ToolUseBlock("toolu_1", "Read", {"file_path": "x"})],
                                               "claude-sonnet-4-5", message_id="m1"), generations=False)
    assert decided == [{"continue_": False, "stopReason": "flower: handoff to a new generation"}]
    assert session.stopped
