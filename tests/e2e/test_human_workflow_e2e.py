"""Clarify, goal and judge as workflow steps on DBOS, through the real CLI (issue #14, L-6, L-9, L-10).

DBOS runs for real on SQLite in the test's run dir; each decision of the human steps (skip, freeze, judge,
feedback) is a checkpoint of the workflow.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from flower import texts
from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.flow import engine
from flower.flow.step import Step
from flower.flow.workflow import Workflow
from flower.human import Brief, Goal, HumanChannel, clarify_step, goal_step, with_goal
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BRIEF = ("## Goal\nA CHANGES file.\n## Acceptance criteria\n- CHANGES exists\n## Bounds\nNothing else.\n"
         "## Unknowns and assumptions\nNone.\n")
WORKER = AgentSpec(name="worker", instructions="Do the work.", allowed_tools=["Read"])


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    yield
    if engine.current() is not None:
        engine.destroy()


def workflow(channel: HumanChannel) -> Workflow:
    clarify = clarify_step(channel)
    return Workflow([
        clarify.as_step("write a CHANGES file"),
        goal_step().as_step(clarify.block),
        with_goal(Step("work", WORKER, lambda ctx: f"Do this:\n{clarify.block(ctx)}"), channel, rounds=3),
    ], name="human-flow")


async def test_clarify_goal_and_judged_work_as_one_durable_workflow(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    scripted_api.script([
        tool_use("mcp__human__ask", {"question": "Markdown or plain text?"}),
        text("```\n## Goal\nFAKE\n```\n## Goal\nA CHANGES file.\n## Bounds\nNothing else."),  # incomplete
        text(BRIEF),
        text("## Goal\nCHANGES exists.\n## Checks\n- CHANGES exists at the root\n"
             "- [cannot verify here: needs the release server] the release page links it\n"),
        text("round one"),
        text("## Verdict\nnot yet\n## Reason\nNo CHANGES at the root.\n## Failed\n- CHANGES exists at the root"),
        text("round two"),
        text("## Verdict\nachieved\n## Reason\nCHANGES is there."),
    ])
    ws = tmp_path / "ws"
    ws.mkdir()
    rt = Runtime(ws, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    events: list[Event] = []

    def ui(event: Event) -> None:
        events.append(event)
        if event.kind == "ask" and event.payload["state"] == "asked":
            channel.answer(event.payload["id"], "plain text")

    channel = HumanChannel(timeout_s=30, on_event=ui).bind(rt)
    ctx = await workflow(channel).run(rt, on_event=ui)
    assert ctx.ok, (ctx.failed_at, ctx.aborted)
    notes = rt.workbench.notes  # type: ignore[union-attr]
    brief = Brief.load(notes / "brief.md")
    assert brief is not None and brief.complete and "FAKE" not in (notes / "brief.md").read_text()
    assert ctx["clarify"] == brief.prompt_block()
    main = scripted_api.main_requests
    assert main[1].result_text() == texts.ASK_ANSWERED.format(answer="plain text")
    assert "Acceptance criteria, Unknowns and assumptions missing" in main[2].last_user_text()
    goal = Goal.load(notes / "goal.md")
    assert goal is not None and len(goal.unverifiable) == 1
    assert [e.payload["total"] for e in events if e.payload.get("subtype") == "goal_unverifiable"] == [2]
    assert "No CHANGES at the root." in main[6].last_user_text()  # the worker's session resumed with feedback
    assert ctx.results["work"].step == "work#round2" and ctx.results["work"].resumed
    assert ctx.results["work"].session_id == ctx.sessions["work"]
    assert (notes / "work-judge-round1.md").exists() and (notes / "work-judge-round2.md").exists()
    # A new run in the same workspace skips clarify and goal (their files are on disk) and still gives the
    # downstream steps the brief; the judge's round files go on counting.
    requests = len(scripted_api.requests)
    scripted_api.script([text("round one again"), text("## Verdict\nachieved")])
    rt2 = Runtime(ws, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))  # a new run id
    again = await workflow(channel).run(rt2, new=True)
    assert again.ok and "clarify" not in again.results and "goal" not in again.results
    assert len(scripted_api.requests) == requests + 2
    assert scripted_api.main_requests[-2].last_user_text().endswith(f"Do this:\n{brief.prompt_block()}")
    assert (notes / "work-judge-round3.md").exists()


async def test_an_unreachable_verdict_nobody_answers_aborts_the_workflow_with_the_reason(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    scripted_api.script([text("did what I could"),
                         text("## Verdict\nunreachable\n## Reason\nThe release server is offline.")])
    ws = tmp_path / "ws"
    ws.mkdir()
    rt = Runtime(ws, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    notes = rt.workbench.notes  # type: ignore[union-attr]
    Goal("CHANGES is published.", ("the release page links CHANGES",)).write(notes / "goal.md")
    channel = HumanChannel(timeout_s=0.2)
    wf = Workflow([with_goal(Step("work", WORKER, "publish"), channel), Step("after", WORKER, "never")], name="abort")
    ctx = await wf.run(rt)
    assert ctx.failed_at == "work" and "The release server is offline." in (ctx.aborted or "")
    assert "after" not in ctx and len(scripted_api.requests) == 2
    assert "The release server is offline." in (notes / "goal-stopped.md").read_text()
    assert [(a.framework, a.state) for a in channel.asks] == [(True, "timeout")]
