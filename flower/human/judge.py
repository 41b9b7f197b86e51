"""`goal_step` and `with_goal`: a checkable goal, and an independent judge after every round of work (L-10).

`goal_step` turns the brief into a `Goal` (a statement and checks) and freezes it in the workbench notes; checks
marked "[cannot verify here: ...]" are announced once as an event, so the human can edit them before the work.
`with_goal(work, channel)` runs the work, then a judge: a fresh read-only session each round (never resumed,
never the worker's session) that looks at the workspace itself. Its verdict decides:
- achieved -> done;
- not yet, or a verdict that cannot be read -> the worker's own session resumes with `Verdict.feedback()`;
- unreachable -> the human is asked (a framework question, outside `max_asks`): accept the result, amend the
  goal, or overrule the judge; no answer -> stop, with the reason written to the notes and in the outcome.
`rounds` is the total number of work rounds (1 = work once, judge once).

`GoalStep.run(runtime)` and `WithGoal.run(runtime)` are the adapters that run them over a `Runtime` directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower.core import texts
from flower.core.events import Event, OnEvent, emit
from flower.core.spec import AgentSpec
from flower.core.steps import StepResult
from flower.errors import ConfigError
from flower.human.channel import HumanChannel
from flower.human.clarify import default_path
from flower.human.documents import Brief, Goal, Verdict
from flower.human.roles import goal_setter, judge

__all__ = ["GOAL_FILE", "GoalOutcome", "GoalStep", "Judged", "WithGoal", "Work", "goal_step", "with_goal"]

GOAL_FILE = "goal.md"


@dataclass(frozen=True)
class Work:
    """One step of work to judge: a spec and its prompt."""

    spec: AgentSpec
    prompt: str
    name: str | None = None
    """Step name; the spec's name by default."""


@dataclass(frozen=True)
class GoalOutcome:
    goal: Goal
    path: Path
    skipped: bool
    results: tuple[StepResult, ...] = ()

    @property
    def ok(self) -> bool:
        return self.goal.complete


@dataclass
class GoalStep:
    """A goal step; `run(runtime, brief)` runs it."""

    goal_path: Path | None = None
    """Default: `goal.md` in the workbench notes."""
    name: str = "goal"
    spec: AgentSpec | None = None
    can_run: bool = False
    """The judge will be able to run commands, so checks may be phrased as commands."""
    always_set: bool = False
    retries: int = 1

    def path(self, runtime: Any) -> Path:
        return self.goal_path if self.goal_path is not None else default_path(runtime, GOAL_FILE)

    async def run(self, runtime: Any, brief: Brief | str, *, on_event: OnEvent | None = None) -> GoalOutcome:
        path = self.path(runtime)
        existing = Goal.load(path)
        if existing is not None and existing.complete and not self.always_set:
            return GoalOutcome(existing, path, skipped=True)
        block = brief.prompt_block() if isinstance(brief, Brief) else str(brief).strip()
        spec = self.spec if self.spec is not None else goal_setter(name=self.name, can_run=self.can_run)
        result = await runtime.run(spec, texts.GOAL_PROMPT.format(brief=block or "(no brief)"),
                                   step_name=self.name, on_event=on_event)
        results = [result]
        goal = Goal.parse(result.text)
        for attempt in range(self.retries):
            if goal.complete or not result.session_id:
                break
            result = await runtime.run(spec, texts.GOAL_MISSING.format(missing=", ".join(goal.missing())),
                                       resume=result.session_id, step_name=f"{self.name}#retry{attempt + 2}",
                                       on_event=on_event)
            results.append(result)
            goal = Goal.parse(result.text)
        if goal.complete:
            goal.write(path)
            if goal.unverifiable:
                emit(on_event, Event("system", texts.GOAL_UNVERIFIABLE.format(
                    count=len(goal.unverifiable), total=len(goal.checks), path=path),
                    payload={"subtype": "goal_unverifiable", "unverifiable": list(goal.unverifiable),
                             "total": len(goal.checks), "path": str(path)}))
        return GoalOutcome(goal, path, skipped=False, results=tuple(results))


def goal_step(*, goal_path: str | Path | None = None, name: str = "goal", spec: AgentSpec | None = None,
              can_run: bool = False, always_set: bool = False, instructions: str = "") -> GoalStep:
    """A step that turns the brief into a checkable goal, frozen at `goal_path`."""
    if spec is None and instructions:
        spec = goal_setter(name=name, instructions=instructions, can_run=can_run)
    return GoalStep(Path(goal_path) if goal_path is not None else None, name, spec, can_run, always_set)


@dataclass(frozen=True)
class Judged:
    """How a judged piece of work ended."""

    achieved: bool
    """The judge said achieved."""
    accepted: bool = False
    """The judge said unreachable and the human accepted the result as it is."""
    stopped: str | None = None
    """Why the run stopped without either (unreachable and unanswered)."""
    goal: Goal = field(default_factory=Goal)
    verdicts: tuple[Verdict, ...] = ()
    results: tuple[StepResult, ...] = ()
    """The worker's rounds."""
    judges: tuple[StepResult, ...] = ()
    """The judge sessions, one per round."""

    @property
    def ok(self) -> bool:
        return self.achieved or self.accepted

    @property
    def rounds(self) -> int:
        return len(self.results)

    @property
    def result(self) -> StepResult | None:
        """The worker's last round."""
        return self.results[-1] if self.results else None


