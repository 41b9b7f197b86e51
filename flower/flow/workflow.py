"""`Workflow`: agent steps with gates, retries and parallel groups, run durably on DBOS.

`await wf.run(runtime)` starts a run, or continues this workflow's unfinished run in the same workspace and
run dir; it returns the `Context`: each step's output under its name, plus `_results` (StepResults),
`_sessions` (session id per step name), `_failed_at` and `_aborted`.

This module is the front: a workflow's definition and its checks, and `run` on the DBOS executor
(`flower.flow.durable`). What the steps mean on any executor is `flower.flow.execution`; the in-process
executor (`flower.flow.inprocess`) runs the same semantics without a database.

Invariants:
- Replay is deterministic: every decision that calls user code or the model (`when`, agent attempts,
  gates, `on_reject` feedback, fan-out items, each step's context updates) is a DBOS checkpoint, so a run
  continued after a crash replays recorded values up to where it stopped and never calls the model again
  for a finished attempt.
- A workflow is checked when it is built: two steps with one name, or a `resume_from` that names no
  earlier step, is one `FlowError` line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from flower.agent.events import OnEvent
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError, FlowError
from flower.flow import durable
from flower.flow.context import Context
from flower.flow.step import Parallel, Step
from flower.runtime.runtime import Runtime
from flower.runtime.stream import EventStream
from flower.stores.opening import is_postgres
from flower.util.loader import call

__all__ = ["Context", "Workflow", "as_workflow"]


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


def _postgres_url(store: object) -> str | None:
    """The DSN of a PostgreSQL session store under the rewriting layers, if that is what the runtime uses."""
    seen = 0
    while store is not None and seen < 6:
        dsn = getattr(store, "dsn", None)
        if isinstance(dsn, str) and is_postgres(dsn):
            return dsn
        store, seen = getattr(store, "base", None), seen + 1
    return None


def as_workflow(value: Any, source: str, *, prompt: str | None = None) -> Workflow:
    """A `Workflow` from what a target names: a Workflow, an AgentSpec (one step on `prompt`), or a callable
    taking no arguments that returns one of them."""
    if not isinstance(value, (Workflow, AgentSpec)) and callable(value):
        value = call(value, source, "a Workflow, an AgentSpec")
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
