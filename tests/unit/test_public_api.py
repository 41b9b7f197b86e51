"""The public surface is deliberate: `flower.__all__` is locked, sorted, and every name resolves."""

from __future__ import annotations

import subprocess
import sys

import flower
import flower.testing

EXPECTED = [
    "AgentSpec", "CompactPolicy", "ConfigError", "EphemeralPolicy", "Event", "FlowerError", "HandoffPolicy",
    "PostgresSessionStore", "PruningSessionStore", "RetryPolicy", "RewriteReport", "RewritingSessionStore",
    "Runtime", "ScriptError", "SqliteSessionStore", "StepResult", "StoreError", "TrimPolicy",
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


def test_testing_all_resolves() -> None:
    assert all(getattr(flower.testing, name) is not None for name in flower.testing.__all__)


def test_import_loads_neither_the_postgres_driver_nor_the_shell_parser() -> None:
    code = "import sys, flower; print('psycopg' in sys.modules, 'bashlex' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_seed_import_line_works() -> None:
    from flower import Runtime, coordinator, worker  # the seed's own line

    assert callable(coordinator) and callable(worker) and isinstance(Runtime, type)
