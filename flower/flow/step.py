"""One step of a workflow, a group of parallel steps, and the gate's way to say "stop trying".

A `Step` is plain data plus user callables, each given the step's `ctx` (a `flower.flow.context.StepContext`:
the run's context, read-only, plus `ctx.runtime` and the run's ids); `flower.flow.execution` gives them meaning:
- `when(ctx)` false: the step is skipped entirely (no output, no result);
- `gate(result, ctx)` judges a successful attempt: True passes, False tries again (up to `retries`), raising
  `StepAbort` fails at once ("another round will not help");
- `on_reject(result, ctx)` turns a failed or rejected attempt into feedback that resumes the same session;
  an empty string means a plain rerun;
- `reduce(result, ctx)` shapes what downstream steps see as `ctx[name]` (default: the result's text, or
  its typed `output` when the step has an `output_type`);
- `on_fail`: "stop" ends the workflow (`ctx["_failed_at"]`), "skip" leaves no output, "continue" stores the
  last text;
- `resume_from` names an earlier step whose session this one continues (`fork` branches it instead;
  `resume_at`, a message uuid of that session as `flower rewind RUN --json` lists them, branches it at that
  message).
- `over=items` fans the step out: one agent per item, run in parallel through a DBOS queue (`limit` at a
  time), `ctx[name]` the outputs in item order. `parallel(a, b, ..., limit=N)` does the same for different
  steps.

Invariants: a step name is a continuity key (sessions, checkpoints, manifest rows): labels with a suffix
(`name#retry2`, `name#round2`, `name[3]`) are labels only. `gate`, `when` and `on_reject` may be sync or
async; `reduce` is sync.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from flower.agent.output import OutputType, checkpointable, output_schema
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError, FlowError
from flower.walls.guard import HANDS_ON

if TYPE_CHECKING:
    from flower.flow.context import StepContext
    from flower.runtime.steps import StepResult

__all__ = ["OnFail", "Parallel", "Step", "StepAbort", "parallel"]

OnFail = Literal["stop", "skip", "continue"]
ON_FAIL: tuple[str, ...] = ("stop", "skip", "continue")
WRITE_TOOLS = frozenset({*HANDS_ON, "MultiEdit"})
"""Tools that may change files: the walls' hands-on list (which runs commands too) and the older MultiEdit."""


class StepAbort(Exception):
    """Raised by a gate: this step failed and another round will not help (no retries are spent)."""


_UNSET: Any = object()


