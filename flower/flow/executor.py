"""The seam between what a workflow means and what runs it: the `Executor` protocol.

`flower.flow.execution` gives a workflow its meaning (step order, `when`, gates, `on_reject`, `reduce`,
parallel groups, continuity) in terms of three operations an executor provides:
- `checkpoint(name, fn)`: run a decision once; a durable executor records its value and a replay returns
  the record instead of calling `fn` again;
- `agent(runtime, attempt)`: one agent attempt on a runtime;
- `branches(group, limit, branches)`: run parallel members or fan-out items, at most `limit` at once, and
  return each one's recorded updates in the order given.
Two executors exist: the DBOS one (`flower.flow.durable.Live`, what `Workflow.run` uses) and the
in-process one (`flower.flow.inprocess`), which runs the same semantics without a database.

A `Definition` is what an executor runs (a `Workflow` is one); it is a protocol so that the engine below
the `Workflow` class never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, runtime_checkable

from flower.agent.events import OnEvent
from flower.agent.spec import AgentSpec
from flower.flow.step import Parallel, Step
from flower.runtime.runtime import Runtime
from flower.runtime.steps import StepResult

__all__ = ["Attempt", "Branch", "Definition", "Executor"]


@dataclass(frozen=True)
class Attempt:
    """One agent attempt of a step."""

    step: str
    """The step's name (the continuity key)."""
    label: str
    """This attempt's label: `name`, `name#retry2`, `name#round2`, `name[3]`."""
    spec: AgentSpec
    prompt: str
    resume: str | None = None
    """A session to continue (an earlier step's with `resume_from`, or this step's after `on_reject`)."""
    fork: bool = False
    resume_prompt: str | None = None
    """The prompt when the executor finds this very attempt's session already started (after a crash)."""
    resume_at: str | None = None
    """With `fork`: the message of `resume` the fork starts from (None: its end)."""
    output_type: Any = None
    """What the final reply must satisfy (`flower.agent.output`); the executor records its value as plain
    JSON and `flower.flow.execution` types it again."""


class _BranchBase(TypedDict):
    step: str
    label: str
    ctx: dict[str, Any]


class Branch(_BranchBase, total=False):
    """One parallel member or fan-out item (the input of a branch; the DBOS executor adds `run_id`, `meta`)."""

    item: Any
    isolate: bool
    run_id: str
    meta: dict[str, Any]


@runtime_checkable
class Definition(Protocol):
    """What an executor runs: named steps in order, an initial context and where the definition came from."""

    name: str
    steps: Sequence[Step | Parallel]
    context: Mapping[str, Any] | None
    source: str | None

    @property
    def total(self) -> int: ...

    def find(self, name: str) -> Step: ...


class Executor(Protocol):
    """How a workflow's decisions, agent attempts and parallel branches are run (and recorded)."""

    @property
    def run_id(self) -> str: ...

    @property
    def runtime(self) -> Runtime:
        """The run's runtime (a branch may run on one of its own)."""
        ...

    @property
    def on_event(self) -> OnEvent | None: ...

    async def checkpoint(self, name: str, fn: Callable[[], Any]) -> Any:
        """`fn()` (sync or async) once; a replay returns the recorded value."""
        ...

    async def agent(self, runtime: Runtime, attempt: Attempt) -> StepResult: ...

    async def branches(self, group: str, limit: int | None, branches: list[Branch]) -> list[dict[str, Any]]:
        """Each branch's recorded updates (`flower.flow.context.Updates.record()`), in the order given."""
        ...
