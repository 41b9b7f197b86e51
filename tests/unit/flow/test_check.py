"""`flower.flow.check.problems` (issue #28 item 8): every problem of a built spec or workflow, one line each."""

from __future__ import annotations

from pydantic import BaseModel

from flower import AgentSpec, Step, Workflow, parallel
from flower.agent.roles import coordinator, worker
from flower.flow.check import problems, summary


class Verdict(BaseModel):
    passed: bool


def lead() -> AgentSpec:
    return coordinator("lead", "Goal.", {"reader": worker("reads", "You read.", tools=["Read"])})


def test_a_sound_workflow_has_no_problem_and_a_summary() -> None:
    shared = lead()
    flow = Workflow([Step("a", shared, "x"), parallel(Step("b", shared, "y"), Step("c", shared, "z",
                                                                                     output_type=Verdict))])
    assert problems(flow) == []
    assert summary(flow) == "workflow workflow: 3 steps (1 typed), 1 spec, 1 worker"
    assert problems(shared) == [] and summary(shared) == "spec lead, 1 worker"


def test_every_problem_of_a_changed_spec_is_reported_once_per_spec() -> None:
    shared = lead()
    shared.allowed_tools.append("Bsh")
    shared.agents["reader"].tools.append("Raed")  # type: ignore[index, union-attr]
    shared.agents["reader"].maxTurns = 0  # type: ignore[index]
    shared.leads = ("writer",)
    flow = Workflow([Step("a", shared, "x"), Step("b", shared, "y")])
    assert problems(flow) == [
        "step 'a' (spec 'lead'): allowed_tools names 'Bsh', which is not a tool of the Claude Code CLI "
        "(did you mean 'Bash'?)",
        "step 'a' (spec 'lead'): leads names 'writer', which is not one of its workers (reader)",
        "step 'a' (spec 'lead'), worker 'reader': tools names 'Raed', which is not a tool of the Claude Code CLI "
        "(did you mean 'Read'?)",
        "step 'a' (spec 'lead'), worker 'reader': max_turns must be at least 1, not 0",
    ]


def test_a_coordinator_without_workers_and_a_bad_output_type() -> None:
    spec = lead()
    spec.agents = {}
    step = Step("s", spec, "x", output_type=Verdict)
    step.output_type = {"type": "object", "properties": {"n": {"type": "integr"}}}
    assert problems(Workflow([step])) == [
        "step 's' (spec 'lead') delegates but names no worker: it can dispatch nothing",
        "step 's': output_type is not a valid JSON schema (properties/n/type): 'integr' is not valid under any of "
        "the given schemas",
    ]
