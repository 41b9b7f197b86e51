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

`GoalStep.run(runtime)` and `WithGoal.run(runtime)` run them over a `Runtime` directly. In a workflow,
`GoalStep.as_step(brief)` is the goal step, and `with_goal(step, channel)` given a `flower.flow.Step` returns
that step with `retries = rounds - 1`, a gate that runs the judge (a fresh session on the run's runtime) and
an `on_reject` that resumes the worker's session with the feedback; every other field is kept. Each round's
verdict and feedback are written to `notes/<judge>-round<N>.md` before the gate returns, so the feedback
survives a crash between the gate's checkpoint and `on_reject`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from flower import texts
from flower.agent.events import Event, OnEvent, emit
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.flow.context import StepContext
from flower.flow.step import Step, StepAbort
from flower.human.channel import HumanChannel
from flower.human.clarify import default_path, step_events, step_runtime
from flower.human.documents import Brief, Goal, Verdict
from flower.human.roles import goal_setter, judge
from flower.runtime.runtime import Runtime
from flower.runtime.steps import StepResult
from flower.util.confined import append_text, read_note, replace_text

__all__ = [
    "GOAL_FILE",
    "Decision",
    "GoalOutcome",
    "GoalStep",
    "Judged",
    "WithGoal",
    "Work",
    "decide_unreachable",
    "goal_step",
    "with_goal",
]

GOAL_FILE = "goal.md"
FEEDBACK_HEAD = "## Feedback\n\n"
_ROUND = re.compile(r"-round(\d+)\.md$")


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

    def path(self, runtime: Runtime) -> Path:
        return self.goal_path if self.goal_path is not None else default_path(runtime, GOAL_FILE)

    async def run(self, runtime: Runtime, brief: Brief | str, *, on_event: OnEvent | None = None) -> GoalOutcome:
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
            _announce(goal, goal.write(path), on_event)
        return GoalOutcome(goal, path, skipped=False, results=tuple(results))


    def block(self, ctx: Mapping[str, Any]) -> str:
        """For downstream prompts in a workflow: this step's output, or the frozen goal's prompt block when the
        step was skipped."""
        if ctx.get(self.name):
            return str(ctx[self.name])
        goal = Goal.load(self.goal_path if self.goal_path is not None else default_path(step_runtime(ctx), GOAL_FILE))
        return goal.prompt_block() if goal is not None else ""

    def as_step(self, brief: str | Callable[..., str]) -> Step:
        """This goal step as a workflow step on `brief` (text, or `brief(ctx)`, e.g. `lambda ctx: ctx["clarify"]`)."""
        fixed = self.goal_path

        def path(ctx: StepContext) -> Path:
            return fixed if fixed is not None else default_path(step_runtime(ctx), GOAL_FILE)

        def prompt(ctx: StepContext) -> str:
            text = brief(ctx) if callable(brief) else brief
            return texts.GOAL_PROMPT.format(brief=(text or "").strip() or "(no brief)")

        def when(ctx: StepContext) -> bool:
            existing = Goal.load(path(ctx))
            return existing is None or not existing.complete

        def gate(result: StepResult, ctx: StepContext) -> bool:
            goal = Goal.parse(result.text)
            if not goal.complete:
                return False
            _announce(goal, goal.write(path(ctx)), step_events(ctx))
            return True

        def on_reject(result: StepResult, ctx: StepContext) -> str:
            return texts.GOAL_MISSING.format(missing=", ".join(Goal.parse(result.text).missing()))

        def reduce(result: StepResult, ctx: StepContext) -> str:
            return (Goal.load(path(ctx)) or Goal.parse(result.text)).prompt_block()

        spec = self.spec if self.spec is not None else goal_setter(name=self.name, can_run=self.can_run)
        return Step(self.name, spec, prompt, retries=self.retries, gate=gate,
                    when=None if self.always_set else when, on_reject=on_reject, reduce=reduce)


def _announce(goal: Goal, path: Path, on_event: OnEvent | None) -> None:
    """Tell the UI once which checks cannot be verified here, so the human can edit them before the work."""
    if goal.unverifiable:
        emit(on_event, Event("system", texts.GOAL_UNVERIFIABLE.format(
            count=len(goal.unverifiable), total=len(goal.checks), path=path),
            payload={"subtype": "goal_unverifiable", "unverifiable": list(goal.unverifiable),
                     "total": len(goal.checks), "path": str(path)}))


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
    """Why the work stopped without either: unreachable and unanswered, or the rounds spent."""
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

    async def run(self, runtime: Runtime, *, goal: Goal | None = None, on_event: OnEvent | None = None) -> Judged:
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
        last = state.verdicts[-1] if state.verdicts else Verdict()
        return state.done(achieved=False, stopped=texts.JUDGE_ROUNDS_SPENT.format(
            rounds=len(state.results), reason=last.reason or texts.VERDICT_NO_REASON))

    async def _unreachable(self, verdict: Verdict, state: _Rounds, path: Path, runtime: Runtime) -> tuple[str, Judged | None]:
        """Ask the human; returns the feedback for the next round, or how the work ends."""
        decision = await decide_unreachable(self.channel, verdict, state.goal, path, default_path(runtime, ""))
        if decision.outcome == "accept":
            return "", state.done(achieved=False, accepted=True)
        if decision.outcome == "stop":
            return "", state.done(achieved=False, stopped=decision.reason)
        state.goal = decision.goal or state.goal
        return decision.feedback, None


@dataclass(frozen=True)
class Decision:
    """What the human decided about an unreachable verdict."""

    outcome: Literal["accept", "stop", "continue"]
    feedback: str = ""
    """For "continue": what the worker's next round is told."""
    goal: Goal | None = None
    """The amended goal, when the human amended it (already written)."""
    reason: str = ""
    """For "stop": why (also written to `<goal>-stopped.md` in the notes)."""


async def decide_unreachable(channel: HumanChannel | None, verdict: Verdict, goal: Goal, goal_path: Path,
                             notes: Path) -> Decision:
    """Ask the human what to do about an unreachable verdict (framework questions, outside `max_asks`):
    accept the result, amend the goal (appended and written), or overrule the judge; no answer stops."""
    reason = verdict.reason or "no reason given"

    async def ask(question: str, options: tuple[str, ...]) -> str | None:
        if channel is None:
            return None
        item = await channel.ask(question, list(options), framework=True)
        return item.answer if item.answered and item.answer.strip() else None

    def stop() -> Decision:
        why = texts.JUDGE_STOPPED.format(reason=reason)
        _note(notes / f"{goal_path.stem}-stopped.md", why, verdict)
        return Decision("stop", reason=why)

    choice = await ask(texts.UNREACHABLE_QUESTION.format(reason=reason), texts.UNREACHABLE_OPTIONS)
    if choice is None:
        return stop()
    picked = _option(choice, texts.UNREACHABLE_OPTIONS)
    if picked == 0:
        return Decision("accept")
    if picked == 1:
        extra = await ask(texts.AMEND_QUESTION, ())
        if extra is None:
            return stop()
        amended = goal.amend(extra)
        amended.write(goal_path)
        feedback = Verdict("not_yet", texts.JUDGE_AMENDED.format(extra=extra), verdict.failed).feedback()
        return Decision("continue", feedback, amended)
    return Decision("continue", Verdict("not_yet", texts.JUDGE_OVERRULED.format(answer=choice), verdict.failed).feedback())


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
    with contextlib.suppress(OSError):  # a refused (symlinked) or unwritable note must not hide the reason
        append_text(path, f"# Stopped\n\n{why}\n\n{verdict.to_markdown()}\n")


def with_goal(work: Work | Step, channel: HumanChannel | None, *, rounds: int = 3, judge_can_run: bool = False,
              goal_path: str | Path | None = None, name: str | None = None,
              judge_spec: AgentSpec | None = None) -> Any:
    """`work` judged against the goal after every round, at most `rounds` rounds. A `Work` gives a `WithGoal`
    (run it with `.run(runtime)`); a workflow `Step` gives that step, judged (see the module docstring)."""
    if rounds < 1:
        raise ConfigError(f"with_goal needs rounds >= 1, not {rounds}")
    path = Path(goal_path) if goal_path is not None else None
    if isinstance(work, Step):
        return _judged_step(work, channel, rounds, judge_can_run, path, name, judge_spec)
    return WithGoal(work, channel, path, rounds, judge_can_run, name, judge_spec)


def _judged_step(step: Step, channel: HumanChannel | None, rounds: int, can_run: bool, fixed: Path | None,
                 name: str | None, judge_spec: AgentSpec | None) -> Step:
    label = name or f"{step.name}:judge"
    slug = re.sub(r"[^\w.-]+", "-", label)
    spec = judge_spec if judge_spec is not None else judge(name=label, can_run=can_run)

    def rounds_done(notes: Path) -> list[Path]:
        found = [(int(m.group(1)), p) for p in notes.glob(f"{slug}-round*.md") if (m := _ROUND.search(p.name))]
        return [p for _, p in sorted(found)]

    async def gate(result: StepResult, ctx: StepContext) -> bool:
        runtime = step_runtime(ctx)
        notes, path = default_path(runtime, ""), fixed if fixed is not None else default_path(runtime, GOAL_FILE)
        goal = Goal.load(path)
        if goal is None or not goal.complete:
            raise StepAbort(f"no complete goal to judge against at {path}")
        number = len(rounds_done(notes)) + 1
        prompt = texts.JUDGE_PROMPT.format(goal=goal.prompt_block(), round=number, reply=result.text or "(no reply)")
        judged_run = await runtime.run(spec, prompt, step_name=f"{label}#{number}", on_event=step_events(ctx))
        verdict = Verdict.parse(judged_run.text)
        record = notes / f"{slug}-round{number}.md"
        feedback = verdict.feedback()
        if verdict.unreachable:
            decision = await decide_unreachable(channel, verdict, goal, path, notes)
            if decision.outcome != "continue":
                replace_text(record, verdict.to_markdown())
                if decision.outcome == "stop":
                    raise StepAbort(decision.reason)
                return True
            feedback = decision.feedback
        elif verdict.achieved:
            replace_text(record, verdict.to_markdown())
            return True
        replace_text(record, f"{verdict.to_markdown()}\n{FEEDBACK_HEAD}{feedback}\n")
        return False

    def on_reject(result: StepResult, ctx: StepContext) -> str:
        done = rounds_done(default_path(step_runtime(ctx), ""))
        text = (read_note(done[-1]) or "") if done else ""
        return text.split(FEEDBACK_HEAD, 1)[1].strip() if FEEDBACK_HEAD in text else ""

    return dataclasses.replace(step, retries=rounds - 1, gate=gate, on_reject=on_reject)