@dataclass
class WithGoal:
    """Work judged against a goal; `run(runtime)` runs it."""

    work: Work
    channel: HumanChannel | None
    goal_path: Path | None = None
    rounds: int = 3
    judge_can_run: bool = False
    name: str | None = None
    """The judge's step name (numbered per round); "<work>:judge" by default."""
    judge_spec: AgentSpec | None = None

    async def run(self, runtime: Any, *, goal: Goal | None = None, on_event: OnEvent | None = None) -> Judged:
        path = self.goal_path if self.goal_path is not None else default_path(runtime, GOAL_FILE)
        goal = goal if goal is not None else Goal.load(path)
        if goal is None or not goal.complete:
            raise ConfigError(f"no complete goal to judge against at {path}: run goal_step first or write it")
        work_name = self.work.name or self.work.spec.name
        label = self.name or f"{work_name}:judge"
        spec = self.judge_spec if self.judge_spec is not None else judge(name=label, can_run=self.judge_can_run)
        state = _Rounds(goal=goal)
        result = await runtime.run(self.work.spec, self.work.prompt, step_name=work_name, on_event=on_event)
        state.results.append(result)
        for round_no in range(1, max(1, self.rounds) + 1):
            prompt = texts.JUDGE_PROMPT.format(goal=state.goal.prompt_block(), round=round_no,
                                               reply=result.text or "(no reply)")
            verdict_run = await runtime.run(spec, prompt, step_name=f"{label}#{round_no}", on_event=on_event)
            state.judges.append(verdict_run)
            verdict = Verdict.parse(verdict_run.text)
            state.verdicts.append(verdict)
            if verdict.achieved:
                return state.done(achieved=True)
            if verdict.unreachable:
                feedback, ending = await self._unreachable(verdict, state, path, runtime)
                if ending is not None:
                    return ending
            else:
                feedback = verdict.feedback()
            if round_no >= self.rounds or not result.session_id:
                break
            result = await runtime.run(self.work.spec, feedback, resume=result.session_id,
                                       step_name=f"{work_name}#round{round_no + 1}", on_event=on_event)
            state.results.append(result)
        return state.done(achieved=False)

    async def _unreachable(self, verdict: Verdict, state: _Rounds, path: Path, runtime: Any) -> tuple[str, Judged | None]:
        """Ask the human; returns the feedback for the next round, or how the work ends."""
        reason = verdict.reason or "no reason given"
        choice = await self._ask(texts.UNREACHABLE_QUESTION.format(reason=reason), texts.UNREACHABLE_OPTIONS)
        if choice is None:
            why = texts.JUDGE_STOPPED.format(reason=reason)
            _note(default_path(runtime, f"{path.stem}-stopped.md"), why, verdict)
            return "", state.done(achieved=False, stopped=why)
        picked = _option(choice, texts.UNREACHABLE_OPTIONS)
        if picked == 0:
            return "", state.done(achieved=False, accepted=True)
        if picked == 1:
            extra = await self._ask(texts.AMEND_QUESTION, ())
            if extra is None:
                why = texts.JUDGE_STOPPED.format(reason=reason)
                _note(default_path(runtime, f"{path.stem}-stopped.md"), why, verdict)
                return "", state.done(achieved=False, stopped=why)
            state.goal = state.goal.amend(extra)
            state.goal.write(path)
            return Verdict("not_yet", texts.JUDGE_AMENDED.format(extra=extra), verdict.failed).feedback(), None
        return Verdict("not_yet", texts.JUDGE_OVERRULED.format(answer=choice), verdict.failed).feedback(), None

    async def _ask(self, question: str, options: tuple[str, ...]) -> str | None:
        if self.channel is None:
            return None
        ask = await self.channel.ask(question, list(options), framework=True)
        return ask.answer if ask.answered and ask.answer.strip() else None


@dataclass
class _Rounds:
    goal: Goal
    verdicts: list[Verdict] = field(default_factory=list)
    results: list[StepResult] = field(default_factory=list)
    judges: list[StepResult] = field(default_factory=list)

    def done(self, *, achieved: bool, accepted: bool = False, stopped: str | None = None) -> Judged:
        return Judged(achieved, accepted, stopped, self.goal, tuple(self.verdicts), tuple(self.results),
                      tuple(self.judges))


def _option(answer: str, options: tuple[str, ...]) -> int | None:
    """Which option an answer picks: its number, or its text (a prefix either way); None for free text."""
    said = answer.strip().lower()
    if said.isdigit() and 1 <= int(said) <= len(options):
        return int(said) - 1
    for index, option in enumerate(options):
        text = option.lower()
        if said and (text.startswith(said) and len(said) >= 3 or said.startswith(text)):
            return index
    return None


def _note(path: Path, why: str, verdict: Verdict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"# Stopped\n\n{why}\n\n{verdict.to_markdown()}\n")


def with_goal(work: Work, channel: HumanChannel | None, *, rounds: int = 3, judge_can_run: bool = False,
              goal_path: str | Path | None = None, name: str | None = None,
              judge_spec: AgentSpec | None = None) -> WithGoal:
    """`work`, judged against the goal after every round (at most `rounds` rounds)."""
    if rounds < 1:
        raise ConfigError(f"with_goal needs rounds >= 1, not {rounds}")
    return WithGoal(work, channel, Path(goal_path) if goal_path is not None else None, rounds, judge_can_run, name,
                    judge_spec)
