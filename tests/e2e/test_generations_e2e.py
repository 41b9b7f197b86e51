"""Generations and resilience that hold over many hours, through the real CLI (issue #17 items 1-3, 6, 10;
S-22..S-24, L-4), and the CLI's cumulative cost (a result's `total_cost_usd` is the session's running total)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage

from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.resilience import RetryPolicy
from flower.runtime.runtime import Runtime
from flower.testing import Reply, ScriptedAPI, Text, Usage, api_error, prompt_too_long, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DOC = "## Doing\nPorting the parser ({mark}).\n## Next\n1. Finish the lexer.\n"
FAST = RetryPolicy(max_attempts=4, base=0.05, cap=0.2, probe_timeout=30, probe_interval=0.05)


def solo(**kwargs: Any) -> AgentSpec:
    return AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash", "Read"], **kwargs)


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path, retries: str | None = "1", **kwargs: Any) -> Runtime:
    extra = {"CLAUDE_CODE_MAX_RETRIES": retries} if retries else {}
    env = {**api.cli_env(tmp_path / "home", **extra), **kwargs.pop("env", {})}
    kwargs.setdefault("resilience", FAST)
    return Runtime(workspace, run_dir=tmp_path / "runs", env=env, **kwargs)


def cross(tokens: int) -> Any:
    return tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=tokens))


async def test_a_handoff_uses_no_retry(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    """Item 1: with max_attempts=2, a 500 right after a handoff used to fail the step (generations counted
    as attempts). Retries count failures only."""
    scripted_api.script([
        cross(160_000), text(DOC.format(mark="G1")),
        api_error(500), api_error(500),  # the CLI's own retry (MAX_RETRIES=1), then it gives up
        text("done in generation two", usage=Usage(input_tokens=5_000)),
    ])
    policy = RetryPolicy(max_attempts=2, base=0.05, cap=0.1, probe_timeout=30)
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000), resilience=policy)
    result = await rt.run(solo(), "port the parser")
    assert result.ok and result.text == "done in generation two", result.error
    assert len(result.retired) == 1 and len(result.retries) == 1 and result.attempts == 3
    assert result.retries[0]["attempt"] == 2 and result.retries[0]["of"] == 2


async def test_two_failed_handoffs_in_a_row_stop_the_step(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 2: a handoff the session cannot write is degraded (event, errors) and two in a row stop."""
    scripted_api.script([
        cross(160_000), text("I would rather keep going."), text("No."),
        cross(5_000), cross(160_000), text("Still no."), text("No sections."),
    ])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    events: list[Event] = []
    result = await rt.run(solo(), "task", on_event=events.append)
    assert not result.ok and result.error is not None
    assert result.error.startswith("stopped: two degraded handoffs in a row")
    handoffs = [e for e in events if e.kind == "handoff"]
    assert len(handoffs) == 1 and handoffs[0].payload["degraded"] is True
    assert "incomplete" in handoffs[0].payload["reason"]
    assert sum("handoff degraded" in e for e in result.errors) == 2


