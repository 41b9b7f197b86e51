"""Clarify, goal and judge through the real CLI (issue #14, L-9, L-10).

Every session (worker, clarifier, goal setter, judge) is a main thread of its own, so the scripted main
thread answers them in the order they run.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from flower import texts
from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.human.channel import HumanChannel
from flower.human.clarify import clarify_step
from flower.human.documents import Brief, Goal
from flower.human.judge import Work, goal_step, with_goal
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ASK = "mcp__human__ask"
CLARIFIED = """I looked at the repository. For reference, the old config loader:
```markdown
## Goal
FAKE GOAL FROM PASTED CODE
## Bounds
FAKE BOUNDS
```
## Goal
`flower report --json` prints the run summary as JSON.
## Acceptance criteria
- `flower report --json runs` exits 0
- its output parses as JSON
## Bounds
No change to the table output.
## Unknowns and assumptions
Field names: assumed equal to the table's column names.
"""


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path) -> Runtime:
    return Runtime(workspace, run_dir=tmp_path / "runs", env=api.cli_env(tmp_path / "home"), run_id="run-9")


def answer_when_asked(channel: HumanChannel, reply: str) -> threading.Thread:
    def human() -> None:
        deadline = time.monotonic() + 60
        while not channel.pending() and time.monotonic() < deadline:
            time.sleep(0.02)
        channel.answer(channel.pending()[0].id, reply)

    thread = threading.Thread(target=human, daemon=True)
    thread.start()
    return thread


async def test_clarify_asks_is_walled_freezes_only_the_real_sections_and_is_skipped_next_time(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    target = workspace / "written-by-clarifier.txt"
    scripted_api.script([
        tool_use("Write", {"file_path": str(target), "content": "code"}),
        tool_use(ASK, {"question": "JSON or CSV?", "options": ["JSON", "CSV"]}),
        text(CLARIFIED),
    ])
    rt = runtime(scripted_api, tmp_path, workspace)
    ch = HumanChannel(timeout_s=60).bind(rt)
    helper = answer_when_asked(ch, "JSON")
    outcome = await clarify_step(ch).run(rt, "add a --json flag to flower report")
    helper.join(5)
    main = scripted_api.main_requests
    assert "not among the tools this agent (clarify) may use" in main[1].result_text()
    assert not target.exists()
    assert main[2].result_text() == texts.ASK_ANSWERED.format(answer="JSON")
    assert outcome.ok and not outcome.skipped
    frozen = outcome.path.read_text()
    assert outcome.path == rt.workbench.notes / "brief.md"  # type: ignore[union-attr]
    assert "FAKE" not in frozen and "old config loader" not in frozen
    assert Brief.load(outcome.path) == outcome.brief
    assert outcome.brief.bounds == "No change to the table output."
    assert outcome.prompt_block.startswith("## Goal\n`flower report --json` prints the run summary as JSON.")
    requests = len(scripted_api.requests)
    again = await clarify_step(ch).run(rt, "add a --json flag to flower report")
    assert again.skipped and again.brief == outcome.brief and len(scripted_api.requests) == requests


async def test_an_incomplete_brief_is_sent_back_once_with_the_missing_sections_named(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([text("## Goal\nShip it.\n## Bounds\nnone"), text(CLARIFIED)])
    rt = runtime(scripted_api, tmp_path, workspace)
    outcome = await clarify_step(None).run(rt, "ship it")
    assert outcome.ok and len(outcome.results) == 2
    assert outcome.results[1].session_id == outcome.results[0].session_id  # resumed, not restarted
    retry = scripted_api.main_requests[1].last_user_text()
    assert "Acceptance criteria, Unknowns and assumptions missing" in retry


async def test_goal_step_freezes_the_goal_and_announces_unverifiable_checks_once(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([text("## Goal\nJSON output works.\n## Checks\n- `flower report --json runs` exits 0\n"
                              "- [cannot verify here: needs the production store] numbers match production\n")])
    rt = runtime(scripted_api, tmp_path, workspace)
    events: list[Event] = []
    brief = Brief.parse(CLARIFIED)
    outcome = await goal_step().run(rt, brief, on_event=events.append)
    assert outcome.ok and Goal.load(outcome.path) == outcome.goal
    assert "prints the run summary as JSON" in scripted_api.main_requests[0].text
    announced = [e for e in events if e.payload.get("subtype") == "goal_unverifiable"]
    assert len(announced) == 1 and announced[0].payload["total"] == 2
    assert announced[0].text.startswith("1 of 2 checks cannot be verified here")
    assert (await goal_step().run(rt, brief)).skipped


def solo() -> AgentSpec:
    return AgentSpec(name="worker", instructions="Do the work.", allowed_tools=["Read", "Bash"])


GOAL = Goal("The README documents --json.", ("README.md mentions --json",))


async def test_not_yet_resumes_the_worker_with_feedback_then_achieved(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([
        text("round one: wrote the flag"),
        text("## Verdict\nnot yet\n## Reason\nREADME.md has no --json section.\n## Failed\n- README.md mentions --json"),
        text("round two: documented it"),
        text("## Verdict\nachieved\n## Reason\nREADME.md line 12 documents --json."),
    ])
    rt = runtime(scripted_api, tmp_path, workspace)
    GOAL.write(rt.workbench.notes / "goal.md")  # type: ignore[union-attr]
    judged = await with_goal(Work(solo(), "Add --json."), None).run(rt)
    assert judged.achieved and judged.ok and judged.rounds == 2
    assert [v.state for v in judged.verdicts] == ["not_yet", "achieved"]
    first, second = judged.results
    assert second.session_id == first.session_id and second.resumed  # the worker's own session goes on
    judges = {j.session_id for j in judged.judges}
    assert len(judges) == 2 and first.session_id not in judges  # a fresh judge every round
    resumed = scripted_api.main_requests[2].last_user_text()
    assert "README.md has no --json section." in resumed and "- README.md mentions --json" in resumed
    judge_request = scripted_api.main_requests[1]
    assert "round one: wrote the flag" in judge_request.last_user_text()
    assert "README.md mentions --json" in judge_request.last_user_text()
    steps = [s["step"] for s in json.loads((rt.run_dir / "manifest.json").read_text())["steps"]]
    assert steps == ["worker", "worker:judge#1", "worker#round2", "worker:judge#2"]


async def test_unreachable_with_no_answer_stops_with_the_reason_on_disk(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([text("did what I could"),
                         text("## Verdict\nunreachable\n## Reason\nThe check needs a GPU this machine lacks.")])
    rt = runtime(scripted_api, tmp_path, workspace)
    GOAL.write(rt.workbench.notes / "goal.md")  # type: ignore[union-attr]
    ch = HumanChannel(max_asks=0, timeout_s=0.3)  # no budget for the model; the framework still asks
    judged = await with_goal(Work(solo(), "Add --json."), ch).run(rt)
    assert not judged.ok and judged.stopped is not None and "needs a GPU" in judged.stopped
    assert judged.rounds == 1
    (asked,) = ch.asks
    assert asked.framework and asked.state == "timeout" and asked.options == texts.UNREACHABLE_OPTIONS
    note = (rt.workbench.notes / "goal-stopped.md").read_text()  # type: ignore[union-attr]
    assert "needs a GPU" in note and "unreachable" in note


async def test_an_unparseable_verdict_is_not_achieved(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([text("done"), text("Looks plausible to me, I suppose."),
                         text("tried again"), text("## Verdict\nachieved")])
    rt = runtime(scripted_api, tmp_path, workspace)
    GOAL.write(rt.workbench.notes / "goal.md")  # type: ignore[union-attr]
    judged = await with_goal(Work(solo(), "Add --json."), None, rounds=2).run(rt)
    assert [v.state for v in judged.verdicts] == ["", "achieved"] and judged.rounds == 2
    assert texts.VERDICT_NO_REASON in scripted_api.main_requests[2].last_user_text()


async def test_rounds_spent_without_the_goal_stop_with_the_last_reason(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([text("done"), text("Seems fine, probably.")])
    rt = runtime(scripted_api, tmp_path, workspace)
    GOAL.write(rt.workbench.notes / "goal.md")  # type: ignore[union-attr]
    judged = await with_goal(Work(solo(), "Add --json."), None, rounds=1).run(rt)
    assert not judged.ok and judged.rounds == 1 and judged.verdicts[0].state == ""
    assert judged.stopped == texts.JUDGE_ROUNDS_SPENT.format(rounds=1, reason=texts.VERDICT_NO_REASON)


async def test_mail_sent_before_the_brief_is_frozen_stays_in_it(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([text(CLARIFIED)])
    rt = runtime(scripted_api, tmp_path, workspace)
    ch = HumanChannel().bind(rt)  # mail goes to notes/brief.md by default
    ch.send("Keep the output under 80 columns.")
    outcome = await clarify_step(ch).run(rt, "add a --json flag")
    assert outcome.ok and outcome.brief.additions == ("Keep the output under 80 columns.",)
    assert Brief.load(outcome.path) == outcome.brief
    assert outcome.prompt_block.endswith("## Added during the run\nKeep the output under 80 columns.")


@pytest.mark.parametrize("choice", ["accept", "amend", "overrule"])
async def test_unreachable_then_the_human_accepts_amends_or_overrules(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, choice: str
) -> None:
    unreachable = text("## Verdict\nunreachable\n## Reason\nREADME.md is read-only here.\n## Failed\n- README.md mentions --json")
    later = [] if choice == "accept" else [text("round two"), text("## Verdict\nachieved")]
    scripted_api.script([text("round one"), unreachable, *later])
    answers = {"accept": ["1"], "amend": ["amend the goal", "docs/json.md may hold it instead"],
               "overrule": ["README.md is writable: chmod it first"]}[choice]

    def human(event: Event) -> None:
        if event.kind == "ask" and event.payload["state"] == "asked":
            ch.answer(event.payload["id"], answers.pop(0))

    rt = runtime(scripted_api, tmp_path, workspace)
    path = GOAL.write(rt.workbench.notes / "goal.md")  # type: ignore[union-attr]
    ch = HumanChannel(timeout_s=30, on_event=human)
    judged = await with_goal(Work(solo(), "Add --json."), ch).run(rt)
    assert judged.ok and answers == [] and all(a.framework for a in ch.asks)
    if choice == "accept":
        assert judged.accepted and not judged.achieved and judged.rounds == 1
        return
    assert judged.achieved and judged.rounds == 2
    feedback = scripted_api.main_requests[2].last_user_text()
    assert "- README.md mentions --json" in feedback
    if choice == "amend":
        assert "docs/json.md may hold it instead" in feedback
        goal = Goal.load(path)
        assert goal is not None and goal.statement.startswith(GOAL.statement)
        assert goal.statement.endswith("(amended) docs/json.md may hold it instead")
        assert "(amended) docs/json.md" in scripted_api.main_requests[3].last_user_text()  # the judge sees it
    else:
        assert "README.md is writable: chmod it first" in feedback
