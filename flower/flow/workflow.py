"""`Workflow`: agent steps with gates, retries and parallel groups, run durably on DBOS (L-6, L-7).

`await wf.run(runtime)` starts a run, or continues this workflow's unfinished run in the same workspace and
run dir; it returns the `Context`: each step's output under its name, plus `_results` (StepResults),
`_sessions` (session id per step name), `_failed_at` and `_aborted`.

Invariants:
- Replay is deterministic: every decision that calls user code or the model (`when`, agent attempts,
  gates, `on_reject` feedback, fan-out items, each step's context updates) is a DBOS checkpoint, so a run
  continued after a crash replays recorded values up to where it stopped and never calls the model again
  for a finished attempt.
- Step names are keys (context, sessions, checkpoints); labels with a suffix (`#retry2`, `#round2`,
  `[3]`) name attempts only, and `resume_from` looks up step names.
- User code that misbehaves (a `when` or gate that raises, a gate that returns a non-bool) stops the run
  with one `FlowError` line naming the step.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from flower.agent.events import OnEvent
from flower.runtime.runtime import Runtime
from flower.agent.spec import AgentSpec
from flower.runtime.steps import StepResult
from flower.runtime.stream import EventStream
from flower.errors import ConfigError, FlowError, FlowerError
from flower.flow import durable
from flower.flow.step import _UNSET, Parallel, Step, StepAbort

__all__ = ["Context", "Workflow", "as_workflow"]

PRIVATE = ("_results", "_sessions", "_failed_at", "_aborted", "_ran_by", "_workspaces")


class Context(dict):  # type: ignore[type-arg]
    """What steps share: outputs by step name, and the run's bookkeeping under `_` keys."""

    @property
    def results(self) -> dict[str, Any]:
        """StepResult per step name (a list for a fan-out step)."""
        return self["_results"]  # type: ignore[no-any-return]

    @property
    def sessions(self) -> dict[str, str]:
        """The last session id per step name (per `name[i]` for a fan-out)."""
        return self["_sessions"]  # type: ignore[no-any-return]

    @property
    def failed_at(self) -> str | None:
        return self.get("_failed_at")

    @property
    def aborted(self) -> str | None:
        return self.get("_aborted")

    @property
    def ok(self) -> bool:
        return self.get("_failed_at") is None


def _fresh(initial: Mapping[str, Any] | None) -> Context:
    ctx = Context(dict(initial or {}))
    ctx.update({"_results": {}, "_sessions": {}, "_failed_at": None, "_aborted": None, "_ran_by": {},
                "_workspaces": {}})
    return ctx


def _apply(ctx: Context, updates: Mapping[str, Any]) -> None:
    ctx.update(updates.get("set") or {})
    for key in ("_results", "_sessions", "_ran_by", "_workspaces"):
        ctx[key].update(updates.get(key) or {})
    for key in ("_failed_at", "_aborted"):
        if updates.get(key) and not ctx.get(key):
            ctx[key] = updates[key]


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


