"""`clarify_step`: confirm what is wanted before any work starts, and freeze it as a brief (L-9).

The clarifier is a read-only role (`flower.human.roles.clarifier`): it reads, asks the human through the channel
and replies with a brief. It writes nothing itself; the framework parses the reply's four sections and freezes
a complete brief in the workbench notes. An incomplete reply is sent back once more (same session) with the
missing sections named.

Invariants:
- A complete brief on disk skips the step (no model call); delete the file to clarify again.
- Downstream steps get `Brief.prompt_block()`, never the clarifier's raw reply (a clarifier once pasted a whole
  codebase into it); the questions and answers stay in the clarifier's own session and the channel's log.
- An incomplete brief is never written, and what the human added to the brief file (mail through the channel)
  is carried into the brief that replaces it.

`ClarifyStep.run(runtime, request)` runs it over a `Runtime` directly; `ClarifyStep.as_step(request)` is the
same as a workflow step (`flower.flow.Step`): `when` skips it while a complete brief is on disk, its gate
freezes a complete brief (an incomplete one is rejected, and `on_reject` names the missing sections to the
same session), `reduce` gives downstream steps the prompt block. DBOS checkpoints each of these decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flower import texts
from flower.agent.events import OnEvent
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.flow.context import StepContext
from flower.flow.step import Step
from flower.human.channel import HumanChannel
from flower.human.documents import Brief
from flower.human.roles import clarifier
from flower.runtime.runtime import Runtime
from flower.runtime.steps import StepResult

__all__ = ["BRIEF_FILE", "ClarifyOutcome", "ClarifyStep", "clarify_step", "default_path", "step_events", "step_runtime"]

BRIEF_FILE = "brief.md"


def step_runtime(ctx: Mapping[str, Any]) -> Runtime:
    """The runtime of the workflow run whose `ctx` this is (a `StepContext`, inside a step's callables): the
    run's own, whose workbench holds the brief, the goal and the judges' notes."""
    runtime = getattr(ctx, "run_runtime", None)
    if not isinstance(runtime, Runtime):
        raise ConfigError("a human workflow step runs outside a workflow run; use its run(runtime, ...) adapter")
    return runtime


def step_events(ctx: Mapping[str, Any]) -> OnEvent | None:
    """The event callback of the workflow run whose `ctx` this is."""
    on_event: OnEvent | None = getattr(ctx, "on_event", None)
    return on_event


def default_path(runtime: Runtime, filename: str) -> Path:
    """`filename` in the runtime's workbench notes (or its run dir without a workbench)."""
    workbench = getattr(runtime, "workbench", None)
    return Path(workbench.notes if workbench is not None else runtime.run_dir) / filename


@dataclass(frozen=True)
class ClarifyOutcome:
    """What the clarify step left: a brief (complete when ok), where it is, and the sessions' results."""

    brief: Brief
    path: Path
    skipped: bool
    """A complete brief was already on disk; no model was called."""
    results: tuple[StepResult, ...] = ()

    @property
    def ok(self) -> bool:
        return self.brief.complete

    @property
    def prompt_block(self) -> str:
        """What later steps get."""
        return self.brief.prompt_block()


@dataclass
class ClarifyStep:
    """A clarify step; `run(runtime, request)` runs it."""

    channel: HumanChannel | None
    brief_path: Path | None = None
    """Default: `brief.md` in the workbench notes."""
    name: str = "clarify"
    spec: AgentSpec | None = None
    always_ask: bool = False
    retries: int = 1
    """Times an incomplete brief is sent back with its missing sections named."""

    def path(self, runtime: Runtime) -> Path:
        return self.brief_path if self.brief_path is not None else default_path(runtime, BRIEF_FILE)

    async def run(self, runtime: Runtime, request: str, *, on_event: OnEvent | None = None) -> ClarifyOutcome:
        path = self.path(runtime)
        existing = Brief.load(path)
        if existing is not None and existing.complete and not self.always_ask:
            return ClarifyOutcome(existing, path, skipped=True)
        spec = self.spec if self.spec is not None else clarifier(self.channel, name=self.name)
        result = await runtime.run(spec, texts.CLARIFY_PROMPT.format(request=request.strip()),
                                   step_name=self.name, on_event=on_event)
        results = [result]
        brief = Brief.parse(result.text)
        for attempt in range(self.retries):
            if brief.complete or not result.session_id:
                break
            missing = ", ".join(brief.missing())
            result = await runtime.run(spec, texts.CLARIFY_MISSING.format(missing=missing), resume=result.session_id,
                                       step_name=f"{self.name}#retry{attempt + 2}", on_event=on_event)
            results.append(result)
            brief = Brief.parse(result.text)
        if brief.complete:
            if existing is not None and existing.additions:  # what the human added before stays in the brief
                brief = replace(brief, additions=existing.additions + brief.additions)
            brief.write(path)
            refresh = getattr(getattr(runtime, "workbench", None), "refresh", None)
            if callable(refresh):
                refresh()
        return ClarifyOutcome(brief, path, skipped=False, results=tuple(results))


    def block(self, ctx: Mapping[str, Any]) -> str:
        """For downstream prompts in a workflow: this step's output, or the frozen brief's prompt block when the
        step was skipped (a complete brief was on disk). Use it as `lambda ctx: clarify.block(ctx)`."""
        if ctx.get(self.name):
            return str(ctx[self.name])
        brief = Brief.load(self.brief_path if self.brief_path is not None else default_path(step_runtime(ctx),
                                                                                              BRIEF_FILE))
        return brief.prompt_block() if brief is not None else ""

    def as_step(self, request: str | Callable[..., str]) -> Step:
        """This clarify step as a workflow step on `request` (text, or `request(ctx)`)."""
        fixed, always_ask = self.brief_path, self.always_ask

        def path(ctx: Mapping[str, Any]) -> Path:
            return fixed if fixed is not None else default_path(step_runtime(ctx), BRIEF_FILE)

        def prompt(ctx: StepContext) -> str:
            return texts.CLARIFY_PROMPT.format(request=(request(ctx) if callable(request) else request).strip())

        def when(ctx: StepContext) -> bool:
            existing = Brief.load(path(ctx))
            return existing is None or not existing.complete

        def gate(result: StepResult, ctx: StepContext) -> bool:
            brief = Brief.parse(result.text)
            if not brief.complete:
                return False
            existing = Brief.load(path(ctx))
            if existing is not None and existing.additions:
                brief = replace(brief, additions=existing.additions + brief.additions)
            brief.write(path(ctx))
            return True

        def on_reject(result: StepResult, ctx: StepContext) -> str:
            return texts.CLARIFY_MISSING.format(missing=", ".join(Brief.parse(result.text).missing()))

        def reduce(result: StepResult, ctx: StepContext) -> str:
            return (Brief.load(path(ctx)) or Brief.parse(result.text)).prompt_block()

        spec = self.spec if self.spec is not None else clarifier(self.channel, name=self.name)
        return Step(self.name, spec, prompt, retries=self.retries, gate=gate, when=None if always_ask else when,
                    on_reject=on_reject, resume_prompt=texts.CLARIFY_RESUME, reduce=reduce)


def clarify_step(
    channel: HumanChannel | None,
    *,
    brief_path: str | Path | None = None,
    name: str = "clarify",
    spec: AgentSpec | None = None,
    instructions: str = "",
    always_ask: bool = False,
    retries: int = 1,
) -> ClarifyStep:
    """A step that clarifies the request through `channel` and freezes the brief at `brief_path`."""
    if spec is None and instructions:
        spec = clarifier(channel, name=name, instructions=instructions)
    return ClarifyStep(channel, Path(brief_path) if brief_path is not None else None, name, spec, always_ask,
                       retries)
