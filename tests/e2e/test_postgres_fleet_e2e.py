"""Two runtimes with different working directories share one PostgreSQL store (issue #9, B-6, B-9).

A session started by one is resumed by the other through the store, with the rewrites applied.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from flower.agent.roles import coordinator, worker
from flower.runtime.runtime import Runtime
from flower.stores.postgres import PostgresSessionStore
from flower.stores.rewrite import EphemeralPolicy
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.postgres]

DSN = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")


@pytest.fixture
async def pg_store() -> AsyncIterator[PostgresSessionStore]:
    schema = f"flower_fleet_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL unreachable at {DSN}: {exc}")
    store = PostgresSessionStore(DSN, schema=schema)
    try:
        yield store
    finally:
        await store.aclose()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def test_a_session_started_on_one_machine_is_resumed_on_another(
    scripted_api: ScriptedAPI, tmp_path: Path, pg_store: PostgresSessionStore
) -> None:
    spec = coordinator("lead", "Goal: survey.", {"hands": worker("does work", "You work.")})
    scripted_api.script([
        tool_use("Bash", {"command": "head -40 /etc/services"}),
        tool_use("Bash", {"command": "echo SECOND-GLANCE-OUTPUT"}),
        text("surveyed on machine A"),
        text("continued on machine B"),
    ])
    machines = []
    for name in ("a", "b"):
        ws = tmp_path / name / "repo"
        ws.mkdir(parents=True)
        env = scripted_api.cli_env(tmp_path / name / "home")
        machines.append(Runtime(ws, run_dir=tmp_path / name / "runs", env=env, store=pg_store, project="fleet",
                                ephemeral=EphemeralPolicy(keep_recent=1), resilience=False))
    first = await machines[0].run(spec, "survey")
    assert first.ok and first.text == "surveyed on machine A"
    second = await machines[1].run(spec, "continue", resume=first.session_id)
    assert second.ok and second.text == "continued on machine B", second.error
    assert second.session_id == first.session_id
    resumed = scripted_api.requests[-1]
    services = "".join(Path("/etc/services").read_text().splitlines(keepends=True)[:40])
    assert services.strip() in scripted_api.requests[1].result_text()  # machine A saw the whole file
    assert "SECOND-GLANCE-OUTPUT" in resumed.text  # the newest glance result is kept
    assert "expired output of `head -40 /etc/services`" in resumed.text  # the older one expired on the way out
    assert services.strip()[:200] not in resumed.text
    key = pg_store.find_session(first.session_id)
    assert key is not None
    stored = pg_store.load_sync(key) or []
    assert key["project_key"] == "fleet"
    results = [b.get("content") for e in stored if e.get("type") == "user"
               for b in (e["message"].get("content") or []) if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert any(isinstance(r, str) and services.strip()[:200] in r for r in results)  # the original is intact


async def test_without_a_shared_project_key_the_other_machine_cannot_find_it(
    scripted_api: ScriptedAPI, tmp_path: Path, pg_store: PostgresSessionStore
) -> None:
    """Why `Runtime(project=...)` exists: the SDK keys sessions by working directory."""
    spec = coordinator("lead", "Goal: survey.", {"hands": worker("does work", "You work.")})
    scripted_api.script([text("on A")])
    runs = []
    for name in ("a", "b"):
        ws = tmp_path / name / "repo"
        ws.mkdir(parents=True)
        runs.append(Runtime(ws, run_dir=tmp_path / name / "runs", env=scripted_api.cli_env(tmp_path / name / "home"),
                            store=pg_store, resilience=False))
    first = await runs[0].run(spec, "survey")
    second = await runs[1].run(spec, "continue", resume=first.session_id)
    assert not second.ok and "No conversation found" in (second.error or "")
