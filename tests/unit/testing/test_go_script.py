"""`go_script` gives the main thread's replies of a `flower go` in its order, each read back by go's own
parsers (issue #28 item 7)."""

from __future__ import annotations

import pytest

from flower.errors import ScriptError
from flower.go.bequest import Bequest
from flower.go.flow import CODER, parse_bequest
from flower.human.channel import HumanChannel
from flower.human.documents import Brief, Goal, Verdict
from flower.testing import GoRound, Reply, Step, Text, ToolUse, go_dispatch, go_script, text

BRIEF = Brief("Quoted newlines import.", "- impl.txt says two", "Nothing else.", "RFC 4180 quoting.")
GOAL = Goal("Quoted newlines import.", ("impl.txt says two",))
BEQUEST = Bequest(what="A CSV importer.", workbench=".flower/", acceptance="All met.", dead_ends="Round one.")


def said(step: Step) -> str:
    assert isinstance(step, Reply) and isinstance(step.blocks[-1], Text)
    return step.blocks[-1].text


def test_the_replies_come_in_go_order_and_parse_back_as_written() -> None:
    not_yet = Verdict("not_yet", "impl.txt says one.", ("impl.txt says two",))
    rounds = [GoRound([go_dispatch("CODE-ONE", "change impl.txt"), text("round one done")], not_yet),
              GoRound([text("round two done")], Verdict("achieved", "impl.txt says two."))]
    steps = go_script(asks=[("Which quoting rules?", ["RFC 4180", "Excel"])], brief=BRIEF, goal=GOAL,
                      rounds=rounds, bequest=BEQUEST)
    assert len(steps) == 9  # ask, brief, goal, dispatch, text, verdict, text, verdict, bequest
    ask, dispatch = steps[0], steps[3]
    assert isinstance(ask, Reply) and isinstance(ask.blocks[0], ToolUse)
    assert ask.blocks[0].name == HumanChannel().ask_tool
    assert ask.blocks[0].input == {"question": "Which quoting rules?", "options": ["RFC 4180", "Excel"]}
    assert isinstance(dispatch, Reply) and isinstance(dispatch.blocks[0], ToolUse)
    assert dispatch.blocks[0].name == "Agent" and dispatch.blocks[0].input["subagent_type"] == CODER
    assert dispatch.blocks[0].input["prompt"] == "CODE-ONE: change impl.txt"
    assert Brief.parse(said(steps[1])) == BRIEF
    assert Goal.parse(said(steps[2])) == GOAL
    assert [said(steps[4]), said(steps[6])] == ["round one done", "round two done"]
    assert Verdict.parse(said(steps[5])) == not_yet
    assert Verdict.parse(said(steps[7])) == Verdict("achieved", "impl.txt says two.")
    assert parse_bequest(said(steps[8]), request="x", workbench_hint="y") == BEQUEST


def test_a_wake_and_a_clarify_only_run() -> None:
    woken = go_script(brief=None, goal=GOAL, rounds=[GoRound([text("done")], Verdict("achieved"))], bequest=BEQUEST)
    assert [said(s).splitlines()[0] for s in woken[:3]] == ["## Goal", "done", "## Verdict"]
    assert parse_bequest(said(woken[3]), request="x", workbench_hint="y") == BEQUEST
    assert len(go_script(brief=BRIEF)) == 1
    assert len(go_script(brief=BRIEF, rounds=[GoRound([text("done")])], bequest=BEQUEST)) == 3  # --no-goal


@pytest.mark.parametrize("verdict", [Verdict("achieved", "All checks hold."), Verdict("unreachable", "No network."),
                                     Verdict("not_yet", "", ("a", "b")), Verdict()])
def test_every_verdict_reads_back_as_scripted(verdict: Verdict) -> None:
    (*_, reply) = go_script(brief=None, goal=GOAL, rounds=[GoRound([text("done")], verdict)])
    assert Verdict.parse(said(reply)) == verdict


@pytest.mark.parametrize(("rounds", "goal", "says"), [
    ([GoRound([text("a")])], GOAL, "go round 1 has no verdict"),
    ([GoRound([text("a")], Verdict("achieved"))], None, "go round 1 has a verdict but the script has no goal"),
    ([GoRound([text("a")]), GoRound([text("b")])], None, "go round 2 follows round 1"),
    ([GoRound([text("a")], Verdict("achieved")), GoRound([text("b")], Verdict("achieved"))], GOAL,
     "go round 1 is achieved"),
])
def test_a_script_go_cannot_follow_is_refused_naming_the_round(rounds: list[GoRound], goal: Goal | None,
                                                                says: str) -> None:
    with pytest.raises(ScriptError, match=says):
        go_script(brief=BRIEF, goal=goal, rounds=rounds)
