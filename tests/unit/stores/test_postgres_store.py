"""PostgresSessionStore against the real server: the SDK protocol, concurrent writer processes, SIGKILL, errors (B-9).

Needs PostgreSQL at 127.0.0.1:5432 (or `FLOWER_TEST_PG_DSN`). Every test works in its own schema
`flower_test_<pid>_<random>_<n>`, dropped afterwards. Without a server the tests skip, or fail when `CI` is set.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import secrets
import signal
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.types import SessionKey
from psycopg import sql

from flower.errors import ConfigError, StoreError
from flower.stores import _postgres_schema as postgres_module
from flower.stores._common import Migration
from flower.stores.postgres import PostgresSessionStore

pytestmark = pytest.mark.postgres

DSN = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
RUN_PREFIX = f"flower_test_{os.getpid()}_{secrets.token_hex(3)}"
_counter = itertools.count()

KEY: SessionKey = {"project_key": "-work-proj", "session_id": "s-1"}
SUB: SessionKey = {**KEY, "subpath": "subagents/agent-a1"}


def user(uuid: str | None, text: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": text}, **extra}
    if uuid is not None:
        entry["uuid"] = uuid
    return entry


def assistant(uuid: str, msg_id: str, usage: dict[str, int], *, model: str = "claude-x") -> dict[str, Any]:
    message = {"id": msg_id, "role": "assistant", "model": model, "content": [], "usage": usage}
    return {"type": "assistant", "uuid": uuid, "message": message}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        reason = f"PostgreSQL not reachable at {DSN!r}: {' '.join(str(exc).split())}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    yield DSN
    with psycopg.connect(DSN, autocommit=True) as conn:
        leftovers = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (RUN_PREFIX + "%",)
        ).fetchall()
        for (name,) in leftovers:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def schema(server: str) -> Iterator[str]:
    name = f"{RUN_PREFIX}_{next(_counter)}"
    yield name
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
async def store(server: str, schema: str) -> AsyncIterator[PostgresSessionStore]:
    async with PostgresSessionStore(server, schema=schema) as opened:
        yield opened


@pytest.mark.anyio
async def test_sdk_conformance_suite_against_the_real_server(server: str) -> None:
    """B-9: the SDK's 14 contracts, each on a fresh schema."""
    made: list[PostgresSessionStore] = []

    def make() -> PostgresSessionStore:
        made.append(PostgresSessionStore(server, schema=f"{RUN_PREFIX}_conf_{len(made)}"))
        return made[-1]

    try:
        await run_session_store_conformance(make)
    finally:
        for opened in made:
            await opened.aclose()
    assert len(made) == 15


@pytest.mark.anyio
async def test_append_is_idempotent_on_uuid(store: PostgresSessionStore) -> None:
    await store.append(KEY, [user("u1", "one"), user(None, "mode-a"), user("u2", "two")])
    [before] = await store.list_sessions(KEY["project_key"])
    [summary_before] = await store.list_session_summaries(KEY["project_key"])

    await store.append(KEY, [user("u2", "two"), user("u1", "one")])  # the SDK's retry
    assert await store.list_sessions(KEY["project_key"]) == [before]
    assert await store.list_session_summaries(KEY["project_key"]) == [summary_before]

    await store.append(KEY, [user("u3", "three"), user("u3", "again"), user(None, "mode-b"), user("u1", "x")])
    assert await store.load(KEY) == [
        user("u1", "one"),
        user(None, "mode-a"),
        user("u2", "two"),
        user("u3", "three"),
        user(None, "mode-b"),
    ]
    [after] = await store.list_sessions(KEY["project_key"])
    [summary_after] = await store.list_session_summaries(KEY["project_key"])
    assert after["mtime"] > before["mtime"]
    assert summary_after["mtime"] == after["mtime"]


@pytest.mark.anyio
async def test_the_same_entry_object_twice_in_a_batch_is_stored_once(store: PostgresSessionStore) -> None:
    entry = user("u1", "one")
    await store.append(KEY, [entry, entry, user(None, "no uuid"), entry])
    assert await store.load(KEY) == [user("u1", "one"), user(None, "no uuid")]


@pytest.mark.anyio
async def test_awkward_text_round_trips(store: PostgresSessionStore) -> None:
    """NUL (jsonb would refuse it), lone surrogates, CJK and big numbers come back deep-equal."""
    awkward = [
        user("a1", "nul \x00 inside", toolUseResult={"stdout": "bin\x00ary"}),
        user("a2", "lone \ud83d surrogate"),
        user("a3", "中文 текст 🌸", cost=0.1 + 0.2, big=2**62, nested={"deep": [[{"x": None}]]}),
    ]
    await store.append(KEY, awkward)
    assert await store.load(KEY) == awkward
    assert store.load_sync(KEY) == awkward


