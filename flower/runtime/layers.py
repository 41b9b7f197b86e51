"""The layers a session is built from, behind one seam: each contributes a `Part` to the session's options.

A layer adds hooks, system text, env, extra directories and Agent-input rewrites (`part`), and may put
something in front of a new session's first message (`first_message`). `Runtime._options` folds the
layers of a session into one set of options; a new layer is one class here (or in its own module).

Invariants:
- The order of the layers is the order of their hooks per event, and of their Agent-input rewrites. The
  one dispatch guard that applies every rewrite comes first among the PreToolUse hooks: the workbench
  relay line, then the isolation marker, then the walls' approval of subagent calls, then (only when the
  spec or a worker has approval rules) the hook that asks a human about a matching call (L-15).
- Only stable text goes into the system prompt (it must stay byte-identical across a run's sessions);
  what changes rides in the first message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from claude_agent_sdk import HookMatcher

from flower.agent.compact import CompactPolicy
from flower.agent.options import isolated_types
from flower.agent.spec import AgentSpec
from flower.runtime.resilience import redispatch_hook
from flower.walls.approval import approval_guard, check_rules, worker_rules
from flower.walls.dispatch import Rewrite, dispatch_guard, isolation_input
from flower.walls.guard import Hooks, approve_subagents, merge_hooks
from flower.workbench.bench import Placement, relay_input, workbench_hooks
from flower.workbench.spill import spill_guard

if TYPE_CHECKING:
    from flower.workbench.bench import Workbench

__all__ = ["Generations", "Layer", "Part", "Spill", "TurnStop", "Walls", "WorkbenchLayer", "fold"]


@dataclass(frozen=True)
class Part:
    """What one layer adds to a session's options."""

    hooks: Mapping[Any, list[HookMatcher]] | None = None
    """Hook matchers by event (an SDK HookEvent)."""
    system: str = ""
    """Text appended to the system prompt (stable across the run)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables for the CLI process, over the runtime's own."""
    add_dirs: tuple[Path, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()
    """Rewrites of an Agent call's input, applied in order by one dispatch guard."""
    artifacts: Path | None = None
    """The real artifacts folder, named in denial reasons."""


class Layer(Protocol):
    """A layer of a session; both methods default to adding nothing."""

    def part(self, spec: AgentSpec) -> Part:
        return Part()

    def first_message(self, prompt: str) -> str:
        return prompt


@dataclass(frozen=True)
class WorkbenchLayer(Layer):
    """The workbench: its rules in the system prompt, its listing before the first message, the index kept
    fresh on writes, and the relay line on every Agent prompt."""

    workbench: Workbench
    placement: Placement = "user"

    def part(self, spec: AgentSpec) -> Part:
        wb = self.workbench
        if not spec.workbench:
            return Part()
        return Part(hooks=workbench_hooks(wb, relay=False), system=wb.system_append(self.placement),
                    add_dirs=(wb.root,) if wb.external else (), rewrites=(partial(relay_input, wb),),
                    artifacts=wb.artifacts)

    def first_message(self, prompt: str) -> str:
        return self.workbench.first_message(prompt, self.placement)


@dataclass(frozen=True)
class Spill(Layer):
    """Tool results over the threshold go to the workbench's spill folder; the model sees a pointer."""

    workbench: Workbench
    threshold: int | None

    def part(self, spec: AgentSpec) -> Part:
        return Part(hooks=spill_guard(self.workbench, self.threshold)) if spec.workbench else Part()


@dataclass(frozen=True)
class Generations(Layer):
    """With generations on, the CLI does not compact on its own unless the spec says how."""

    def part(self, spec: AgentSpec) -> Part:
        return Part(env=CompactPolicy("no_summary").env()) if spec.compact is None else Part()


@dataclass(frozen=True)
class TurnStop(Layer):
    """Generations and refresh: the session's hook that ends a turn at a main-thread tool boundary."""

    hook: HookMatcher

    def part(self, spec: AgentSpec) -> Part:
        return Part(hooks={"PostToolUse": [self.hook]})


@dataclass(frozen=True)
class Walls(Layer):
    """The walls a session needs beyond its spec's: isolated subagent types marked on dispatch, every
    subagent call approved (unattended runs) unless an approval rule asks a human about it, a worker cut off
    by an API failure dispatched again."""

    def part(self, spec: AgentSpec) -> Part:
        isolated = isolated_types(spec)
        workers = {name: rules for name, d in (spec.agents or {}).items() if (rules := worker_rules(d))}
        own = check_rules(f"AgentSpec {spec.name!r}", spec.approve)  # read already: Rules come back as they are
        asking = [approval_guard(spec.channel, own, workers)] if own or workers else []
        return Part(
            hooks=merge_hooks({"PreToolUse": [approve_subagents(leads=spec.leads), *asking]},
                              {"PostToolUseFailure": [HookMatcher(matcher="Agent|Task", hooks=[redispatch_hook()])]}),
            rewrites=(partial(isolation_input, isolated=isolated),) if isolated else (),
        )


def fold(layers: Sequence[Layer], spec: AgentSpec) -> Part:
    """The layers' parts as one: hooks and rewrites in layer order (one dispatch guard for all rewrites,
    first), system texts joined, env overlaid, the last artifacts folder named."""
    parts = [layer.part(spec) for layer in layers]
    rewrites = [rewrite for part in parts for rewrite in part.rewrites]
    hooks: Hooks = merge_hooks({"PreToolUse": [dispatch_guard(rewrites)]} if rewrites else None,
                               *(part.hooks for part in parts))
    env: dict[str, str] = {}
    for part in parts:
        env.update(part.env)
    return Part(hooks=hooks, system="\n\n".join(part.system for part in parts if part.system), env=env,
                add_dirs=tuple(d for part in parts for d in part.add_dirs), rewrites=tuple(rewrites),
                artifacts=next((p.artifacts for p in reversed(parts) if p.artifacts is not None), None))
