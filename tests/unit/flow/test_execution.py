"""What a workflow means, without DBOS: the in-process executor runs `flower.flow.execution` and records every
checkpoint, so step order, `when`, gates, `on_reject`, `reduce`, parallel groups, fan-outs, continuity and
replay are checked here against scripted attempt results (the e2e tests run the same semantics on DBOS
through the real CLI)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from flower import AgentSpec, FlowError, Runtime, Step, StepAbort, Workflow, parallel
from flower.errors import ConfigError
from flower.flow.context import Context, StepContext, Updates
from flower.flow.execution import as_definition
from flower.flow.executor import Attempt
from flower.flow.inprocess import EXECUTOR_ID, InProcessExecutor
from flower.runtime.steps import StepResult

pytestmark = pytest.mark.anyio

READER = AgentSpec(name="reader", instructions="i", allowed_tools=["Read"])
WRITER = AgentSpec(name="writer", instructions="i", allowed_tools=["Read", "Edit"])


class Agents:
    """Scripted attempts: `reply(attempt)` gives the text (None: the attempt fails); every attempt is kept."""

    def __init__(self, reply: Callable[[Attempt], str | None] | None = None, delay: Callable[[Attempt], float] | None = None):
        self.reply = reply or (lambda attempt: f"{attempt.label} did it")
        self.delay = delay
        self.calls: list[Attempt] = []
        self.runtimes: dict[str, Runtime] = {}

    async def __call__(self, runtime: Runtime, attempt: Attempt) -> StepResult:
        self.calls.append(attempt)
        self.runtimes[attempt.label] = runtime
        if self.delay is not None:
            await anyio.sleep(self.delay(attempt))
        text = self.reply(attempt)
        return StepResult(step=attempt.label, session_id=attempt.resume if attempt.resume and not attempt.fork
                          else f"sess-{attempt.label}", ok=text is not None, cost_usd=0.01, num_turns=1,
                          text=text or "", error=None if text is not None else "scripted failure")

    @property
    def labels(self) -> list[str]:
        return [attempt.label for attempt in self.calls]


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "file.txt").write_text("x\n")
    return Runtime(tmp_path / "ws", run_dir=tmp_path / "runs", workbench=False, run_id="r1")


async def run(flow: Workflow, runtime: Runtime, agents: Agents, **kwargs: Any) -> tuple[Context, InProcessExecutor]:
    executor = InProcessExecutor(flow, runtime, agent_runner=agents, **kwargs)
    return await executor.run(), executor


async def test_steps_run_in_order_and_share_the_context(runtime: Runtime) -> None:
    agents = Agents()
    flow = Workflow([Step("a", READER, "first"), Step("b", READER, lambda ctx: f"after {ctx['a']}")])
    ctx, executor = await run(flow, runtime, agents)
    assert ctx["a"] == "a did it" and ctx["b"] == "b did it" and ctx.ok
    assert [c.prompt for c in agents.calls] == ["first", "after a did it"]
    assert executor.log == ["agent:a", "settle:a", "agent:b", "settle:b"]
    assert ctx.sessions == {"a": "sess-a", "b": "sess-b"} and ctx.results["b"].text == "b did it"


async def test_when_false_skips_the_step_entirely(runtime: Runtime) -> None:
    agents = Agents()
    flow = Workflow([Step("a", READER, "x", when=lambda ctx: False), Step("b", READER, "y")])
    ctx, executor = await run(flow, runtime, agents)
    assert "a" not in ctx and "a" not in ctx.results and agents.labels == ["b"]
    assert executor.log[:2] == ["when:a", "agent:b"]


async def test_a_rejecting_gate_resumes_the_same_session_with_on_reject_feedback(runtime: Runtime) -> None:
    agents = Agents()
    verdicts = iter([False, True])
    flow = Workflow([Step("s", READER, "do it", retries=2, gate=lambda result, ctx: next(verdicts),
                          on_reject=lambda result, ctx: f"again, {result.text}")])
    ctx, executor = await run(flow, runtime, agents)
    assert agents.labels == ["s", "s#round2"]
    second = agents.calls[1]
    assert second.prompt == "again, s did it" and second.resume == "sess-s" and not second.fork
    assert ctx["s"] == "s#round2 did it" and ctx.results["s"].step == "s#round2"
    assert executor.log == ["agent:s", "gate:s", "feedback:s", "agent:s#round2", "gate:s#round2", "settle:s"]


async def test_a_plain_retry_starts_afresh_and_a_failed_attempt_skips_the_gate(runtime: Runtime) -> None:
    agents = Agents(lambda attempt: None if attempt.label == "s" else "fine")
    gated: list[str] = []
    flow = Workflow([Step("s", READER, "do it", retries=1, gate=lambda result, ctx: gated.append(result.step) or True)])
    ctx, _ = await run(flow, runtime, agents)
    assert agents.labels == ["s", "s#retry1"] and agents.calls[1].prompt == "do it" and agents.calls[1].resume is None
    assert gated == ["s#retry1"] and ctx["s"] == "fine"


async def test_step_abort_stops_at_once_without_spending_retries(runtime: Runtime) -> None:
    def gate(result: StepResult, ctx: StepContext) -> bool:
        raise StepAbort("hopeless")

    agents = Agents()
    flow = Workflow([Step("s", READER, "x", retries=3, gate=gate), Step("after", READER, "y")])
    ctx, _ = await run(flow, runtime, agents)
    assert agents.labels == ["s"] and ctx.failed_at == "s" and ctx.aborted == "s: hopeless" and not ctx.ok


@pytest.mark.parametrize(("on_fail", "stored", "next_ran"), [("stop", None, False), ("skip", None, True),
                                                             ("continue", "", True)])
async def test_on_fail(runtime: Runtime, on_fail: str, stored: str | None, next_ran: bool) -> None:
    agents = Agents(lambda attempt: None if attempt.step == "s" else "ok")
    flow = Workflow([Step("s", READER, "x", on_fail=on_fail), Step("after", READER, "y")])  # type: ignore[arg-type]
    ctx, _ = await run(flow, runtime, agents)
    assert ctx.get("s") == stored and ("s" in ctx) == (stored is not None)
    assert ("after" in agents.labels) == next_ran and (ctx.failed_at == "s") == (on_fail == "stop")
    assert ctx.results["s"].ok is False


async def test_reduce_shapes_the_output_and_its_failure_is_one_line(runtime: Runtime) -> None:
    flow = Workflow([Step("a", READER, "x", reduce=lambda result, ctx: result.text.split())])
    ctx, _ = await run(flow, runtime, Agents())
    assert ctx["a"] == ["a", "did", "it"]
    bad = Workflow([Step("a", READER, "x", reduce=lambda result, ctx: int("not a number"))])
    with pytest.raises(FlowError, match=r"^step a: reduce raised ValueError: invalid literal"):
        await run(bad, runtime, Agents())


@pytest.mark.parametrize(("field", "value", "message"), [
    ("gate", lambda result, ctx: "yes", "step s: gate returned str 'yes', not a bool"),
    ("gate", lambda result, ctx: 1 / 0, "step s: gate raised ZeroDivisionError: division by zero"),
    ("when", lambda ctx: ctx["missing"], "step s: when raised KeyError: 'missing'"),
    ("prompt", lambda ctx: {}["k"], "step s: prompt raised KeyError: 'k'"),
])
async def test_user_code_that_misbehaves_is_one_flow_error_line(runtime: Runtime, field: str, value: Any,
                                                                message: str) -> None:
    step = Step("s", READER, **{"prompt": "x", field: value})
    with pytest.raises(FlowError) as caught:
        await run(Workflow([step]), runtime, Agents())
    assert str(caught.value) == message


async def test_step_code_gets_a_read_only_step_context_naming_its_run(runtime: Runtime) -> None:
    seen: list[StepContext] = []
    had_b: list[bool] = []

    async def gate(result: StepResult, ctx: StepContext) -> bool:  # async callables are awaited
        seen.append(ctx)
        had_b.append("b" in ctx)
        return True

    flow = Workflow([Step("a", READER, "x"), Step("b", READER, "y", gate=gate)], context={"goal": "g"})
    await run(flow, runtime, Agents())
    ctx = seen[0]
    assert ctx.runtime is runtime and ctx.run_id == "r1" and (ctx.step, ctx.label) == ("b", "b")
    assert ctx["goal"] == "g" and ctx["a"] == "a did it" and had_b == [False] and ctx.results["a"].ok
    with pytest.raises(TypeError):
        ctx["a"] = "changed"  # type: ignore[index]


async def test_resume_from_continues_or_forks_an_earlier_session(runtime: Runtime) -> None:
    agents = Agents()
    flow = Workflow([Step("a", READER, "x"), Step("b", READER, "y", resume_from="a"),
                     Step("c", READER, "z", resume_from="a", fork=True)])
    ctx, _ = await run(flow, runtime, agents)
    b, c = agents.calls[1], agents.calls[2]
    assert (b.resume, b.fork) == ("sess-a", False) and (c.resume, c.fork) == ("sess-a", True)
    skipped = Workflow([Step("a", READER, "x", when=lambda ctx: False), Step("b", READER, "y", resume_from="a")])
    with pytest.raises(FlowError, match="step b: resume_from a has no session"):
        await run(skipped, runtime, Agents())


async def test_resume_at_forks_an_earlier_session_at_a_message(runtime: Runtime) -> None:
    agents = Agents(reply=lambda attempt: None if attempt.label == "b" else f"{attempt.label} did it")
    flow = Workflow([Step("a", READER, "x"), Step("b", READER, "y", resume_from="a", resume_at="uuid-7", retries=1)])
    await run(flow, runtime, agents)  # a plain retry forks at the same message again
    assert [(c.label, c.resume, c.fork, c.resume_at) for c in agents.calls[1:]] == [
        ("b", "sess-a", True, "uuid-7"), ("b#retry1", "sess-a", True, "uuid-7")]
    for bad in ({"resume_at": "uuid-7"}, {"resume_from": "a", "resume_at": " "}):
        with pytest.raises(FlowError, match="step c: resume_at needs resume_from and a message uuid"):
            Step("c", READER, "z", **bad)  # type: ignore[arg-type]


async def test_parallel_members_keep_their_order_and_a_writer_gets_its_own_workspace(runtime: Runtime) -> None:
    agents = Agents(delay=lambda attempt: 0.05 if attempt.step == "r" else 0.0)
    seen: list[StepContext] = []
    flow = Workflow([parallel(Step("r", READER, "read"),
                              Step("w", WRITER, "write", gate=lambda result, ctx: seen.append(ctx) or True), limit=2),
                     Step("after", READER, lambda ctx: f"{ctx['r']} / {ctx['w']}")])
    ctx, executor = await run(flow, runtime, agents)
    assert agents.labels[-1] == "after" and agents.calls[-1].prompt == "r did it / w did it"
    assert ctx["_ran_by"] == {"r": EXECUTOR_ID, "w": EXECUTOR_ID}
    own = Path(ctx["_workspaces"]["w"])
    assert "r" not in ctx["_workspaces"] and agents.runtimes["r"].workspace == runtime.workspace
    assert agents.runtimes["w"].workspace == own and (own / "file.txt").read_text() == "x\n" and own != runtime.workspace
    assert seen[0].runtime is agents.runtimes["w"] and seen[0].run_runtime is runtime and seen[0].label == "w"
    assert executor.log.index("result:r") < executor.log.index("settle:r") < executor.log.index("settle:w")


async def test_a_fan_out_gives_outputs_in_item_order_whatever_order_they_finish(runtime: Runtime) -> None:
    finished: list[str] = []

    def reply(attempt: Attempt) -> str:
        finished.append(attempt.label)
        return attempt.prompt.upper()

    agents = Agents(reply, delay=lambda attempt: {"each[0]": 0.06, "each[1]": 0.03}.get(attempt.label, 0.0))
    flow = Workflow([Step("each", READER, "look at {item}", over=lambda ctx: ["a", "b", "c"], limit=3)])
    ctx, _ = await run(flow, runtime, agents)
    assert finished == ["each[2]", "each[1]", "each[0]"]
    assert ctx["each"] == ["LOOK AT A", "LOOK AT B", "LOOK AT C"]
    assert [r.step for r in ctx.results["each"]] == ["each[0]", "each[1]", "each[2]"]
    assert set(ctx.sessions) == {"each[0]", "each[1]", "each[2]"}


async def test_a_failing_fan_out_item_stops_the_run_at_the_step(runtime: Runtime) -> None:
    agents = Agents(lambda attempt: None if attempt.label == "each[1]" else "ok")
    flow = Workflow([Step("each", READER, "x", over=[1, 2, 3]), Step("after", READER, "y")])
    ctx, _ = await run(flow, runtime, agents)
    assert ctx.failed_at == "each" and "after" not in agents.labels and ctx["each"] == ["ok", None, "ok"]


async def test_a_replay_reaches_the_same_place_without_calling_the_model_or_user_code(runtime: Runtime) -> None:
    calls: list[str] = []

    def gate(result: StepResult, ctx: StepContext) -> bool:
        calls.append(result.step)
        return result.step != "s"

    flow = Workflow([Step("s", READER, "x", retries=1, gate=gate, on_reject=lambda result, ctx: "more"),
                     Step("each", READER, "{item}", over=lambda ctx: [1, 2])])
    first, done = await run(flow, runtime, Agents())
    again = Agents()
    replayed, executor = await run(flow, runtime, again, recorded=dict(done.recorded))
    assert again.calls == [] and executor.ran == [] and calls == ["s", "s#round2"]
    assert replayed == first and sorted(executor.log) == sorted(done.log)
    # A run that stopped after its first step's updates were recorded: only the rest runs again.
    cut = done.log.index("settle:s") + 1
    partial = {name: done.recorded[name] for name in done.log[:cut]}
    rest = Agents()
    _, executor = await run(flow, runtime, rest, recorded=partial)
    assert rest.labels == ["each[0]", "each[1]"] and "gate:s" not in executor.ran


def test_updates_keep_the_recorded_form() -> None:
    old = {"set": {"a": 1}, "_results": {"a": "R"}, "_sessions": {"a": "s1"}, "_aborted": None}
    updates = Updates.from_record(old)
    assert updates.values == {"a": 1} and updates.failed_at is None and updates.ran_by == {}
    assert Updates.from_record(updates.record()) == updates
    ctx = Context({"_results": {}, "_sessions": {}, "_failed_at": "x", "_aborted": None})
    Updates(values={"b": 2}, failed_at="y", aborted="why").apply(ctx)
    assert ctx["b"] == 2 and ctx.failed_at == "x" and ctx.aborted == "why" and ctx["_ran_by"] == {}


def test_a_loaded_source_becomes_a_definition() -> None:
    flow = Workflow([Step("a", READER, "x")])
    assert as_definition(flow, "f.py:flow") is flow and as_definition(lambda: flow, "f.py:make") is flow
    with pytest.raises(ConfigError, match="f.py:spec is a AgentSpec, not a Workflow"):
        as_definition(READER, "f.py:spec")
    with pytest.raises(ConfigError, match=r"f.py:bad\(\) failed: RuntimeError: no"):
        as_definition(lambda: (_ for _ in ()).throw(RuntimeError("no")), "f.py:bad")


class Verdict(BaseModel):
    passed: bool
    notes: str = ""


class TypedAgents(Agents):
    """Attempts whose output is recorded as plain JSON, as the DBOS executor records it."""

    async def __call__(self, runtime: Runtime, attempt: Attempt) -> StepResult:
        result = await super().__call__(runtime, attempt)
        return dataclasses.replace(result, output={"passed": True, "notes": attempt.label})


async def test_a_typed_step_gives_its_typed_output_to_the_attempt_the_gate_and_the_context(runtime: Runtime) -> None:
    agents, seen = TypedAgents(), []

    def gate(result: StepResult, ctx: StepContext) -> bool:
        seen.append(result.output)
        return True

    flow = Workflow([Step("judge", READER, "judge it", output_type=Verdict, gate=gate),
                     Step("after", READER, lambda ctx: f"passed={ctx['judge'].passed}")])
    ctx, _ = await run(flow, runtime, agents)
    assert agents.calls[0].output_type is Verdict and agents.calls[1].output_type is None
    assert seen == [Verdict(passed=True, notes="judge")] and ctx["judge"] == Verdict(passed=True, notes="judge")
    assert ctx.results["judge"].output == ctx["judge"] and agents.calls[1].prompt == "passed=True"
    assert ctx["after"] == "after did it"  # an untyped step keeps its text


async def test_a_recorded_output_the_type_no_longer_accepts_fails_the_step_in_one_line(runtime: Runtime) -> None:
    class Strict(BaseModel):
        count: int

    flow = Workflow([Step("judge", READER, "judge it", output_type=Strict)])
    ctx, _ = await run(flow, runtime, TypedAgents())
    assert ctx.failed_at == "judge" and "judge" not in ctx
    assert ctx.results["judge"].error == "the recorded output does not match: Strict: count: Field required"


def test_an_output_type_that_is_neither_a_model_nor_a_schema_is_one_line() -> None:
    with pytest.raises(FlowError, match=r"^step s: output_type must be a pydantic model class or a JSON schema"):
        Step("s", READER, "x", output_type=str)
    with pytest.raises(FlowError, match=r"^step s: output_type: the schema's top level must be an object"):
        Step("s", READER, "x", output_type={"type": "string"})