@pytest.mark.anyio
async def test_delete_cascade_and_sync_helpers(store: PostgresSessionStore) -> None:
    other: SessionKey = {"project_key": KEY["project_key"], "session_id": "s-2"}
    usage = {"input_tokens": 5, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 20}
    await store.append(KEY, [user("m1", "main"), *(assistant(f"a{i}", "msg_1", usage) for i in range(3))])
    await store.append(SUB, [user("s1", "sub")])
    await store.append(other, [user("o1", "other")])
    await store.append({**other, "subpath": "subagents/agent-b"}, [user("o2", "other sub")])

    assert store.has_session("s-1") and store.has_session("s-1", KEY["project_key"])
    assert not store.has_session("s-1", "-elsewhere")
    assert store.find_session("s-2") == other
    assert store.last_context(KEY) == 1025  # three entries of one API message: counted once
    assert store.last_context(SUB) is None
    assert await store.list_subkeys(KEY) == ["subagents/agent-a1"]

    await store.delete(KEY)

    assert await store.load(KEY) is None and await store.load(SUB) is None
    assert await store.list_subkeys(KEY) == []
    assert not store.has_session("s-1")
    assert [s["session_id"] for s in await store.list_session_summaries(KEY["project_key"])] == ["s-2"]
    assert await store.load(other) == [user("o1", "other")]
    assert await store.list_subkeys(other) == ["subagents/agent-b"]


def test_last_context_pages_back_past_many_assistant_entries(server: str, schema: str) -> None:
    """The newest real message decides, even when 500 synthetic replies follow it."""
    usage = {"input_tokens": 1, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 3}
    entries = [assistant("real", "msg_real", usage)]
    entries += [assistant(f"syn{i}", f"syn{i}", {"input_tokens": 0}, model="<synthetic>") for i in range(500)]

    async def scenario() -> int | None:
        async with PostgresSessionStore(server, schema=schema) as opened:
            await opened.append(KEY, entries)
            return opened.last_context(KEY)

    assert asyncio.run(scenario()) == 6


def test_one_store_serves_successive_event_loops(server: str, schema: str) -> None:
    """A sync caller running `asyncio.run` per step must not trip over a pool bound to a finished loop."""
    opened = PostgresSessionStore(server, schema=schema)
    asyncio.run(opened.append(KEY, [user("u1", "first loop")]))
    asyncio.run(opened.append(KEY, [user("u2", "second loop")]))
    assert asyncio.run(opened.load(KEY)) == [user("u1", "first loop"), user("u2", "second loop")]
    asyncio.run(opened.aclose())


def test_sync_close_works_inside_and_outside_an_event_loop(server: str, schema: str) -> None:
    """`close()` never leaves a coroutine unawaited; the store reopens on next use."""
    opened = PostgresSessionStore(server, schema=schema)
    asyncio.run(opened.append(KEY, [user("u1", "one")]))
    opened.close()  # the pool's loop has finished
    assert opened.load_sync(KEY) == [user("u1", "one")]

    async def inside() -> list[Any] | None:
        await opened.append(KEY, [user("u2", "two")])
        opened.close()  # the pool's loop is this running one: its close is scheduled on it
        await asyncio.sleep(0.1)
        assert not opened._closing  # the scheduled close has run
        loaded = await opened.load(KEY)
        await opened.aclose()
        return loaded

    assert asyncio.run(inside()) == [user("u1", "one"), user("u2", "two")]


# -- errors a user can cause ---------------------------------------------------------------------------


def _one_line_store_error(exc_info: pytest.ExceptionInfo[StoreError]) -> str:
    message = str(exc_info.value)
    assert "\n" not in message and "Traceback" not in message
    assert exc_info.value.__cause__ is None and exc_info.value.__suppress_context__
    return message


def test_unreachable_server_is_one_line(schema: str) -> None:
    dead = PostgresSessionStore("host=127.0.0.1 port=1 user=postgres password=hunter2 dbname=test", schema=schema)
    with pytest.raises(StoreError) as info:
        asyncio.run(dead.load(KEY))
    message = _one_line_store_error(info)
    assert "cannot connect to the session store at postgresql://postgres@127.0.0.1:1/test" in message
    assert "Connection refused" in message and "hunter2" not in message
    with pytest.raises(StoreError, match="cannot connect"):
        dead.has_session("s-1")


