"""Workflow semantics on DBOS, each step a real agent step: the bundled CLI through the SDK against the
scripted API (issue #13; L-6, L-7, B-13). DBOS runs for real on SQLite in the test's run dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower import AgentSpec, FlowError, Runtime, Step, StepAbort, Workflow
from flower.flow import engine
from flower.testing import ScriptedAPI, text

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SPEC = AgentSpec(name="agent", instructions="You answer in one word.", allowed_tools=["Read"])


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    """DBOS is one per process: each test launches it on its own run dir and shuts it down after."""
    yield
    if engine.current() is not None:
        engine.destroy()


@pytest.fixture
def runtime(scripted_api: ScriptedAPI, tmp_path: Path) -> Runtime:
    ws = tmp_path / "ws"
    ws.mkdir()
    return Runtime(ws, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))


def session(request: Any) -> str:
    return str(request.headers.get("x-claude-code-session-id"))


def prompts(api: ScriptedAPI) -> list[str]:
    return [r.last_user_text().rsplit("\n", 1)[-1] for r in api.main_requests]


async def test_when_skips_a_step_entirely(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    scripted_api.script([text("one"), text("three")])
    wf = Workflow([Step("a", SPEC, "do a"), Step("b", SPEC, "do b", when=lambda ctx: ctx["a"] == "two"),
                   Step("c", SPEC, lambda ctx: f"do c after {ctx['a']}")])
    ctx = await wf.run(runtime)
    assert prompts(scripted_api) == ["do a", "do c after one"]
    assert "b" not in ctx and "b" not in ctx.results and ctx["c"] == "three" and ctx.ok


async def test_gate_fail_then_retry_runs_a_fresh_session(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    scripted_api.script([text("draft"), text("final")])
    seen: list[str] = []

    def gate(result: Any, ctx: Any) -> bool:
        seen.append(result.text)
        return result.text == "final"

    ctx = await Workflow([Step("write", SPEC, "write it", retries=2, gate=gate)]).run(runtime)
    first, second = scripted_api.main_requests
    assert seen == ["draft", "final"]  # evaluated once per attempt
    assert prompts(scripted_api) == ["write it", "write it"] and session(first) != session(second)
    assert ctx["write"] == "final" and ctx.results["write"].step == "write#retry1" and ctx.ok


async def test_step_abort_spends_no_more_retries(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    scripted_api.script([text("hopeless")])

    def gate(result: Any, ctx: Any) -> bool:
        raise StepAbort("the input is unusable")

    wf = Workflow([Step("judge", SPEC, "try", retries=3, gate=gate), Step("after", SPEC, "never")])
    ctx = await wf.run(runtime)
    assert len(scripted_api.main_requests) == 1
    assert ctx.failed_at == "judge" and ctx.aborted == "judge: the input is unusable" and "after" not in ctx


async def test_on_reject_resumes_the_rejected_session_with_feedback(
    scripted_api: ScriptedAPI, runtime: Runtime
) -> None:
    scripted_api.script([text("ANSWER-ONE"), text("ANSWER-TWO")])
    wf = Workflow([Step("answer", SPEC, "give the answer", retries=1, gate=lambda r, ctx: r.text == "ANSWER-TWO",
                        on_reject=lambda r, ctx: f"not {r.text}; FEEDBACK-XYZ")])
    ctx = await wf.run(runtime)
    first, second = scripted_api.main_requests
    assert session(second) == session(first) == ctx.sessions["answer"]
    assert "give the answer" in second.text and "ANSWER-ONE" in second.text  # the same session's history
    assert second.last_user_text().endswith("not ANSWER-ONE; FEEDBACK-XYZ")
    assert ctx.results["answer"].step == "answer#round2" and ctx["answer"] == "ANSWER-TWO"


@pytest.mark.parametrize(("on_fail", "expected"), [
    ("stop", {"a": "A", "_failed_at": "b"}),
    ("skip", {"a": "A", "c": "C", "_failed_at": None}),
    ("continue", {"a": "A", "b": "B", "c": "C", "_failed_at": None}),
])
async def test_on_fail(
    scripted_api: ScriptedAPI, runtime: Runtime, on_fail: str, expected: dict[str, Any]
) -> None:
    scripted_api.script([text("A"), text("B")] + ([text("C")] if on_fail != "stop" else []))
    wf = Workflow([Step("a", SPEC, "a"), Step("b", SPEC, "b", gate=lambda r, ctx: False, on_fail=on_fail),  # type: ignore[arg-type]
                   Step("c", SPEC, "c")])
    ctx = await wf.run(runtime)
    got = {k: v for k, v in ctx.items() if not k.startswith("_")} | {"_failed_at": ctx.failed_at}
    assert got == expected
    assert ctx.results["b"].text == "B"  # the result is always kept


async def test_reduce_shapes_what_downstream_steps_see(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    scripted_api.script([text("apple, pear, plum"), text("done")])
    wf = Workflow([Step("list", SPEC, "list fruit", reduce=lambda r, ctx: [s.strip() for s in r.text.split(",")]),
                   Step("count", SPEC, lambda ctx: f"count {len(ctx['list'])} fruits: {ctx['list'][-1]}")])
    ctx = await wf.run(runtime)
    assert ctx["list"] == ["apple", "pear", "plum"] and prompts(scripted_api)[-1] == "count 3 fruits: plum"


async def test_resume_from_continues_and_fork_branches(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    scripted_api.script([text("PLAN-7"), text("built"), text("reviewed")])
    wf = Workflow([Step("plan", SPEC, "make a plan"),
                   Step("build", SPEC, "build the plan", resume_from="plan"),
                   Step("review", SPEC, "review the plan", resume_from="plan", fork=True)])
    ctx = await wf.run(runtime)
    plan, build, review = scripted_api.main_requests
    assert session(build) == session(plan) == ctx.sessions["build"] == ctx.sessions["plan"]
    assert "PLAN-7" in build.text and "PLAN-7" in review.text  # both see the plan's history
    assert ctx.sessions["review"] not in (ctx.sessions["plan"], None)  # the fork is a new session
    assert "built" in review.text  # a session id names the whole session: build's turn is part of it


async def test_resume_from_a_step_without_session_is_an_error(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    scripted_api.script([text("x")])
    wf = Workflow([Step("a", SPEC, "a", when=lambda ctx: False), Step("b", SPEC, "b"),
                   Step("c", SPEC, "c", resume_from="a")])
    with pytest.raises(FlowError, match="step c: resume_from a has no session"):
        await wf.run(runtime)
    assert prompts(scripted_api) == ["b"]


def test_bad_workflows_are_one_clear_error_at_once() -> None:
    with pytest.raises(FlowError, match="two steps named a"):
        Workflow([Step("a", SPEC, "x"), Step("a", SPEC, "y")])
    with pytest.raises(FlowError, match="resume_from names 'b', which is not an earlier step"):
        Workflow([Step("a", SPEC, "x", resume_from="b"), Step("b", SPEC, "y")])
    with pytest.raises(FlowError, match="fork=True needs resume_from"):
        Step("a", SPEC, "x", fork=True)
    with pytest.raises(FlowError, match="on_fail must be one of stop, skip, continue"):
        Step("a", SPEC, "x", on_fail="retry")  # type: ignore[arg-type]


# --- parallel steps on SQLite (one process) -------------------------------------------------------


def answer_by_item(arrivals: dict[str, float], delay: float):  # type: ignore[no-untyped-def]
    """A handler: each fan-out request (`ITEM-<x>` in its prompt) gets `done <x>` after `delay` seconds."""
    import re
    import time

    def handler(request: Any) -> Any:
        found = re.findall(r"ITEM-(\w+)", request.text)
        if not found:
            return None
        arrivals.setdefault(found[-1], time.monotonic())
        return text(f"done {found[-1]}", delay=delay)

    return handler


async def test_fan_out_runs_through_a_queue_with_a_limit_and_keeps_order(
    scripted_api: ScriptedAPI, runtime: Runtime
) -> None:
    arrivals: dict[str, float] = {}
    scripted_api.handler = answer_by_item(arrivals, delay=2.0)
    scripted_api.script([text("summed")])
    items = ["a", "b", "c", "d"]
    wf = Workflow([Step("each", SPEC, "work on ITEM-{item}", over=items, limit=2),
                   Step("sum", SPEC, lambda ctx: f"sum up {ctx['each']}")])
    ctx = await wf.run(runtime)
    assert ctx["each"] == ["done a", "done b", "done c", "done d"]  # in item order
    assert [r.step for r in ctx.results["each"]] == ["each[0]", "each[1]", "each[2]", "each[3]"]
    assert set(ctx.sessions) >= {"each[0]", "each[3]"} and ctx["sum"] == "summed"
    starts = sorted(arrivals.values())
    assert len(starts) == 4 and starts[2] - starts[0] >= 1.5  # a third agent waited for a free slot
    assert ctx["_workspaces"] == {}  # read-only agents share the workspace


async def test_parallel_writers_get_their_own_copy(scripted_api: ScriptedAPI, runtime: Runtime) -> None:
    from flower import parallel

    (runtime.workspace / "shared.txt").write_text("base\n")
    writer = AgentSpec(name="writer", instructions="You write.", allowed_tools=["Read", "Write"])
    scripted_api.handler = answer_by_item({}, delay=0.0)
    wf = Workflow([parallel(Step("left", writer, "ITEM-left"), Step("right", writer, "ITEM-right"), limit=2)])
    ctx = await wf.run(runtime)
    assert (ctx["left"], ctx["right"]) == ("done left", "done right")
    left, right = Path(ctx["_workspaces"]["left"]), Path(ctx["_workspaces"]["right"])
    assert left != right and left.parent == right.parent == runtime.run_dir / "workspaces" / runtime.run_id
    assert (left / "shared.txt").read_text() == (right / "shared.txt").read_text() == "base\n"
