"""The seam between the step loop and the `Runtime` that hosts it: what a step's sessions read and add to.

`Host` is what the loops and sessions need of the runtime (its settings, its store, the window of the
model in use, the options a session starts with); `Runtime` is the one implementation. `Step` is one
step's shared parts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, SessionStore

from flower.agent.events import OnEvent
from flower.agent.spec import AgentSpec
from flower.runtime.control import Steering
from flower.runtime.handoff import ContextMeter, HandoffPolicy
from flower.runtime.outcome import Outcome
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.resilience import RetryPolicy
from flower.runtime.tally import Tally

if TYPE_CHECKING:
    from flower.workbench.bench import Placement, Workbench

__all__ = ["Host", "Step"]


@dataclass
class Step:
    """One step's shared parts: what every session of it reads and adds to."""

    spec: AgentSpec
    prompt: str
    name: str
    """The step's name (the spec's unless the caller named it)."""
    meter: ContextMeter
    """The main thread's context across the step's sessions."""
    tally: Tally
    on_event: OnEvent | None
    resume_at: str | None = None
    """The first session forks its resumed one at this message (`Runtime.run(resume_at=)`)."""
    output_type: Any = None
    """What the final reply must satisfy (`flower.agent.output`), or None for prose."""


class Host(Protocol):
    """What the step loop uses of its runtime."""

    handoff_policy: HandoffPolicy | None
    refresh: RefreshPolicy | None
    retry: RetryPolicy | None
    limit_wait: float
    store: SessionStore
    workbench: Workbench | None
    placement: Placement
    run_dir: Path
    run_id: str
    _steering: Steering
    _boundary: list[Callable[[], None]]

    def threshold(self, spec: AgentSpec) -> int | None: ...

    def window(self, spec: AgentSpec) -> int | None: ...

    def _first_message(self, prompt: str) -> str: ...

    def _window_facts(self) -> dict[str, Any]: ...

    def _cli_env(self) -> dict[str, str]: ...

    def _key(self, session: str) -> dict[str, str]: ...

    def _answered(self) -> None: ...

    def _ever_answered(self) -> bool: ...

    def _use_model(self, spec: AgentSpec, model: str, on_event: OnEvent | None) -> None: ...

    def _calibrate(self, error: str | None, meter: ContextMeter, on_event: OnEvent | None) -> None: ...

    def _options(self, spec: AgentSpec, resume: str | None, fork: bool,
                 stop_hook: HookMatcher | None, resume_at: str | None = None,
                 output_type: Any = None) -> ClaudeAgentOptions: ...

    async def _attempt(self, step: Step, message: str, resume: str | None, fork: bool) -> Outcome: ...