def test_wrong_database_is_one_line(server: str, schema: str) -> None:
    wrong = PostgresSessionStore(server.replace("dbname=test", "dbname=flower_no_such_db"), schema=schema)
    with pytest.raises(StoreError) as info:
        asyncio.run(wrong.open())
    assert 'database "flower_no_such_db" does not exist' in _one_line_store_error(info)


def test_bad_dsn_and_bad_schema_name_fail_at_construction() -> None:
    with pytest.raises(StoreError) as info:
        PostgresSessionStore("this is not a dsn")
    assert "invalid PostgreSQL DSN" in _one_line_store_error(info)
    with pytest.raises(ConfigError, match="schema name"):
        PostgresSessionStore(DSN, schema="Robert'); DROP TABLE students;--")


# -- migrations ----------------------------------------------------------------------------------------


def _tables(server: str, schema: str) -> list[str]:
    with psycopg.connect(server) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1", (schema,)
        ).fetchall()
    return [name for (name,) in rows]


def test_concurrent_first_opens_migrate_once(server: str, schema: str) -> None:
    """Six stores racing to create one schema: the advisory lock makes exactly one migrate."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        opened = PostgresSessionStore(server, schema=schema)
        barrier.wait()
        try:
            opened.has_session("x")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)
        finally:
            asyncio.run(opened.aclose())

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(server) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version, name FROM {}.schema_version").format(sql.Identifier(schema))
        ).fetchall()
    assert rows == [(1, "initial schema")]
    assert _tables(server, schema) == ["entries", "schema_version", "summaries", "transcripts"]


def test_foreign_and_newer_schemas_are_refused_untouched(server: str, schema: str) -> None:
    ident = sql.Identifier(schema)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
        conn.execute(sql.SQL("CREATE TABLE {}.invoices (id int)").format(ident))
    with pytest.raises(StoreError, match=r"holds other tables, not a flower session store \(invoices\)"):
        PostgresSessionStore(server, schema=schema).has_session("x")
    assert _tables(server, schema) == ["invoices"]

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}.invoices").format(ident))
    PostgresSessionStore(server, schema=schema).has_session("x")  # an empty schema is adopted
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("INSERT INTO {}.schema_version VALUES (7, 'future')").format(ident))
    with pytest.raises(StoreError, match="schema version 7, newer than this flower"):
        PostgresSessionStore(server, schema=schema).has_session("x")


def test_the_human_channels_mailbox_is_adopted_beside_the_store_and_a_foreign_table_of_its_name_is_not(
    server: str, schema: str
) -> None:
    from flower.human.mailbox import PostgresMailbox

    PostgresMailbox(server, schema=schema)  # a run's first question came before its first stored entry
    PostgresSessionStore(server, schema=schema).has_session("x")
    assert _tables(server, schema) == ["entries", "human_letters", "schema_version", "summaries", "transcripts"]

    other = schema + "_other"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(other)))
        conn.execute(sql.SQL("CREATE TABLE {}.human_letters (id int, note text)").format(sql.Identifier(other)))
    try:
        with pytest.raises(StoreError, match=r"holds other tables, not a flower session store \(human_letters\)"):
            PostgresSessionStore(server, schema=other).has_session("x")
        assert _tables(server, other) == ["human_letters"]
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(other)))


def test_an_old_schema_is_migrated_in_place(server: str, schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async def write() -> None:
        async with PostgresSessionStore(server, schema=schema) as opened:
            await opened.append(KEY, [user("u1", "kept")])

    asyncio.run(write())
    extra = Migration(2, "entry sizes", ("ALTER TABLE {schema}.entries ADD COLUMN size integer",))
    monkeypatch.setattr(postgres_module, "MIGRATIONS", (*postgres_module.MIGRATIONS, extra))
    monkeypatch.setattr(postgres_module, "SCHEMA_VERSION", 2)
    assert PostgresSessionStore(server, schema=schema).load_sync(KEY) == [user("u1", "kept")]
    with psycopg.connect(server) as conn:
        ident = sql.Identifier(schema)
        versions = conn.execute(
            sql.SQL("SELECT version, name FROM {}.schema_version ORDER BY 1").format(ident)
        ).fetchall()
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = 'entries'",
            (schema,),
        ).fetchall()
    assert versions == [(1, "initial schema"), (2, "entry sizes")]
    assert ("size",) in columns


# -- concurrent writer processes -----------------------------------------------------------------------


def _entry(writer: int, n: int, session: str) -> dict[str, Any]:
    return {
        "type": "user",
        "uuid": f"{session}-w{writer}-{n}",
        "writer": writer,
        "n": n,
        "timestamp": f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z",
        "customTitle": f"w{writer}-{n}",  # last-wins in the summary fold: exposes a lost or misordered fold
        "message": {"role": "user", "content": f"entry {n} of writer {writer}"},
    }


def _fleet_writer(dsn: str, schema: str, writer: int, count: int, barrier: Any) -> None:
    import random

    rng = random.Random(writer)

    async def main() -> None:
        async with PostgresSessionStore(dsn, schema=schema, max_connections=2) as store:
            barrier.wait()
            own: SessionKey = {"project_key": KEY["project_key"], "session_id": f"own-{writer}"}
            done = {"shared": 0, "own": 0}
            while done["shared"] < count or done["own"] < count:
                name = rng.choice([n for n in done if done[n] < count])
                key = KEY if name == "shared" else own
                size = min(rng.randint(1, 40), count - done[name])
                batch = [_entry(writer, i, name) for i in range(done[name], done[name] + size)]
                await store.append(key, batch)
                if rng.random() < 0.2:  # the SDK's retry of a batch that did land
                    await store.append(key, batch[: rng.randint(1, size)])
                done[name] += size

    asyncio.run(main())


def test_eight_processes_lose_nothing_keep_order_and_fold_every_batch(server: str, schema: str) -> None:
    """B-9: 8 spawned writers, each into one shared session and into its own; summaries match a full fold."""
    count = 400
    PostgresSessionStore(server, schema=schema).has_session("x")  # migrate up front
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    procs = [ctx.Process(target=_fleet_writer, args=(server, schema, w, count, barrier)) for w in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=240)
    assert [proc.exitcode for proc in procs] == [0] * 8

    store = PostgresSessionStore(server, schema=schema)
    shared = store.load_sync(KEY)
    assert shared is not None and len(shared) == 8 * count
    for w in range(8):
        assert [e["n"] for e in shared if e["writer"] == w] == list(range(count))
        own = store.load_sync({"project_key": KEY["project_key"], "session_id": f"own-{w}"})
        assert own == [_entry(w, n, "own") for n in range(count)]
    assert sum(1 for a, b in zip(shared, shared[1:]) if a["writer"] != b["writer"]) > 7

    async def summaries() -> tuple[list[Any], list[Any]]:
        return (
            await store.list_session_summaries(KEY["project_key"]),
            await store.list_sessions(KEY["project_key"]),
        )

    folded, listed = asyncio.run(summaries())
    mtimes = {s["session_id"]: s["mtime"] for s in listed}
    assert len(folded) == 9
    for summary in folded:
        key: SessionKey = {"project_key": KEY["project_key"], "session_id": summary["session_id"]}
        entries = store.load_sync(key)
        assert summary["data"] == fold_session_summary(None, key, entries or [])["data"]
        assert summary["mtime"] == mtimes[summary["session_id"]]
    asyncio.run(store.aclose())


def _acking_writer(dsn: str, schema: str, acks: Any) -> None:
    """Append batches of 25 forever; report each batch only after `append` returned."""

    async def main() -> None:
        async with PostgresSessionStore(dsn, schema=schema) as store:
            for batch_no in itertools.count():
                batch = [_entry(0, batch_no * 25 + i, "kill") for i in range(25)]
                await store.append(KEY, batch)
                acks.send(batch_no)  # a blocking write to the pipe: done before the next batch starts

    asyncio.run(main())


def test_sigkill_mid_stream_loses_nothing_acknowledged(server: str, schema: str) -> None:
    """B-9: kill -9 a writer mid-stream; every acknowledged batch is stored, whole, in order."""
    PostgresSessionStore(server, schema=schema).has_session("x")
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_acking_writer, args=(server, schema, sender))
    proc.start()
    sender.close()
    acked: list[int] = []
    while len(acked) < 40:
        assert receiver.poll(60), "the writer stopped acknowledging"
        acked.append(receiver.recv())
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    while True:  # acknowledgements already in the pipe when the writer died
        try:
            acked.append(receiver.recv())
        except EOFError:
            break

    loaded = PostgresSessionStore(server, schema=schema).load_sync(KEY)
    assert loaded is not None
    assert acked == list(range(len(acked)))
    stored_ns = [e["n"] for e in loaded]
    # Everything acknowledged is there; at most the one batch in flight also landed, and only whole.
    assert stored_ns in (list(range(len(acked) * 25)), list(range((len(acked) + 1) * 25)))


@pytest.mark.anyio
async def test_project_keys_lists_every_project(store: PostgresSessionStore) -> None:
    for project in ("-b-repo", "-a-repo", "-b-repo"):
        await store.append({"project_key": project, "session_id": f"s{project}"}, [user(f"u{project}", "hi")])
    assert store.project_keys() == ["-a-repo", "-b-repo"]
