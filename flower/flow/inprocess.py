"""The in-process executor: a workflow's semantics without a database.

`await InProcessExecutor(workflow, runtime).run()` runs the steps in this process and returns the `Context`,
exactly as `Workflow.run` would on DBOS, except that nothing survives the process: checkpoints are kept
in `recorded` (name -> value) for as long as the executor lives. That makes it the executor of unit tests:

- `log` lists every checkpoint name in the order the run reached it, `ran` the ones whose function ran;
- a `recorded` given up front is a replay: those checkpoints return their value without calling the
  user's code or the model again, as a continued DBOS run does;
- `agent` replaces the agent attempt (default: `runtime.run`), so a test can script each attempt's result.

Parallel members and fan-out items run concurrently (at most `limit` at once), each writing step in a
workspace of its own (`flower.flow.isolation`), and their results come back in order.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from flower.agent.events import OnEvent
from flower.flow.context import Context
from flower.flow.execution import execute, member
from flower.flow.executor import Attempt, Branch, Definition
from flower.flow.isolation import branch_runtime
from flower.runtime.runtime import Runtime
from flower.runtime.steps import StepResult

__all__ = ["EXECUTOR_ID", "AgentRunner", "InProcessExecutor"]

EXECUTOR_ID = "in-process"
"""What `ctx["_ran_by"]` names for a parallel item run by this executor."""

AgentRunner = Callable[[Runtime, Attempt], Awaitable[StepResult]]


@dataclass
class InProcessExecutor:
    """Runs a workflow in this process; checkpoints live in memory."""

    workflow: Definition
    runtime: Runtime
    on_event: OnEvent | None = None
    agent_runner: AgentRunner | None = None
    """Runs one attempt (default: the runtime runs the attempt's spec)."""
    recorded: dict[str, Any] = field(default_factory=dict)
    """Checkpoint name -> its value; values given up front are replayed."""
    log: list[str] = field(default_factory=list)
    """Every checkpoint reached, in order (a replayed one too)."""
    ran: list[str] = field(default_factory=list)
    """The checkpoints whose function ran (not replayed)."""
    run_id: str = ""
    """Default: the runtime's run id."""

    def __post_init__(self) -> None:
        self.run_id = self.run_id or self.runtime.run_id

    async def run(self) -> Context:
        """Run the workflow; its final context."""
        return Context(await execute(self.workflow, self))

    async def checkpoint(self, name: str, fn: Callable[[], Any]) -> Any:
        self.log.append(name)
        if name in self.recorded:
            return self.recorded[name]
        value = fn()
        if inspect.isawaitable(value):
            value = await value
        self.ran.append(name)
        self.recorded[name] = value
        return value

    async def agent(self, runtime: Runtime, attempt: Attempt) -> StepResult:
        async def body() -> StepResult:
            if self.agent_runner is not None:
                return await self.agent_runner(runtime, attempt)
            return await runtime.run(attempt.spec, attempt.prompt, step_name=attempt.label, resume=attempt.resume,
                                     fork=attempt.fork, resume_at=attempt.resume_at if attempt.fork else None,
                                     on_event=self.on_event, output_type=attempt.output_type)

        result: StepResult = await self.checkpoint(f"agent:{attempt.label}", body)
        return result

    async def branches(self, group: str, limit: int | None, branches: list[Branch]) -> list[dict[str, Any]]:
        limiter = anyio.CapacityLimiter(limit or max(1, len(branches)))
        outs: list[dict[str, Any]] = [{} for _ in branches]
        errors: list[BaseException] = []

        async def one(index: int, branch: Branch) -> None:
            async with limiter:
                try:
                    outs[index] = await self._branch(branch)
                except Exception as exc:  # noqa: BLE001 - re-raised below, the first one
                    errors.append(exc)

        async with anyio.create_task_group() as group_tasks:
            for index, branch in enumerate(branches):
                group_tasks.start_soon(one, index, branch)
        if errors:
            raise errors[0]
        return outs

    async def _branch(self, branch: Branch) -> dict[str, Any]:
        step = self.workflow.find(branch["step"])
        label = branch["label"]
        runtime = branch_runtime(self, label, step.writes and branch.get("isolate", True))
        updates = await member(self.workflow, self, branch, runtime)
        updates["_ran_by"] = {label: EXECUTOR_ID}
        if runtime.workspace != self.runtime.workspace:
            updates["_workspaces"] = {label: str(runtime.workspace)}
        return updates
