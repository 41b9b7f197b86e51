"""What a workflow means, on any executor: step order, `when`, gates, `on_reject`, `reduce`, parallel groups.

`execute(definition, executor)` runs a whole workflow and returns the context as a dict; `member(...)` runs
one parallel member or fan-out item inside its branch. Every decision that calls user code or the model goes
through `executor.checkpoint` (or `executor.agent`), so a durable executor replays a continued run to the same
place without calling either again.

Checkpoint names (the DBOS executor records them as step names; a recorded run relies on them):
`when:<step>`, `agent:<label>`, `gate:<label>`, `feedback:<label>`, `items:<step>`, `settle:<step>` (a step's
context updates in the run), `result:<label>` (a branch's updates in the branch).

Invariants:
- Step names are keys (context, sessions, checkpoints); labels with a suffix (`#retry2`, `#round2`, `[3]`)
  name attempts only, and `resume_from` looks up step names.
- User code that misbehaves (a `when` or gate that raises, a gate that returns a non-bool) stops the run
  with one `FlowError` line naming the step.
- User code gets a `StepContext` (read-only context plus the run it belongs to), never the context itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from flower.agent.output import retyped
from flower.errors import ConfigError, FlowerError, FlowError
from flower.flow.context import Context, StepContext, Updates, fresh
from flower.flow.executor import Attempt, Branch, Definition, Executor
from flower.flow.step import _UNSET, Parallel, Step, StepAbort
from flower.runtime.runtime import Runtime
from flower.runtime.steps import StepResult
from flower.util.loader import call
from flower.util.oneline import one_line

__all__ = ["as_definition", "call_user", "execute", "member"]


async def call_user(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user callable (sync or async); its failure becomes one FlowError line naming `what`."""
    try:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
    except (FlowerError, StepAbort):
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: one line naming the step
        raise FlowError(f"{what} raised {one_line(exc)}") from None
    return value


def as_definition(value: Any, source: str) -> Definition:
    """What a loaded workflow source gives: a definition, or a zero-argument callable returning one."""
    if not isinstance(value, Definition) and callable(value):
        value = call(value, source, "a Workflow")
    if not isinstance(value, Definition):
        raise ConfigError(f"{source} is a {type(value).__name__}, not a Workflow")
    return value


def _view(ex: Executor, ctx: Context, runtime: Runtime, step: Step, label: str) -> StepContext:
    return StepContext(ctx, runtime, ex.run_id, step.name, label, ex.on_event, run_runtime=ex.runtime)


async def execute(definition: Definition, ex: Executor) -> dict[str, Any]:
    """Run every step in order on `ex`; the final context (stops at the first step that stops the run)."""
    ctx = fresh(definition.context)
    for item in definition.steps:
        if isinstance(item, Parallel):
            await _parallel(ex, item, ctx)
        elif item.over is not None:
            await _fan_out(ex, item, ctx)
        else:
            view = _view(ex, ctx, ex.runtime, item, item.name)
            updates = await run_step(ex, item, view, settle=f"settle:{item.name}")
            if updates is not None:
                updates.apply(ctx)
        if ctx["_failed_at"]:
            break
    return dict(ctx)


async def member(definition: Definition, ex: Executor, branch: Branch, runtime: Runtime) -> dict[str, Any]:
    """One parallel member or fan-out item on `runtime` (its branch's); its recorded updates."""
    step = definition.find(branch["step"])
    label = branch["label"]
    view = _view(ex, Context(branch["ctx"]), runtime, step, label)
    item = branch["item"] if "item" in branch else _UNSET
    updates = await run_step(ex, step, view, item=item, when=False, settle=f"result:{label}")
    return updates.record() if updates is not None else {}


# --- one step --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Start:
    """How a step's first attempt (and a plain retry) starts."""

    prompt: str
    resume: str | None
    fork: bool
    resume_at: str | None
    again: str | None
    """The step's `resume_prompt`, rendered (None: the executor's own text)."""


def _start(step: Step, view: StepContext, item: Any) -> _Start:
    resume, fork, at = None, False, None
    if step.resume_from is not None:
        resume = view.sessions.get(step.resume_from)
        if not resume:
            raise FlowError(f"step {step.name}: resume_from {step.resume_from} has no session "
                            "(was it skipped or did it fail before starting?)")
        fork, at = step.fork or step.resume_at is not None, step.resume_at
    try:
        prompt = step.render(view, item=item)
        again = step.render(view, resuming=True, item=item) if step.resume_prompt is not None else None
    except FlowerError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's prompt callable
        raise FlowError(f"step {step.name}: prompt raised {one_line(exc)}") from None
    return _Start(prompt, resume, fork, at, again)


def _tag(step: Step, label: str, attempt: int) -> str:
    if attempt == 0:
        return label
    return f"{label}#round{attempt + 1}" if step.on_reject is not None else f"{label}#retry{attempt}"


async def run_step(ex: Executor, step: Step, view: StepContext, *, item: Any = _UNSET, when: bool = True,
                   settle: str) -> Updates | None:
    """The attempt loop of one step; the context updates it makes (None: skipped by `when`)."""
    if when and not await _when(ex, step, view):
        return None
    start = _start(step, view, item)
    prompt, resume, fork = start.prompt, start.resume, start.fork
    result: StepResult | None = None
    passed, aborted = False, None
    for attempt in range(step.retries + 1):
        tag = _tag(step, view.label, attempt)
        job = Attempt(step.name, tag, step.spec, prompt, resume, fork, start.again,
                      resume_at=start.resume_at if fork else None, output_type=step.output_type)
        result = _typed(step, await ex.agent(view.runtime, job))
        if result.ok:
            verdict = await _gate(ex, step, tag, result, view)
            if verdict.get("abort") is not None:
                aborted = f"{step.name}: {verdict['abort']}"
                break
            if verdict.get("pass"):
                passed = True
                break
        if attempt == step.retries:
            break
        prompt, resume, fork = start.prompt, start.resume, start.fork
        if step.on_reject is not None and result.session_id:
            feedback = await _feedback(ex, step, tag, result, view)
            if feedback:
                prompt, resume, fork = feedback, result.session_id, False
    assert result is not None
    return await _settle(ex, step, view, result, passed, aborted, settle)


