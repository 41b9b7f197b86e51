"""PostgresSessionStore at its edges, against the real server (issue #16 items 12 and 14, B-9).

A freezable TCP proxy sits between the store and the server at 127.0.0.1:5432: frozen, it keeps every
connection open and forwards nothing (a hung server, a network partition that does not reset connections).
An append then fails with one `StoreError` within its deadline instead of blocking forever, and nothing of
it is stored; thawed, the same store works again. Schemas are `boundary_<pid>_<random>_<n>`, dropped after.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from flower.errors import ConfigError, StoredDataError, StoreError
from flower.stores.postgres import PostgresSessionStore

pytestmark = pytest.mark.postgres

DSN = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
PREFIX = f"boundary_{os.getpid()}_{secrets.token_hex(3)}"
_counter = itertools.count()
KEY = {"project_key": "-p", "session_id": "s1"}


def batch(tag: str, n: int = 5) -> list[dict[str, Any]]:
    return [{"type": "user", "uuid": f"{tag}-{i}", "message": {"role": "user", "content": f"{tag} {i}"}}
            for i in range(n)]


class FreezableProxy:
    """A TCP proxy to `upstream`; `freeze()` stops forwarding in both directions (connections stay open,
    new ones are accepted and never connected through), `thaw()` resumes."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.running = threading.Event()
        self.running.set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def freeze(self) -> None:
        self.running.clear()

    def thaw(self) -> None:
        self.running.set()

    def close(self) -> None:
        self.closed = True
        self.running.set()
        for s in [self.server, *self.sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.sockets.append(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self.running.wait()
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        self.sockets.append(upstream)
        for source, target in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        while not self.closed:
            self.running.wait()
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                target.close()
                return
            self.running.wait()  # frozen after reading: hold the bytes, as a hung peer would
            try:
                target.sendall(data)
            except OSError:
                return


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, Any]]:
    try:
        psycopg.connect(DSN, connect_timeout=5).close()
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL not reachable at {DSN!r}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {DSN!r}")
    yield conninfo_to_dict(DSN)
    with psycopg.connect(DSN, autocommit=True) as conn:
        for (name,) in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                                    (PREFIX + "%",)).fetchall():
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def schema(server: dict[str, Any]) -> Iterator[str]:
    name = f"{PREFIX}_{next(_counter)}"
    yield name
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def proxy(server: dict[str, Any]) -> Iterator[FreezableProxy]:
    p = FreezableProxy((str(server.get("host", "127.0.0.1")), int(server.get("port", 5432))))
    yield p
    p.close()


def stored(schema: str) -> list[str]:
    with psycopg.connect(DSN) as conn:
        rows = conn.execute(sql.SQL("SELECT uuid FROM {}.entries ORDER BY seq").format(sql.Identifier(schema)))
        return [uuid for (uuid,) in rows.fetchall()]


def test_an_append_to_a_frozen_server_is_one_error_in_time_and_nothing_partial(
    server: dict[str, Any], schema: str, proxy: FreezableProxy
) -> None:
    dsn = make_conninfo(DSN, host="127.0.0.1", port=proxy.port)
    store = PostgresSessionStore(dsn, schema=schema, connect_timeout=2, statement_timeout=2, lock_timeout=1)

    async def scenario() -> tuple[float, str]:
        await store.append(KEY, batch("before"))
        proxy.freeze()
        start = time.monotonic()
        with pytest.raises(StoreError) as caught:
            await store.append(KEY, batch("frozen", 400))
        took = time.monotonic() - start
        proxy.thaw()
        await store.append(KEY, batch("after"))  # the same store recovers
        await store.append(KEY, batch("frozen", 400))  # the SDK's retry of the abandoned batch: whole, once
        await store.aclose()
        return took, str(caught.value)

    took, message = anyio.run(scenario)
    assert took < 4 + 2, f"the append blocked {took:.1f}s"  # deadline = statement + connect timeout
    assert "did not answer within 4s" in message and "\n" not in message and "password" not in message
    uuids = stored(schema)
    assert uuids[:5] == [f"before-{i}" for i in range(5)]
    assert sorted(uuids[5:]) == sorted([f"after-{i}" for i in range(5)] + [f"frozen-{i}" for i in range(400)])
    assert len(uuids) == len(set(uuids)) == 410


def test_the_session_settings_reach_the_server(server: dict[str, Any], schema: str) -> None:
    store = PostgresSessionStore(DSN, schema=schema, statement_timeout=7, lock_timeout=3)

    async def settings() -> tuple[str, str]:
        async with store._connection() as conn:
            st = await (await conn.execute("SHOW statement_timeout")).fetchone()
            lt = await (await conn.execute("SHOW lock_timeout")).fetchone()
        await store.aclose()
        assert st is not None and lt is not None
        return st[0], lt[0]

    assert anyio.run(settings) == ("7s", "3s")
    with pytest.raises(ConfigError):
        PostgresSessionStore(DSN, schema=schema, statement_timeout=0)


def test_a_non_json_row_is_one_stored_data_error(server: dict[str, Any], schema: str) -> None:
    store = PostgresSessionStore(DSN, schema=schema)
    anyio.run(store.append, KEY, batch("ok", 3))
    with psycopg.connect(DSN, autocommit=True) as conn:
        (seq,) = conn.execute(sql.SQL("SELECT MAX(seq) FROM {}.entries").format(sql.Identifier(schema))).fetchone()
        conn.execute(sql.SQL("UPDATE {}.entries SET payload = '{{torn' WHERE seq = %s").format(
            sql.Identifier(schema)), (seq,))
    with pytest.raises(StoredDataError) as caught:
        anyio.run(store.load, KEY)
    assert f"row {seq} is not JSON" in str(caught.value) and schema in str(caught.value)
    with pytest.raises(StoredDataError):
        store.load_sync(KEY)
    with pytest.raises(StoreError, match="entry 0 is a int"):
        anyio.run(store.append, KEY, [7])
    anyio.run(store.aclose)


def test_the_sdks_batch_retry_lands_a_batch_whose_first_append_timed_out(
    server: dict[str, Any], schema: str, proxy: FreezableProxy
) -> None:
    """The SDK's own mirror batcher retries an adapter error (not its own 60 s timeout): our deadline turns a
    frozen server into such an error, and once the server answers again the retry stores the batch once."""
    from claude_agent_sdk._internal.transcript_mirror_batcher import TranscriptMirrorBatcher

    dsn = make_conninfo(DSN, host="127.0.0.1", port=proxy.port)
    store = PostgresSessionStore(dsn, schema=schema, connect_timeout=1, statement_timeout=2, lock_timeout=1)
    errors: list[str] = []

    async def on_error(key: Any, message: str) -> None:
        errors.append(message)

    async def scenario() -> float:
        await store.append(KEY, batch("warm"))
        batcher = TranscriptMirrorBatcher(store=store, projects_dir="/projects", on_error=on_error)
        batcher.enqueue("/projects/-p/s1.jsonl", batch("mirrored", 50))
        proxy.freeze()
        threading.Timer(3.5, proxy.thaw).start()  # thawed during the batcher's second attempt
        start = time.monotonic()
        await batcher.flush()
        took = time.monotonic() - start
        await store.aclose()
        return took

    took = anyio.run(scenario)
    assert errors == [] and 3 < took < 15
    assert stored(schema) == [f"warm-{i}" for i in range(5)] + [f"mirrored-{i}" for i in range(50)]
