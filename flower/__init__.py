"""flower: a runtime for very long Claude agent runs that keeps the coordinator's context clean.

This module only re-exports; `__all__` is locked by a test. `PostgresSessionStore` and `is_ephemeral` are
imported on first use, so `import flower` loads neither the PostgreSQL driver nor the shell parser; so are
`Workflow` and `Context` (they load DBOS).
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from flower.agent.compact import CompactPolicy
from flower.agent.events import Event, OnEvent
from flower.agent.options import build_options, spec_guards
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError, FlowerError, FlowError, ScriptError, StoreError
from flower.flow.step import Step, StepAbort, parallel
from flower.human import Brief, Goal, HumanChannel, Verdict, clarify_step, goal_step, with_goal
from flower.runtime.config import RuntimeConfig, resolve_config
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.resilience import RetryPolicy, classify
from flower.runtime.runtime import Runtime, StepResult
from flower.stores.jsonl import read_jsonl
from flower.stores.rewrite import (
    EphemeralPolicy,
    PruningSessionStore,
    RewriteReport,
    RewritingSessionStore,
    TrimmingSessionStore,
    TrimPolicy,
    rewrite,
)
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.validate import validate
from flower.walls.guard import delegate_guard, merge_hooks, whitelist_guard
from flower.workbench.bench import Workbench, index_guard, relay_guard, workbench_hooks
from flower.workbench.spill import spill_guard

if _TYPE_CHECKING:
    from flower.flow.workflow import Context, Workflow
    from flower.stores.postgres import PostgresSessionStore
    from flower.walls.glance.judge import is_ephemeral

__all__ = [
    "AgentSpec",
    "Brief",
    "CompactPolicy",
    "ConfigError",
    "Context",
    "EphemeralPolicy",
    "Event",
    "FlowError",
    "FlowerError",
    "Goal",
    "HandoffPolicy",
    "HumanChannel",
    "OnEvent",
    "PostgresSessionStore",
    "PruningSessionStore",
    "RefreshPolicy",
    "RetryPolicy",
    "RewriteReport",
    "RewritingSessionStore",
    "Runtime",
    "RuntimeConfig",
    "ScriptError",
    "SqliteSessionStore",
    "Step",
    "StepAbort",
    "StepResult",
    "StoreError",
    "TrimPolicy",
    "TrimmingSessionStore",
    "Verdict",
    "Workbench",
    "Workflow",
    "build_options",
    "clarify_step",
    "classify",
    "coordinator",
    "delegate_guard",
    "goal_step",
    "index_guard",
    "is_ephemeral",
    "merge_hooks",
    "parallel",
    "read_jsonl",
    "relay_guard",
    "resolve_config",
    "rewrite",
    "spec_guards",
    "spill_guard",
    "validate",
    "whitelist_guard",
    "with_goal",
    "workbench_hooks",
    "worker",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> _Any:
    if name == "PostgresSessionStore":
        from flower.stores.postgres import PostgresSessionStore

        return PostgresSessionStore
    if name == "is_ephemeral":
        from flower.walls.glance.judge import is_ephemeral

        return is_ephemeral
    if name in ("Context", "Workflow"):
        from flower.flow import workflow

        return getattr(workflow, name)
    raise AttributeError(f"module 'flower' has no attribute {name!r}")