async def _call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a user callable (sync or async); its failure becomes one FlowError line naming `what`."""
    try:
        value = fn(*args)
        if inspect.isawaitable(value):
            value = await value
    except (FlowerError, StepAbort):
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: one line naming the step
        raise FlowError(f"{what} raised {_line(exc)}") from None
    return value


@dataclass
class Workflow:
    """Steps run in order (a `parallel(...)` group or an `over=` step fans out), durably on DBOS."""

    steps: Sequence[Step | Parallel]
    name: str = "workflow"
    context: Mapping[str, Any] | None = None
    """Initial values every step sees (must be picklable: DBOS stores them)."""
    source: str | None = None
    """`FILE.py:ATTR` that gives this workflow, so another process (`flower worker`) can load it; the CLI
    sets it."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise FlowError(f"a workflow needs a non-empty name, not {self.name!r}")
        self.steps = list(self.steps)
        if not self.steps:
            raise FlowError(f"workflow {self.name} has no steps")
        seen: list[str] = []
        for item in self.steps:
            if not isinstance(item, (Step, Parallel)):
                raise FlowError(f"workflow {self.name}: a step is a {type(item).__name__}, not a Step or parallel()")
            members = item.steps if isinstance(item, Parallel) else (item,)
            earlier = list(seen)
            for step in members:
                if step.name in seen:
                    raise FlowError(f"workflow {self.name} has two steps named {step.name}")
                if step.resume_from is not None and step.resume_from not in earlier:
                    raise FlowError(f"step {step.name}: resume_from names {step.resume_from!r}, "
                                    "which is not an earlier step")
                seen.append(step.name)
        for key in self.context or {}:
            if str(key).startswith("_"):
                raise FlowError(f"workflow {self.name}: context key {key!r} may not start with '_'")

    @property
    def total(self) -> int:
        """Steps counted for progress: each Step and each parallel member once."""
        return sum(len(item.steps) if isinstance(item, Parallel) else 1 for item in self.steps)

    def find(self, name: str) -> Step:
        for item in self.steps:
            for step in item.steps if isinstance(item, Parallel) else (item,):
                if step.name == name:
                    return step
        raise FlowError(f"workflow {self.name} has no step {name!r}")

    # --- running ------------------------------------------------------------------------------------

    async def run(
        self,
        runtime: Runtime,
        *,
        on_event: OnEvent | None = None,
        new: bool = False,
        store: str | None = None,
        run_id: str | None = None,
        verbose: bool = False,
    ) -> Context:
        """Run (or continue) durably; `store` is the system database for a fleet (a PostgreSQL URL; default:
        the runtime's PostgreSQL store if it has one, else SQLite in the run dir)."""
        database = store or _postgres_url(runtime.store)
        out = await durable.run(self, runtime, on_event=on_event, store=database, source=self.source,
                                run_id=run_id, new=new, verbose=verbose)
        return Context(out)

    def run_sync(self, runtime: Runtime, **kwargs: Any) -> Context:
        """`run()` for code without an event loop."""

        async def main() -> Context:
            return await self.run(runtime, **kwargs)

        return anyio.run(main)

    def stream(self, runtime: Runtime, **kwargs: Any) -> EventStream[Context]:
        """`async for event in wf.stream(runtime)`: every step's events as they happen; the `Context` is in
        `.result` afterwards. Takes `run()`'s keywords (an `on_event` still gets every event)."""
        on_event = kwargs.pop("on_event", None)
        return EventStream(lambda forward: self.run(runtime, on_event=forward, **kwargs), on_event)

    # --- the engine's side (called from the DBOS workflows in flower.flow.durable) ----------------------

    async def _execute(self, live: durable.Live) -> dict[str, Any]:
        ctx = _fresh(self.context)
        for item in self.steps:
            if isinstance(item, Parallel):
                await self._parallel(live, item, ctx)
            elif item.over is not None:
                await self._fan_out(live, item, ctx)
            else:
                updates = await self._step(live, item, ctx, live.runtime, label=item.name, settle=f"settle:{item.name}")
                if updates is not None:
                    _apply(ctx, updates)
            if ctx["_failed_at"]:
                break
        return dict(ctx)

    async def _member(self, live: durable.Live, step: Step, payload: Mapping[str, Any], runtime: Runtime) -> dict[str, Any]:
        """One parallel member or fan-out item, inside its own `flower.branch` workflow."""
        ctx = Context(payload["ctx"])
        item = payload["item"] if "item" in payload else _UNSET
        updates = await self._step(live, step, ctx, runtime, label=payload["label"], item=item, when=False,
                                   settle=f"result:{payload['label']}")
        return dict(updates or {})

    async def _when(self, step: Step, ctx: Context) -> bool:
        if step.when is None:
            return True
        when = step.when

        async def judge() -> bool:
            return bool(await _call(f"step {step.name}: when", when, ctx))

        return bool(await durable.checkpoint(f"when:{step.name}", judge))

    async def _step(
        self, live: durable.Live, step: Step, ctx: Context, runtime: Runtime, *, label: str,
        item: Any = _UNSET, when: bool = True, settle: str,
    ) -> dict[str, Any] | None:
        """The attempt loop of one step; the context updates it makes (None: skipped by `when`)."""
        if when and not await self._when(step, ctx):
            return None
        first_resume, first_fork = None, False
        if step.resume_from is not None:
            first_resume = ctx["_sessions"].get(step.resume_from)
            if not first_resume:
                raise FlowError(f"step {step.name}: resume_from {step.resume_from} has no session "
                                "(was it skipped or did it fail before starting?)")
            first_fork = step.fork
        try:
            first_prompt = step.render(ctx, item=item)
            again = step.render(ctx, resuming=True, item=item) if step.resume_prompt is not None else None
        except FlowerError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's prompt callable
            raise FlowError(f"step {step.name}: prompt raised {_line(exc)}") from None
        prompt, resume, fork = first_prompt, first_resume, first_fork
        result: StepResult | None = None
        passed, aborted = False, None
        for attempt in range(step.retries + 1):
            tag = label if attempt == 0 else (
                f"{label}#round{attempt + 1}" if step.on_reject is not None else f"{label}#retry{attempt}")
            result = await durable.agent(live, runtime, step.spec, step=step.name, label=tag, prompt=prompt,
                                         resume=resume, fork=fork, resume_prompt=again)
            if result.ok:
                verdict = await self._gate(step, tag, result, ctx)
                if verdict.get("abort") is not None:
                    aborted = f"{step.name}: {verdict['abort']}"
                    break
                if verdict.get("pass"):
                    passed = True
                    break
            if attempt == step.retries:
                break
            prompt, resume, fork = first_prompt, first_resume, first_fork
            if step.on_reject is not None and result.session_id:
                feedback = await self._feedback(step, tag, result, ctx)
                if feedback:
                    prompt, resume, fork = feedback, result.session_id, False
        assert result is not None
        final = result

        def updates() -> dict[str, Any]:
            out: dict[str, Any] = {"set": {}, "_results": {label: final}, "_aborted": aborted,
                                   "_sessions": {label: final.session_id} if final.session_id else {}}
            if passed:
                out["set"][label] = step.reduce(final, ctx) if step.reduce is not None else final.text
            elif step.on_fail == "continue":
                out["set"][label] = final.text
            elif step.on_fail == "stop":
                out["_failed_at"] = label
            return out

        reduce_ = step.reduce

        async def settle_now() -> dict[str, Any]:
            try:
                return updates()
            except FlowerError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's reduce
                name = "reduce" if reduce_ is not None else "settle"
                raise FlowError(f"step {step.name}: {name} raised {_line(exc)}") from None

        return dict(await durable.checkpoint(settle, settle_now))

    async def _gate(self, step: Step, tag: str, result: StepResult, ctx: Context) -> dict[str, Any]:
        if step.gate is None:
            return {"pass": True}
        gate = step.gate

        async def judge() -> dict[str, Any]:
            try:
                verdict = await _call(f"step {step.name}: gate", gate, result, ctx)
            except StepAbort as exc:
                return {"abort": str(exc) or "aborted by its gate"}
            if not isinstance(verdict, bool):
                raise FlowError(f"step {step.name}: gate returned {type(verdict).__name__} {verdict!r}, not a bool")
            return {"pass": verdict}

        return dict(await durable.checkpoint(f"gate:{tag}", judge))

    async def _feedback(self, step: Step, tag: str, result: StepResult, ctx: Context) -> str:
        on_reject = step.on_reject
        assert on_reject is not None

        async def ask() -> str:
            text = await _call(f"step {step.name}: on_reject", on_reject, result, ctx)
            if text is not None and not isinstance(text, str):
                raise FlowError(f"step {step.name}: on_reject returned {type(text).__name__}, not a string")
            return (text or "").strip()

        return str(await durable.checkpoint(f"feedback:{tag}", ask))

    # --- parallel groups ------------------------------------------------------------------------------

    def _payload(self, live: durable.Live, step: Step, ctx: Context, label: str, **extra: Any) -> dict[str, Any]:
        shared = {k: v for k, v in ctx.items() if k not in ("_ran_by", "_workspaces")}
        return {"run_id": live.run_id, "meta": live.meta, "step": step.name, "label": label, "ctx": shared,
                **extra}

    async def _parallel(self, live: durable.Live, group: Parallel, ctx: Context) -> None:
        chosen = [step for step in group.steps if await self._when(step, ctx)]
        if not chosen:
            return
        payloads = [self._payload(live, step, ctx, step.name) for step in chosen]
        outs = await durable.branches(live, group.name, group.limit, payloads)
        for step, out in zip(chosen, outs):

            async def keep(out: dict[str, Any] = out) -> dict[str, Any]:
                return out

            _apply(ctx, await durable.checkpoint(f"settle:{step.name}", keep))

    async def _fan_out(self, live: durable.Live, step: Step, ctx: Context) -> None:
        if not await self._when(step, ctx):
            return

        async def list_items() -> list[Any]:
            try:
                return step.items(ctx)
            except FlowerError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's items callable
                raise FlowError(f"step {step.name}: over raised {_line(exc)}") from None

        items = await durable.checkpoint(f"items:{step.name}", list_items)
        labels = [f"{step.name}[{i}]" for i in range(len(items))]
        payloads = [self._payload(live, step, ctx, label, item=item) for label, item in zip(labels, items)]
        outs = await durable.branches(live, step.name, step.limit, payloads) if payloads else []

        async def combine() -> dict[str, Any]:
            merged: dict[str, Any] = {"set": {step.name: [out.get("set", {}).get(label) for label, out
                                                         in zip(labels, outs)]},
                                      "_results": {step.name: [out["_results"][label] for label, out
                                                               in zip(labels, outs)]},
                                      "_sessions": {}, "_ran_by": {}, "_workspaces": {}}
            for out in outs:
                for key in ("_sessions", "_ran_by", "_workspaces"):
                    merged[key].update(out.get(key) or {})
                for key in ("_aborted", "_failed_at"):
                    if out.get(key) and not merged.get(key):
                        merged[key] = step.name if key == "_failed_at" else out[key]
            return merged

        _apply(ctx, await durable.checkpoint(f"settle:{step.name}", combine))