async def test_the_window_follows_the_model_in_use(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: spec.model unset, ANTHROPIC_MODEL names a 200k model: the threshold is 150k, not 750k."""
    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    scripted_api.script([cross(160_000), text(DOC.format(mark="HAIKU")), text("gen two", usage=Usage(input_tokens=5_000))])
    rt = runtime(scripted_api, tmp_path, workspace, env={"ANTHROPIC_MODEL": "claude-haiku-4-5"})
    assert rt.threshold(solo()) == 150_000  # from ANTHROPIC_MODEL before any session
    events: list[Event] = []
    result = await rt.run(solo(), "task", on_event=events.append)
    assert result.ok and len(result.retired) == 1
    assert scripted_api.requests[0].body["model"] == "claude-haiku-4-5"


async def test_an_overflow_calibrates_the_window(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: the gateway serves about 200k behind a name that says 1M. The CLI reduces the API's
    "N tokens > M maximum" to "Prompt is too long", so the window is taken as at most the last context seen
    before the overflow (180k), and the next generation hands over at 75% of that."""
    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    scripted_api.script([
        cross(180_000), prompt_too_long(210_000, 200_000),
        cross(5_000), cross(140_000), text(DOC.format(mark="CAL")),
        text("gen three", usage=Usage(input_tokens=5_000)),
    ])
    rt = runtime(scripted_api, tmp_path, workspace)
    assert rt.window(solo()) == 1_000_000
    result = await rt.run(solo(), "task")
    assert result.ok and result.text == "gen three" and len(result.retired) == 2, result.errors
    assert rt.window(solo()) == 180_000 and rt.threshold(solo()) == 135_000


async def test_the_generation_cap_saves_the_last_handoff_and_says_how_to_continue(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 6: a window of 40000 alone (what FLOWER_WINDOW=40000 resolves to) works (headroom scales); the
    capped step keeps the document."""
    scripted_api.script([
        cross(31_000), text(DOC.format(mark="FIRST")),
        cross(3_000), cross(31_000), text(DOC.format(mark="LAST-WORDS-42")),
    ])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(max_generations=2), window=40_000)
    result = await rt.run(solo(), "task")
    assert not result.ok and result.error is not None and "more than 2 generations" in result.error
    assert len(result.handoffs) == 2 and "LAST-WORDS-42" in Path(result.handoffs[-1]).read_text()
    assert f"flower run SPEC < {result.handoffs[-1]}" in result.error


async def test_a_401_stops_at_once_and_names_the_endpoint(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10: the CLI would retry a 401 ten times over minutes; the runtime stops at its first retry."""
    scripted_api.handler = lambda request: api_error(401, "invalid x-api-key")
    events: list[Event] = []
    result = await runtime(scripted_api, tmp_path, workspace, retries=None).run(solo(), "work", on_event=events.append)
    assert not result.ok and result.error is not None
    assert "401" in result.error and scripted_api.base_url in result.error
    assert len(scripted_api.requests) <= 5  # of the CLI's 11 (default 10 retries, 0.5 s doubling)
    assert result.retries == ()


async def test_a_down_endpoint_is_reported_once_each_way(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10: every retry line says attempt n/N, the wait and the endpoint; the probe reports once when
    the endpoint goes away and once when it is back. The endpoint comes back when the probe says it is
    down (no timers)."""
    scripted_api.script([tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(1)"'}),
                         text("back online")])
    rt = runtime(scripted_api, tmp_path, workspace)
    events: list[Event] = []
    down = threading.Event()

    def watch(event: Event) -> None:
        events.append(event)
        if event.kind == "tool_call" and not down.is_set():
            down.set()
            scripted_api.stop()
        if event.payload.get("subtype") == "endpoint_down":
            scripted_api.start()

    result = await rt.run(solo(), "work", on_event=watch)
    assert result.ok and result.text == "back online", result.error
    states = [e.payload["subtype"] for e in events if str(e.payload.get("subtype", "")).startswith("endpoint_")]
    assert states == ["endpoint_down", "endpoint_back"]
    ours = [e for e in events if e.kind == "retry" and "kind" in e.payload]
    assert ours and all(e.payload["endpoint"] == scripted_api.base_url for e in ours)
    assert ours[0].payload["attempt"] == 2 and ours[0].payload["max_attempts"] == FAST.max_attempts
    cli_retries = [e for e in events if e.kind == "retry" and "kind" not in e.payload]
    assert all(e.payload["endpoint"] == scripted_api.base_url for e in cli_retries)


async def test_cost_is_not_counted_twice(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    """The CLI's `total_cost_usd` is its process's running total (checked here on the reference session), so
    summing it per query counted the handoff round's session twice; a store-backed resume starts a new total.
    Every reply has the same usage, so a step costs exactly (requests x the price of one)."""
    same = Usage(input_tokens=160_000, output_tokens=10)
    scripted_api.script([tool_use("Bash", {"command": "echo work"}, usage=same),
                         Reply((Text(DOC.format(mark="COST")),), usage=same), Reply((Text("two"),), usage=same),
                         Reply((Text("resumed"),), usage=same)])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    result = await rt.run(solo(), "task")
    assert result.ok and len(result.retired) == 1 and len(scripted_api.requests) == 3
    resumed = await rt.run(solo(), "more", resume=result.session_id)  # a new CLI process on the same session
    reference = ScriptedAPI([Reply((Text("a"),), usage=same), Reply((Text("b"),), usage=same)]).start()
    try:
        totals: list[float] = []
        options = ClaudeAgentOptions(env=reference.cli_env(tmp_path / "home2"), cwd=str(workspace),
                                     setting_sources=[])
        async with ClaudeSDKClient(options) as client:
            for prompt in ("one", "two"):
                await client.query(prompt)
                async for message in client.receive_response():
                    if isinstance(message, ResultMessage):
                        totals.append(message.total_cost_usd or 0.0)
    finally:
        reference.stop()
    one = totals[0]
    assert totals[1] == pytest.approx(2 * one)  # cumulative within a session
    assert result.cost_usd == pytest.approx(3 * one, rel=1e-4)
    assert resumed.cost_usd == pytest.approx(one, rel=1e-4)  # neither 0 nor the session's total


async def test_a_turn_cap_is_final_not_retried(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    """Item 9: "Reached maximum number of turns" was "unknown" and retried, so max_turns could be exceeded
    up to six times."""
    scripted_api.script([tool_use("Bash", {"command": "echo one"})])  # the CLI stops after this turn
    result = await runtime(scripted_api, tmp_path, workspace).run(solo(max_turns=1), "work")
    assert not result.ok and result.retries == () and result.attempts == 1, result.errors
    assert result.error is not None and result.error.startswith("error_max_turns")
    assert len(scripted_api.requests) == 1


async def test_a_down_endpoint_stops_the_clis_own_retry_loop(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10: with the CLI's default 10 retries a refused connection was retried for minutes in silence;
    the runtime stops it at the first retry and waits with its probe, which reports down and back once."""
    scripted_api.script([tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(1)"'}),
                         text("back online")])
    rt = runtime(scripted_api, tmp_path, workspace, retries=None)
    events: list[Event] = []

    def watch(event: Event) -> None:
        events.append(event)
        if event.kind == "tool_call":
            scripted_api.stop()
        if event.payload.get("subtype") == "endpoint_down":
            scripted_api.start()

    result = await rt.run(solo(), "work", on_event=watch)
    assert result.ok and result.text == "back online", result.errors
    cli_retries = [e for e in events if e.kind == "retry" and "kind" not in e.payload]
    # stopped at the first retry (a second may slip in on a loaded machine; the CLI would make ten)
    assert 1 <= len(cli_retries) <= 2 and cli_retries[0].payload["max_retries"] == 10
    assert [e.payload["subtype"] for e in events if e.payload.get("subtype", "").startswith("endpoint_")] == [
        "endpoint_down", "endpoint_back"]
    assert result.errors and scripted_api.base_url in result.errors[0]


async def test_an_overflow_without_generations_is_not_retried(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 5: an overflow in the same session cannot pass; with generations off it ends the step at once."""
    scripted_api.script([prompt_too_long()])
    result = await runtime(scripted_api, tmp_path, workspace, handoff=False).run(solo(), "work")
    assert not result.ok and result.retries == () and result.attempts == 1
    assert result.error is not None and "too long" in result.error


async def test_the_window_follows_the_model_the_session_reports(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: the spec says `opus` (no window in the name) and the gateway maps it to a 200k model: the
    session's init message names that model, and the threshold follows it from the first reply on."""
    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    scripted_api.script([cross(160_000), text(DOC.format(mark="REPORTED")), text("gen two", usage=Usage(input_tokens=5_000))])
    rt = runtime(scripted_api, tmp_path, workspace, env={"ANTHROPIC_DEFAULT_OPUS_MODEL": "claude-haiku-4-5"})
    assert rt.threshold(solo(model="opus")) == 750_000  # nothing known before the session
    events: list[Event] = []
    result = await rt.run(solo(model="opus"), "task", on_event=events.append)
    assert scripted_api.requests[0].body["model"] == "claude-haiku-4-5"
    assert result.ok and len(result.retired) == 1, result.errors
    window = [e for e in events if e.payload.get("subtype") == "window"]
    assert window and window[0].payload["threshold"] == 150_000
    assert any(e.payload.get("subtype") == "model_mismatch" for e in events)


async def test_by_default_a_generation_hands_over_where_that_is_cheapest(tmp_path: Path, workspace: Path) -> None:
    """Issue #27: a generation starting at 6k and growing 500 tokens a turn hands over after about 30 turns
    (the floor; n* = sqrt(2H / (0.1 * 500)) is 24 to 34 there), far below the 1M window's 750k threshold."""
    turns: list[int] = []

    def driver(request: Any) -> Any:
        if "## Doing" in request.text and "hand" in request.text.lower() and not turns[-1:] == [-1]:
            turns.append(-1)
            return text(DOC.format(mark="G1"))
        if turns[-1:] == [-1]:
            return text("done", usage=Usage(input_tokens=7_000))
        if len(turns) >= 60:
            return text("never handed over")
        turns.append(len(turns))
        return tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=6_000 + 500 * turns[-1]))

    with ScriptedAPI(handler=driver) as api:
        rt = runtime(api, tmp_path, workspace, handoff=HandoffPolicy(window=1_000_000))
        events: list[Event] = []
        result = await rt.run(solo(), "port the parser", on_event=events.append)
    assert result.ok and result.text == "done", result.error
    assert len(result.retired) == 1 and len(result.handoffs) == 1
    thresholds = [e.payload for e in events if e.kind == "system" and e.payload.get("subtype") == "threshold"]
    assert thresholds and thresholds[-1]["growth"] == 500 and thresholds[-1]["start"] == 6_000
    # handed over at a tool boundary once past it (the threshold is recomputed each turn: H grows with the
    # context, so it moves a little after it was announced)
    crossed = 6_000 + 500 * (len(turns) - 2)
    assert crossed >= thresholds[-1]["threshold"] > crossed - 2_000
    assert 30 <= len(turns) - 2 <= 40


async def test_a_resumed_session_continues_its_generations_count(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Issue #27: a restart resumes the session of its generation; the cost-driven threshold goes on from the
    contexts the stored replies reported (before, the count and the start began again at the resume)."""
    grow = [tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=6_000 + 500 * i)) for i in range(10)]
    scripted_api.script([*grow, text("paused"), tool_use("Bash", {"command": "echo more"},
                                                        usage=Usage(input_tokens=11_500)), text("done")])
    first = await runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=1_000_000)).run(
        solo(), "port the parser")
    assert first.ok and first.text == "paused"
    events: list[Event] = []
    again = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=1_000_000))
    result = await again.run(solo(), "go on", resume=first.session_id, on_event=events.append)
    assert result.ok and result.text == "done", result.error
    thresholds = [e.payload for e in events if e.kind == "system" and e.payload.get("subtype") == "threshold"]
    assert thresholds and thresholds[0]["start"] == 6_000  # measured from the generation's first reply


async def test_a_person_hands_over_at_the_next_tool_boundary_with_a_focus(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Issue #27: `rt.handoff(goal)` hands over at the next main-thread tool boundary, far below any
    threshold, and the handoff request carries the focus (as Claude Code's `/compact <focus>`)."""
    scripted_api.script([
        tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=6_000)), text(DOC.format(mark="G1")),
        text("done", usage=Usage(input_tokens=6_500)),
    ])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=1_000_000))
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if event.kind == "tool_call" and not any(e.kind == "handoff" for e in events):
            rt.handoff("finish the lexer first")

    result = await rt.run(solo(), "port the parser", on_event=on_event)
    assert result.ok and result.text == "done", result.error
    assert len(result.handoffs) == 1 and len(result.retired) == 1
    asked = scripted_api.main_requests[1].text
    assert "## Doing" in asked and "finish the lexer first" in asked
    assert any(e.payload.get("subtype") == "handoff_asked" for e in events if e.kind == "system")
    with pytest.raises(ConfigError, match="needs generations"):
        runtime(scripted_api, tmp_path, workspace, handoff=None).handoff("x")


async def test_a_resumed_later_generation_keeps_its_number_and_the_cap_counts_on(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """A restart that resumes generation 2's session goes on as generation 2: its next handoff would make a
    third, which a cap of 2 stops (before, the resumed step counted from 1 again, so restarts reset the cap
    and the numbering)."""
    policy = HandoffPolicy(max_generations=2)
    scripted_api.script([cross(31_000), text(DOC.format(mark="FIRST")), text("paused in two")])
    first = await runtime(scripted_api, tmp_path, workspace, handoff=policy, window=40_000).run(solo(), "task")
    assert first.ok and first.text == "paused in two" and len(first.handoffs) == 1, first.error
    scripted_api.script([cross(31_000), text(DOC.format(mark="SECOND"))])
    again = runtime(scripted_api, tmp_path, workspace, handoff=policy, window=40_000)
    result = await again.run(solo(), "go on", resume=first.session_id)
    assert not result.ok and result.error is not None and "more than 2 generations" in result.error, result.error
    assert "SECOND" in Path(result.handoffs[-1]).read_text()
