"""The public surface is deliberate: `flower.__all__` is locked, sorted, and every name resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import flower
import flower.testing

EXPECTED = [
    "AgentSpec", "CompactPolicy", "ConfigError", "EphemeralPolicy", "Event", "OnEvent", "FlowerError", "HandoffPolicy",
    "PostgresSessionStore", "PruningSessionStore", "RetryPolicy", "RewriteReport", "RewritingSessionStore",
    "RefreshPolicy", "Runtime", "ScriptError", "SqliteSessionStore", "StepResult", "StoreError", "TrimPolicy",
    "TrimmingSessionStore", "Workbench", "build_options", "classify", "coordinator", "delegate_guard",
    "index_guard", "is_ephemeral", "merge_hooks", "read_jsonl", "relay_guard", "rewrite", "spec_guards",
    "spill_guard", "validate", "whitelist_guard", "workbench_hooks", "worker",
    # durable workflows (issue #13, L-6)
    "Context", "FlowError", "Step", "StepAbort", "Workflow", "parallel",
    # the human channel, clarify and the judge (issue #14, L-8, L-9, L-10)
    "Brief", "Goal", "HumanChannel", "Verdict", "clarify_step", "goal_step", "with_goal",
    # one config that travels (issue #25)
    "RuntimeConfig", "resolve_config",
]


def test_all_is_locked_and_sorted() -> None:
    assert flower.__all__ == sorted(EXPECTED)
    assert all(getattr(flower, name) is not None for name in flower.__all__)


LAZY = {"Context", "PostgresSessionStore", "Workflow", "is_ephemeral"}
"""Loaded on first use (`flower.__getattr__`), so `import flower` stays light."""


def test_every_public_name_is_exported() -> None:
    """As httpx checks it: every public name of the package namespace is in `__all__` (subpackages aside), so
    a documented name cannot be importable yet missing from the surface, nor the surface list a stale one."""
    code = ("import json, types, flower; print(json.dumps([n for n, v in vars(flower).items() "
            "if not n.startswith('_') and not isinstance(v, types.ModuleType)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    public = set(json.loads(out.stdout))  # in a fresh interpreter: no test has imported a lazy name yet
    assert public | LAZY == set(flower.__all__), public ^ (set(flower.__all__) - LAZY)


TESTING = [
    "MAIN", "Collected", "Drop", "Error", "Reply", "Request", "ScriptedAPI", "Step", "Text", "Thinking", "ToolUse",
    "Usage", "api_error", "cli_env", "collect", "prompt_too_long", "request_problems", "text", "thinking", "tool_use",
    # scripting `flower go` (issue #28 item 7)
    "GoRound", "go_dispatch", "go_script",
    # typed results (issue #28 item 2)
    "structured",
]


def test_testing_all_is_locked_and_resolves() -> None:
    assert sorted(flower.testing.__all__) == sorted(TESTING)
    assert all(getattr(flower.testing, name) is not None for name in flower.testing.__all__)


def test_import_loads_neither_the_postgres_driver_nor_the_shell_parser() -> None:
    code = "import sys, flower; print('psycopg' in sys.modules, 'bashlex' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_seed_import_line_works() -> None:
    from flower import Runtime, coordinator, worker  # the seed's own line

    assert callable(coordinator) and callable(worker) and isinstance(Runtime, type)