@dataclass
class Step:
    """An agent step: run `spec` on `prompt`, judge, retry, and store what downstream steps see."""

    name: str
    spec: AgentSpec
    prompt: str | Callable[..., str]
    """Text, or `prompt(ctx)` (`prompt(ctx, item)` with `over`); in a text, `{item}` is the fan-out item."""
    resume_from: str | None = None
    fork: bool = False
    resume_at: str | None = None
    """With `resume_from`: fork its session at this message (an entry uuid) instead of at its end."""
    retries: int = 0
    gate: Callable[[StepResult, StepContext], Any] | None = None
    on_fail: OnFail = "stop"
    when: Callable[[StepContext], Any] | None = None
    on_reject: Callable[[StepResult, StepContext], Any] | None = None
    resume_prompt: str | Callable[..., str] | None = None
    """Used instead of `prompt` when this step continues a session it already had (after a crash)."""
    reduce: Callable[[StepResult, StepContext], Any] | None = None
    over: Sequence[Any] | Callable[[StepContext], Sequence[Any]] | None = None
    limit: int | None = None
    """At most this many fan-out agents at once (`over`); None: all at once."""
    output_type: OutputType | None = None
    """A pydantic model class or a JSON schema the final reply must satisfy (one retry in the same session);
    the typed value is the result's `output` and, by default, what downstream steps see as `ctx[name]`."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise FlowError(f"a step needs a non-empty name, not {self.name!r}")
        if self.name.startswith("_") or any(c in self.name for c in "#[]/"):
            raise FlowError(f"step name {self.name!r} may not start with '_' or contain '#', '[', ']' or '/'")
        if not isinstance(self.spec, AgentSpec):
            raise FlowError(f"step {self.name}: spec is a {type(self.spec).__name__}, not an AgentSpec")
        if not (isinstance(self.prompt, str) or callable(self.prompt)):
            raise FlowError(f"step {self.name}: prompt must be a string or a callable")
        if self.on_fail not in ON_FAIL:
            raise FlowError(f"step {self.name}: on_fail must be one of {', '.join(ON_FAIL)}, not {self.on_fail!r}")
        if not isinstance(self.retries, int) or self.retries < 0:
            raise FlowError(f"step {self.name}: retries must be a whole number >= 0, not {self.retries!r}")
        if self.fork and self.resume_from is None:
            raise FlowError(f"step {self.name}: fork=True needs resume_from")
        if self.resume_at is not None and (self.resume_from is None or not str(self.resume_at).strip()):
            raise FlowError(f"step {self.name}: resume_at needs resume_from and a message uuid")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise FlowError(f"step {self.name}: limit must be a whole number >= 1, not {self.limit!r}")
        if self.reduce is not None and inspect.iscoroutinefunction(self.reduce):
            raise FlowError(f"step {self.name}: reduce must be a plain function, not async")
        if self.output_type is not None:
            try:
                output_schema(self.output_type, f"step {self.name}: output_type")
            except ConfigError as exc:
                raise FlowError(str(exc)) from None
            checkpointable(self.output_type)

    @property
    def writes(self) -> bool:
        """The agent or any of its subagents may change files (so a parallel copy of it gets its own
        workspace): a writing tool allowed, or an agent that inherits every tool."""
        tools = set(self.spec.allowed_tools) | set(self.spec.tools or ())
        for agent in (self.spec.agents or {}).values():
            if agent.tools is None:
                return True
            tools.update(agent.tools)
        return bool(WRITE_TOOLS & {tool.split("(", 1)[0].strip() for tool in tools})  # `Bash(make:*)` is Bash

    def items(self, ctx: StepContext) -> list[Any]:
        values = self.over(ctx) if callable(self.over) else self.over
        if values is None or isinstance(values, (str, bytes)):
            raise FlowError(f"step {self.name}: over must give a list of items, not {type(values).__name__}")
        return list(values)

    def render(self, ctx: Mapping[str, Any], *, resuming: bool = False, item: Any = _UNSET) -> str:
        """The prompt for this attempt: `resume_prompt` when resuming (if set), else `prompt`."""
        source = self.resume_prompt if resuming and self.resume_prompt is not None else self.prompt
        if callable(source):
            text = source(ctx) if item is _UNSET else source(ctx, item)
        else:
            text = source
            if item is not _UNSET:
                text = text.replace("{item}", str(item)) if "{item}" in text else f"{text}\n\nItem: {item}"
        if not isinstance(text, str) or not text.strip():
            raise FlowError(f"step {self.name}: the prompt is empty or not a string ({type(text).__name__})")
        return text


@dataclass
class Parallel:
    """Steps that run at the same time through a DBOS queue, at most `limit` at once; results in order."""

    steps: tuple[Step, ...]
    limit: int | None = None
    name: str = field(default="")

    def __post_init__(self) -> None:
        if not self.steps:
            raise FlowError("parallel() needs at least one step")
        for step in self.steps:
            if not isinstance(step, Step):
                raise FlowError(f"parallel() takes Steps, not {type(step).__name__}")
            if step.over is not None:
                raise FlowError(f"step {step.name}: a fan-out step (over=) cannot be inside parallel()")
            if step.resume_from is not None and step.resume_from in {s.name for s in self.steps}:
                raise FlowError(f"step {step.name}: resume_from names {step.resume_from}, which runs alongside it")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise FlowError(f"parallel(): limit must be a whole number >= 1, not {self.limit!r}")
        if not self.name:
            self.name = "+".join(step.name for step in self.steps)


def parallel(*steps: Step, limit: int | None = None) -> Parallel:
    """Run `steps` concurrently (at most `limit` at once); each stores its output under its own name."""
    return Parallel(tuple(steps), limit)
