"""What steps share: the run's `Context`, the updates a step makes to it, and the view a step's code gets.

- `Context` is a dict of outputs by step name plus the run's bookkeeping under `_` keys (`_results`,
  `_sessions`, `_failed_at`, `_aborted`, `_ran_by`, `_workspaces`); `Workflow.run` returns it.
- `Updates` is what one step (or one fan-out, or one parallel member) changes. Its checkpointed form
  (`record()`) is a plain dict with the keys flower has always recorded, so a run recorded by an earlier
  flower continues under this one.
- `StepContext` is what `prompt`, `when`, `gate`, `on_reject`, `reduce` and `over` get as `ctx`: a
  read-only view of the context (`ctx["survey"]`, `ctx.get(...)`, `ctx.results`) that also names the run
  it belongs to: `ctx.runtime` (the runtime this step runs on; a parallel branch's own one),
  `ctx.run_runtime` (the run's own, whose workbench holds the run's notes), `ctx.run_id`, `ctx.step`,
  `ctx.label` and `ctx.emit(event)` for the run's event callback.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from flower.agent.events import Event, OnEvent, emit
from flower.runtime.runtime import Runtime

__all__ = ["BOOKKEEPING", "Context", "StepContext", "Updates", "fresh"]

BOOKKEEPING = ("_results", "_sessions", "_failed_at", "_aborted", "_ran_by", "_workspaces")
_MERGED = ("_results", "_sessions", "_ran_by", "_workspaces")
"""The bookkeeping keys whose dicts are merged; `_failed_at` and `_aborted` keep their first value."""


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


def fresh(initial: Mapping[str, Any] | None) -> Context:
    """The context a run starts with: the workflow's initial values and empty bookkeeping."""
    ctx = Context(dict(initial or {}))
    ctx.update({"_results": {}, "_sessions": {}, "_failed_at": None, "_aborted": None, "_ran_by": {},
                "_workspaces": {}})
    return ctx


@dataclass
class Updates:
    """What a step changes in the context."""

    values: dict[str, Any] = field(default_factory=dict)
    """Outputs by step name (what downstream steps read as `ctx[name]`)."""
    results: dict[str, Any] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    ran_by: dict[str, str] = field(default_factory=dict)
    """Which executor ran each parallel item."""
    workspaces: dict[str, str] = field(default_factory=dict)
    """The workspace of each parallel item that got one of its own."""
    failed_at: str | None = None
    aborted: str | None = None

    def record(self) -> dict[str, Any]:
        """The checkpointed form (the keys every recorded run uses)."""
        return {"set": dict(self.values), "_results": dict(self.results), "_sessions": dict(self.sessions),
                "_ran_by": dict(self.ran_by), "_workspaces": dict(self.workspaces),
                "_failed_at": self.failed_at, "_aborted": self.aborted}

    @classmethod
    def from_record(cls, data: Mapping[str, Any] | None) -> Updates:
        """Updates from their checkpointed form (missing keys: nothing changed)."""
        data = data or {}
        return cls(dict(data.get("set") or {}), dict(data.get("_results") or {}), dict(data.get("_sessions") or {}),
                   dict(data.get("_ran_by") or {}), dict(data.get("_workspaces") or {}),
                   data.get("_failed_at") or None, data.get("_aborted") or None)

    def apply(self, ctx: Context) -> None:
        """Write these updates into `ctx`: values replace, bookkeeping dicts merge, a stop is kept once."""
        ctx.update(self.values)
        for key, part in zip(_MERGED, (self.results, self.sessions, self.ran_by, self.workspaces)):
            ctx.setdefault(key, {}).update(part)
        for key, value in (("_failed_at", self.failed_at), ("_aborted", self.aborted)):
            if value and not ctx.get(key):
                ctx[key] = value


@dataclass(frozen=True)
class StepContext(Mapping[str, Any]):
    """The `ctx` a step's code gets: the run's context, read-only, and the run it belongs to."""

    data: Context
    runtime: Runtime
    """The runtime this step runs on (a parallel writing step's has a workspace of its own)."""
    run_id: str
    step: str
    """The step's name."""
    label: str
    """This run of the step: the name, or `name[i]` for a fan-out item."""
    on_event: OnEvent | None = None
    run_runtime: Runtime | None = None
    """The runtime the run was started with, whose workbench holds the run's notes (default: `runtime`; they
    differ in a parallel writing step)."""

    def __post_init__(self) -> None:
        if self.run_runtime is None:
            object.__setattr__(self, "run_runtime", self.runtime)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return f"StepContext({self.label!r} of run {self.run_id!r}: {sorted(self.data)!r})"

    @property
    def results(self) -> dict[str, Any]:
        """StepResult per finished step name (a list for a fan-out step)."""
        return self.data.results

    @property
    def sessions(self) -> dict[str, str]:
        return self.data.sessions

    @property
    def failed_at(self) -> str | None:
        return self.data.failed_at

    @property
    def aborted(self) -> str | None:
        return self.data.aborted

    @property
    def ok(self) -> bool:
        return self.data.ok

    def emit(self, event: Event) -> None:
        """Send an event to the run's event callback (the live view, `stream()`)."""
        emit(self.on_event, event)