def _typed(step: Step, result: StepResult) -> StepResult:
    """The attempt's result with its output typed again (an executor records it as plain JSON)."""
    if step.output_type is None or result.output is None:
        return result
    try:
        return replace(result, output=retyped(step.output_type, result.output))
    except ValueError as exc:  # a recorded value the model no longer accepts: the step fails, one line
        return replace(result, ok=False, output=None, error=f"the recorded output does not match: {exc}")


async def _settle(ex: Executor, step: Step, view: StepContext, final: StepResult, passed: bool,
                  aborted: str | None, name: str) -> Updates:
    label = view.label

    def build() -> dict[str, Any]:
        out = Updates(results={label: final}, aborted=aborted,
                      sessions={label: final.session_id} if final.session_id else {})
        try:
            if passed:
                out.values[label] = step.reduce(final, view) if step.reduce is not None else \
                    final.output if step.output_type is not None else final.text
            elif step.on_fail == "continue":
                out.values[label] = final.text
        except FlowerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's reduce
            raise FlowError(f"step {step.name}: reduce raised {one_line(exc)}") from None
        if not passed and step.on_fail == "stop":
            out.failed_at = label
        return out.record()

    return Updates.from_record(await ex.checkpoint(name, build))


async def _when(ex: Executor, step: Step, view: StepContext) -> bool:
    if step.when is None:
        return True
    when = step.when

    async def judge() -> bool:
        return bool(await call_user(f"step {step.name}: when", when, view))

    return bool(await ex.checkpoint(f"when:{step.name}", judge))


async def _gate(ex: Executor, step: Step, tag: str, result: StepResult, view: StepContext) -> dict[str, Any]:
    if step.gate is None:
        return {"pass": True}
    gate = step.gate

    async def judge() -> dict[str, Any]:
        try:
            verdict = await call_user(f"step {step.name}: gate", gate, result, view)
        except StepAbort as exc:
            return {"abort": str(exc) or "aborted by its gate"}
        if not isinstance(verdict, bool):
            raise FlowError(f"step {step.name}: gate returned {type(verdict).__name__} {verdict!r}, not a bool")
        return {"pass": verdict}

    return dict(await ex.checkpoint(f"gate:{tag}", judge))


async def _feedback(ex: Executor, step: Step, tag: str, result: StepResult, view: StepContext) -> str:
    on_reject = step.on_reject
    assert on_reject is not None

    async def ask() -> str:
        text = await call_user(f"step {step.name}: on_reject", on_reject, result, view)
        if text is not None and not isinstance(text, str):
            raise FlowError(f"step {step.name}: on_reject returned {type(text).__name__}, not a string")
        return (text or "").strip()

    return str(await ex.checkpoint(f"feedback:{tag}", ask))


# --- parallel groups and fan-outs ------------------------------------------------------------------


def _branch(step: Step, ctx: Context, label: str, **extra: Any) -> Branch:
    shared = {k: v for k, v in ctx.items() if k not in ("_ran_by", "_workspaces")}
    branch = Branch(step=step.name, label=label, ctx=shared)
    if "item" in extra:
        branch["item"] = extra["item"]
    return branch


async def _parallel(ex: Executor, group: Parallel, ctx: Context) -> None:
    chosen = [step for step in group.steps if await _when(ex, step, _view(ex, ctx, ex.runtime, step, step.name))]
    if not chosen:
        return
    outs = await ex.branches(group.name, group.limit, [_branch(step, ctx, step.name) for step in chosen])
    for step, out in zip(chosen, outs):

        async def keep(out: dict[str, Any] = out) -> dict[str, Any]:
            return out

        Updates.from_record(await ex.checkpoint(f"settle:{step.name}", keep)).apply(ctx)


def _combine(name: str, labels: list[str], outs: list[dict[str, Any]]) -> Updates:
    """A fan-out's items as one step's updates: outputs and results in item order, the first stop kept."""
    parts = [Updates.from_record(out) for out in outs]
    merged = Updates(values={name: [part.values.get(label) for label, part in zip(labels, parts)]},
                     results={name: [part.results[label] for label, part in zip(labels, parts)]})
    for part in parts:
        merged.sessions.update(part.sessions)
        merged.ran_by.update(part.ran_by)
        merged.workspaces.update(part.workspaces)
        merged.aborted = merged.aborted or part.aborted
        if part.failed_at and not merged.failed_at:
            merged.failed_at = name
    return merged


async def _fan_out(ex: Executor, step: Step, ctx: Context) -> None:
    view = _view(ex, ctx, ex.runtime, step, step.name)
    if not await _when(ex, step, view):
        return

    def list_items() -> list[Any]:
        try:
            return step.items(view)
        except FlowerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's items callable
            raise FlowError(f"step {step.name}: over raised {one_line(exc)}") from None

    items = await ex.checkpoint(f"items:{step.name}", list_items)
    labels = [f"{step.name}[{i}]" for i in range(len(items))]
    branches = [_branch(step, ctx, label, item=item) for label, item in zip(labels, items)]
    outs = await ex.branches(step.name, step.limit, branches) if branches else []

    def combine() -> dict[str, Any]:
        return _combine(step.name, labels, outs).record()

    Updates.from_record(await ex.checkpoint(f"settle:{step.name}", combine)).apply(ctx)
