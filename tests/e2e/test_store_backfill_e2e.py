"""A store that cannot take appends for a while gets no hole (issue #26 item 2).

The test holds `LOCK TABLE entries IN EXCLUSIVE MODE` from another PostgreSQL connection (loads still pass,
appends wait for the lock) while the real CLI works; the store's short `lock_timeout` makes each of the
SDK's mirror attempts fail, so the SDK drops those batches. At the session's end flower back-fills the store
from the CLI's own transcript: every uuid of it is stored, and a resume sends the whole conversation in order.
A resumed session, whose transcript lives in the SDK's temp config dir, is back-filled before it disconnects.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from claude_agent_sdk import project_key_for_directory
from psycopg import sql

from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.runtime import Runtime
from flower.stores.postgres import PostgresSessionStore
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.postgres]

DSN = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
SPEC = AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash"])


class TableLock:
    """`LOCK TABLE <schema>.entries IN EXCLUSIVE MODE` held by a connection of its own until `release()`."""

    def __init__(self, schema: str) -> None:
        self.schema, self.held, self.done = schema, threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def _hold(self) -> None:
        with psycopg.connect(DSN) as conn:
            conn.execute(sql.SQL("LOCK TABLE {}.entries IN EXCLUSIVE MODE").format(sql.Identifier(self.schema)))
            self.held.set()
            self.done.wait(120)
            conn.rollback()

    def take(self) -> None:
        self.thread.start()
        assert self.held.wait(10)

    def release(self) -> None:
        self.done.set()


@pytest.fixture
async def store() -> AsyncIterator[tuple[PostgresSessionStore, str]]:
    schema = f"flower_fill_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL unreachable at {DSN}: {exc}")
    pg = PostgresSessionStore(DSN, schema=schema, lock_timeout=0.2, statement_timeout=3)
    await pg.append({"project_key": "warm", "session_id": "warm"}, [{"type": "x", "uuid": "warm"}])  # the schema
    try:
        yield pg, schema
    finally:
        await pg.aclose()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def locked_turn(lock: TableLock, tag: str) -> Any:
    """Two Bash calls, then a final text; the lock is released when the last request arrives."""

    def handler(request: Any) -> Any:
        results = sum(1 for m in request.messages for b in (m.get("content") or [])
                      if isinstance(b, dict) and b.get("type") == "tool_result" and f"{tag}-" in str(b))
        if results < 2:
            return tool_use("Bash", {"command": f"echo {tag}-{results + 1}"}, delay=2.5)
        lock.release()
        return text(f"{tag} done", delay=1.0)

    return handler


def uuids(entries: list[Any] | None) -> list[str]:
    return [e["uuid"] for e in entries or [] if isinstance(e, dict) and isinstance(e.get("uuid"), str)]


def conversation(request: Any) -> list[str]:
    """The request's messages as short tags: the prompt, each call and result, each text."""
    tags = []
    for message in request.messages:
        content = message.get("content")
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content or []:
            if block.get("type") == "tool_use":
                tags.append(f"call {block['input'].get('command')}")
            elif block.get("type") == "tool_result":
                tags.append(f"result {json.dumps(block.get('content'))[:40]}")
            elif block.get("type") == "text" and "<system-reminder>" not in block.get("text", ""):
                tags.append(f"{message['role']} {' '.join(block['text'].split()[-2:])}")
    return tags


async def test_a_dropped_mirror_batch_is_back_filled_from_the_transcript(
    scripted_api: ScriptedAPI, tmp_path: Path, store: tuple[PostgresSessionStore, str]
) -> None:
    pg, schema = store
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    runtime = Runtime(ws, run_dir=tmp_path / "runs", env=scripted_api.cli_env(home), store=pg, resilience=False)
    lock = TableLock(schema)
    scripted_api.handler = locked_turn(lock, "one")
    events: list[Event] = []
    lock.take()
    result = await runtime.run(SPEC, "work PROMPT-ONE", on_event=events.append)
    assert result.ok and result.text == "one done", result.error
    key = {"project_key": project_key_for_directory(str(ws)), "session_id": result.session_id}
    transcript = home / ".claude" / "projects" / key["project_key"] / f"{result.session_id}.jsonl"
    local = [json.loads(line) for line in transcript.read_text().splitlines()]
    wanted = uuids([e for e in local if not str(e.get("type")).startswith("api-request")])
    stored = uuids(await pg.load(key))  # type: ignore[arg-type]
    assert [u for u in wanted if u not in stored] == []  # no acknowledged entry is missing
    assert len(stored) == len(set(stored))  # and none is stored twice
    (filled,) = [e for e in events if e.payload.get("subtype") == "backfill"]
    assert filled.payload["entries"] > 0 and "back-filled" in filled.text

    scripted_api.handler = None
    scripted_api.script([text("two done")])
    again = await runtime.run(SPEC, "now PROMPT-TWO", resume=result.session_id)
    assert again.ok and again.text == "two done", again.error
    assert [t for t in conversation(scripted_api.requests[-1]) if not t.startswith("system")] == [
        "user work PROMPT-ONE", "call echo one-1", 'result "one-1"', "call echo one-2", 'result "one-2"',
        "assistant one done", "user now PROMPT-TWO"]


async def test_a_resumed_session_is_back_filled_before_its_temp_transcript_goes(
    scripted_api: ScriptedAPI, tmp_path: Path, store: tuple[PostgresSessionStore, str]
) -> None:
    pg, schema = store
    ws = tmp_path / "ws"
    ws.mkdir()
    runtime = Runtime(ws, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"), store=pg,
                      resilience=False)
    scripted_api.script([text("first done")])
    first = await runtime.run(SPEC, "start PROMPT-ONE")
    assert first.ok
    lock = TableLock(schema)
    scripted_api.handler = locked_turn(lock, "two")
    events: list[Event] = []
    lock.take()
    resumed = await runtime.run(SPEC, "go on PROMPT-TWO", resume=first.session_id, on_event=events.append)
    assert resumed.ok and resumed.text == "two done", resumed.error
    assert [e for e in events if e.payload.get("subtype") == "backfill"]
    key = {"project_key": project_key_for_directory(str(ws)), "session_id": first.session_id}
    stored = await pg.load(key)  # type: ignore[arg-type]
    assert len(uuids(stored)) == len(set(uuids(stored)))
    calls = [b["input"]["command"] for e in stored or [] if e.get("type") == "assistant"
             for b in e["message"]["content"] if b.get("type") == "tool_use"]
    outputs = [b.get("content") for e in stored or [] if e.get("type") == "user" and isinstance(
        e["message"]["content"], list) for b in e["message"]["content"] if b.get("type") == "tool_result"]
    texts_ = [b["text"] for e in stored or [] if e.get("type") == "assistant"
              for b in e["message"]["content"] if b.get("type") == "text"]
    # every call, result and reply of the resumed turn is stored (back-filled ones after later ones)
    assert sorted(calls) == ["echo two-1", "echo two-2"] and sorted(outputs) == ["two-1", "two-2"]
    assert sorted(texts_) == ["first done", "two done"]
