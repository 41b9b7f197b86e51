"""The starter flow of `flower go` (L-11): clarify -> goal -> work judged in rounds -> bequest.

One durable workflow (`flower.flow.Workflow`, name "go") per workspace and run dir:
- clarify: a read-only clarifier asks through the channel and freezes notes/brief.md (skipped when a
  complete brief is on disk);
- goal: a checkable goal in notes/goal.md (skipped with `no_goal`);
- work: a coordinator with one coder worker (`isolate` puts each dispatch in its own git worktree), judged
  after every round by a fresh read-only session (`with_goal`, `rounds`);
- bequest: the work session, forked, writes the five sections; the framework puts the same body into a
  managed block of CLAUDE.md and AGENTS.md (`flower.go.bequest`), with a mechanical fallback.
Running it again continues the unfinished run (the workflow engine's continuity); `wake` re-derives the
goal from a brief that the human amended on waking.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower import texts
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.flow.context import StepContext
from flower.flow.step import Step
from flower.flow.workflow import Workflow
from flower.go.bequest import Bequest, write_bequest
from flower.human.channel import HumanChannel
from flower.human.clarify import ClarifyStep, step_runtime
from flower.human.judge import GoalStep, with_goal
from flower.runtime.steps import StepResult
from flower.util.sections import labelled_sections

__all__ = ["BEQUEST_ALIASES", "CODER", "NAME", "GoOptions", "lead_spec", "parse_bequest", "starter_flow"]

NAME = "go"
CODER = "coder"
"""The name of the coordinator's one worker (what a dispatch's `subagent_type` says)."""

BEQUEST_ALIASES: dict[str, tuple[str, ...]] = {
    "what": ("What this is", "What", "About", "这是什么", "项目是什么"),
    "acceptance": ("Acceptance", "Acceptance met", "验收", "验收情况"),
    "generated": ("Generated files", "Generated", "生成的文件", "生成文件"),
    "dead_ends": ("Dead ends", "死路", "走不通的路"),
    "workbench": ("Workbench", "Where the workbench is", "工作台"),
}


@dataclass(frozen=True)
class GoOptions:
    """The flags of `flower go` that shape the flow (L-11)."""

    rounds: int = 3
    no_goal: bool = False
    clarify_only: bool = False
    isolate: bool = False
    judge_can_run: bool = False
    model: str | None = None
    budget: float | None = None


def parse_bequest(text: str, *, request: str, workbench_hint: str) -> Bequest:
    """The finishing session's note as a `Bequest` (the shared section parser; the fallback when the
    required sections are missing)."""
    found: dict[str, str] = {}
    for section in labelled_sections(text or "", BEQUEST_ALIASES):
        if section.body.strip() and not found.get(section.key):
            found[section.key] = section.body.strip()
    return Bequest.from_sections(found, request=request, workbench_hint=workbench_hint)


def lead_spec(channel: HumanChannel, options: GoOptions) -> AgentSpec:
    coder = worker(texts.GO_CODER_DESCRIPTION, texts.GO_CODER_PROMPT, isolate=options.isolate)
    return coordinator(NAME, texts.GO_COORDINATOR, {CODER: coder}, channel=channel, model=options.model,
                       max_budget_usd=options.budget)


def starter_flow(request: str, channel: HumanChannel, options: GoOptions = GoOptions()) -> Workflow:
    """The workflow `flower go` runs for `request`."""
    clarify = ClarifyStep(channel=channel)
    steps: list[Any] = [clarify.as_step(request)]
    if options.clarify_only:
        return Workflow(steps, name=NAME)
    goal = GoalStep(can_run=options.judge_can_run)
    if not options.no_goal:
        steps.append(goal.as_step(clarify.block))
    lead = lead_spec(channel, options)

    def work_prompt(ctx: StepContext) -> str:
        goal_block = "" if options.no_goal else goal.block(ctx)
        return texts.GO_WORK.format(brief=clarify.block(ctx), goal=goal_block).strip()

    work = Step("work", lead, work_prompt)
    steps.append(work if options.no_goal else with_goal(work, channel, rounds=options.rounds,
                                                         judge_can_run=options.judge_can_run))

    def bequeath(result: StepResult, ctx: StepContext) -> str:
        runtime = step_runtime(ctx)
        workbench = runtime.workbench
        hint = (f"{workbench.root}: read notes/brief.md and notes/goal.md first; scripts/ and artifacts/ hold "
                "what the run made") if workbench is not None else "no workbench"
        bequest = parse_bequest(getattr(result, "text", "") or "", request=request, workbench_hint=hint)
        try:
            changed = write_bequest(Path(runtime.workspace), bequest)
        except (ConfigError, OSError) as exc:  # a refused or unwritable file must not fail a finished run
            return f"bequest not written: {exc}"
        return f"bequest written to {', '.join(p.name for p in changed) or 'CLAUDE.md, AGENTS.md (unchanged)'}"

    steps.append(Step("bequest", lead, texts.BEQUEST_REQUEST, resume_from="work", fork=True, on_fail="continue",
                      reduce=bequeath))
    return Workflow(steps, name=NAME)