def _postgres_url(store: Any) -> str | None:
    """The DSN of a PostgreSQL session store under the rewriting layers, if that is what the runtime uses."""
    seen = 0
    while store is not None and seen < 6:
        dsn = getattr(store, "dsn", None)
        if isinstance(dsn, str) and dsn.startswith(("postgresql://", "postgres://")):
            return dsn
        store, seen = getattr(store, "base", None), seen + 1
    return None


def as_workflow(value: Any, source: str, *, prompt: str | None = None) -> Workflow:
    """A `Workflow` from what a target names: a Workflow, an AgentSpec (one step on `prompt`), or a callable
    taking no arguments that returns one of them."""
    if not isinstance(value, (Workflow, AgentSpec)) and callable(value):
        try:
            value = value()
        except FlowerError:
            raise
        except TypeError as exc:
            raise ConfigError(f"{source} must be a Workflow, an AgentSpec or a callable taking no arguments "
                              f"({exc})") from None
        except Exception as exc:  # noqa: BLE001 - the user's factory
            raise ConfigError(f"{source}() failed: {_line(exc)}") from None
    if isinstance(value, Workflow):
        if value.source is None:
            value.source = source
        return value
    if isinstance(value, AgentSpec):
        if not prompt:
            raise ConfigError(f"{source} is an AgentSpec: give the task with --prompt or on stdin")
        return Workflow([Step(value.name, value, prompt)], name=value.name, source=source,
                        context={"prompt": prompt})
    raise ConfigError(f"{source} is a {type(value).__name__}, not a Workflow or an AgentSpec "
                      "(or a callable returning one)")


def _loader(value: Any, source: str) -> Workflow:
    return as_workflow(value, source)


durable.register_loader(_loader)
