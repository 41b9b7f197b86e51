"""`PostgresSessionStore`: the SDK's `SessionStore` protocol on PostgreSQL, for runs spread over machines (B-9).

Any machine can resume any session: every writer and reader goes through one database. Invariants:
* Entries are stored verbatim as JSON text (not `jsonb`: that rejects `\\u0000`, which tool output can hold)
  and returned deep-equal in append order, ordered by a `bigserial`.
* One append is one transaction: upsert-and-lock the transcript row (which also ticks its mtime), insert the
  whole batch in ONE statement (`unnest`, `ON CONFLICT DO NOTHING` on `(transcript, uuid)`), fold the summary
  of the entries that were really inserted. The row lock serialises appends to one transcript, so per-writer
  order holds, seq order equals commit order, and no fold is lost. A batch that inserts nothing rolls back:
  no mtime tick, no fold. A committed append is acknowledged only after COMMIT returns.
* mtime is the server's clock in ms, made strictly increasing per transcript (`GREATEST(now, mtime + 1)`);
  a main session's summary carries the same value as its `list_sessions` mtime. Server time, not the
  writers', so machines with skewed clocks agree.
* The schema is created and migrated from `MIGRATIONS` under `pg_advisory_xact_lock`, so writers starting
  together migrate once. A schema holding other tables, or a newer flower schema, is refused untouched.
* Every failure a user can cause (bad DSN, server down, wrong database) is a one-line `StoreError` naming
  the server, never the password.

The async protocol uses a psycopg `AsyncConnectionPool`, opened lazily on first use (or by `open()`), and
re-opened if a later event loop uses the store (`asyncio.run` per step). The sync helpers (report, preview,
runtime checks) and the migration use one plain psycopg connection.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from types import TracebackType
from typing import Any

import anyio.to_thread
import psycopg
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from flower.errors import ConfigError, StoreError
from flower.stores import _common
from flower.stores._common import TranscriptKey
from flower.stores._postgres_schema import MIGRATIONS, QUERIES, migrate

__all__ = ["MIGRATIONS", "PostgresSessionStore"]

_CHUNK = 1000
"""Rows fetched per round trip when loading a transcript."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
               "tcp_user_timeout": 30_000}
"""libpq TCP settings: probe an idle connection after 10 s, give up after 3 unanswered probes 5 s apart, and
drop a connection whose sent data stays unacknowledged for 30 s."""

class PostgresSessionStore(SessionStore):
    """Session transcripts in a PostgreSQL schema; subagent transcripts live under their `subpath`."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "flower",
        max_connections: int = 4,
        connect_timeout: float = 10.0,
        statement_timeout: float = 15.0,
        lock_timeout: float = 10.0,
    ) -> None:
        """`statement_timeout` and `lock_timeout` (seconds) bound each statement on the server; an append as a
        whole (connection, statements, commit) is bounded on the client by `statement_timeout + connect_timeout`,
        which also covers a server or network that stops answering without closing the connection. TCP
        keepalives find a dead peer. Settings already in the DSN win."""
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(f"PostgreSQL schema name {schema!r} must be lower-case letters, digits and _")
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise StoreError(f"invalid PostgreSQL DSN for the session store: {_one_line(exc)}") from None
        self.dsn = dsn
        self.schema = schema
        self.where = f"{_describe(params)} (schema {schema})"
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._kwargs["connect_timeout"] = max(1, round(connect_timeout))
        if statement_timeout <= 0 or lock_timeout <= 0 or connect_timeout <= 0:
            raise ConfigError("PostgreSQL connect, statement and lock timeouts must be positive")
        # A frozen server must not block an append forever (issue #16 item 14): server-side limits per
        # statement and lock wait, keepalives for a peer that vanished (libpq conninfo parameters).
        self._kwargs.update({k: v for k, v in _KEEPALIVES.items() if k not in params})
        if "options" not in params:
            self._kwargs["options"] = (
                f"-c statement_timeout={round(statement_timeout * 1000)} -c lock_timeout={round(lock_timeout * 1000)}"
            )
        self._timeout = connect_timeout
        self._deadline = statement_timeout + connect_timeout
        self._max_connections = max_connections
        self._q = {name: sql.SQL(text).format(schema=sql.Identifier(schema)) for name, text in QUERIES.items()}
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._open_lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._sync_conn: psycopg.Connection[Any] | None = None
        self._sync_lock = threading.Lock()
        self._closing: set[asyncio.Task[None]] = set()  # pool closes scheduled by a sync close()
        self.fenced = False
        """Set by a fleet worker whose lease ran out: its steps run elsewhere now, so it appends nothing."""

    def __repr__(self) -> str:
        return f"PostgresSessionStore({self.where})"

    # -- SessionStore protocol -------------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if not entries:
            return
        tkey = TranscriptKey.of(key)
        if self.fenced:
            raise StoreError(f"session store at {self.where}: this worker is cut off from the fleet; append of "
                             f"{len(entries)} entries to {tkey} dropped (the step runs elsewhere)")
        try:
            with anyio.fail_after(self._deadline):
                await self._append(tkey, entries)
        except TimeoutError:
            # Cancelled before COMMIT returned: the transaction is rolled back by the server (or, if the
            # COMMIT itself got through, the batch is whole); a retry is safe, the insert is idempotent.
            raise StoreError(
                f"session store at {self.where} did not answer within {self._deadline:g}s: append of "
                f"{len(entries)} entries to {tkey} abandoned, none of it half-written"
            ) from None

    async def _append(self, tkey: TranscriptKey, entries: list[SessionStoreEntry]) -> None:
        encoded = _common.encode_batch(entries, store=self.where, key=tkey)
        every_uuid = [uuid for uuid, _, _ in encoded]
        keep = _common.fresh_indexes(every_uuid)  # the batch's own repeats; stored ones: ON CONFLICT
        batch, uuids = [entries[i] for i in keep], [every_uuid[i] for i in keep]
        columns = (uuids, [encoded[i][1] for i in keep], [encoded[i][2] for i in keep])
        async with self._transaction() as conn:
            tid, mtime = await _one(await conn.execute(self._q["touch"], tuple(tkey)))
            inserted = await (await conn.execute(self._q["insert"], (tid, *columns))).fetchall()
            if not inserted:
                raise psycopg.Rollback()  # a replayed batch: undo the mtime tick
            if tkey.is_main:
                stored = {uuid for (uuid,) in inserted}
                fresh = [e for e, uuid in zip(batch, uuids) if uuid is None or uuid in stored]
                await self._fold(conn, tkey, fresh, mtime)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        # A server-side cursor streams the rows in chunks: a 100k-entry session never sits in memory twice
        # (raw rows and parsed entries), and each chunk is parsed off the event loop.
        entries: list[SessionStoreEntry] = []
        async with self._transaction() as conn, conn.cursor(name="flower_load") as cursor:
            tkey = TranscriptKey.of(key)
            await cursor.execute(self._q["load"], tuple(tkey))
            while rows := await cursor.fetchmany(_CHUNK):
                if len(rows) < 100:
                    entries += _parse(rows, self.where, tkey)
                else:
                    entries += await anyio.to_thread.run_sync(_parse, rows, self.where, tkey)
        return entries or None  # a transcript row always has entries: none means never written

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        rows = await self._fetch("sessions", (project_key,))
        return [{"session_id": sid, "mtime": mtime} for sid, mtime in rows]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        rows = await self._fetch("summaries", (project_key,))
        return [
            {"session_id": sid, "mtime": mtime,
             "data": dict(_common.parse_row(data, store=self.where, key=f"{project_key}/{sid}", row="summary"))}
            for sid, mtime, data in rows
        ]

    async def delete(self, key: SessionKey) -> None:
        tkey = TranscriptKey.of(key)
        async with self._transaction() as conn:
            if tkey.is_main:  # entries go with their transcripts (ON DELETE CASCADE)
                await conn.execute(self._q["delete_main"], tkey[:2])
                await conn.execute(self._q["delete_summary"], tkey[:2])
            else:
                await conn.execute(self._q["delete_sub"], tuple(tkey))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        rows = await self._fetch("subkeys", (key["project_key"], key["session_id"]))
        return [subpath for (subpath,) in rows]

    # -- sync helpers (runtime, report, preview) -------------------------------------------------------

    def load_sync(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        entries: list[SessionStoreEntry] = []
        with self._sync() as conn, conn.transaction(), conn.cursor(name="flower_load") as cursor:
            tkey = TranscriptKey.of(key)
            cursor.execute(self._q["load"], tuple(tkey))
            while rows := cursor.fetchmany(_CHUNK):
                entries += _parse(rows, self.where, tkey)
        return entries or None

    def has_session(self, session_id: str, project_key: str | None = None) -> bool:
        """Whether a main transcript with this id exists (in `project_key`, or in any project)."""
        if project_key is None:
            return self.find_session(session_id) is not None
        with self._sync() as conn:
            return conn.execute(self._q["has"], (project_key, session_id)).fetchone() is not None

    def find_session(self, session_id: str) -> SessionKey | None:
        """The main key of a session id, whatever its project (the newest if several projects have it)."""
        with self._sync() as conn:
            row = conn.execute(self._q["find"], (session_id,)).fetchone()
        return None if row is None else {"project_key": row[0], "session_id": session_id}

    def project_keys(self) -> list[str]:
        """Every project key with a stored transcript, sorted (for listings without a manifest)."""
        with self._sync() as conn:
            return [row[0] for row in conn.execute(self._q["projects"]).fetchall()]

    def last_context(self, key: SessionKey) -> int | None:
        """Main-thread context of the last turn (`_common.last_context`), paging backwards from the end."""
        with self._sync() as conn:
            tkey = TranscriptKey.of(key)
            row = conn.execute(self._q["transcript"], tuple(tkey)).fetchone()
            return None if row is None else _common.last_context(self._assistants_backwards(conn, row[0], tkey))

    def _assistants_backwards(
        self, conn: psycopg.Connection[Any], tid: int, key: TranscriptKey
    ) -> Iterator[dict[str, Any]]:
        before = 2**63 - 1
        while True:
            rows = conn.execute(self._q["assistants_before"], (tid, before)).fetchall()
            for seq, payload in rows:
                before = seq
                yield dict(_common.parse_row(payload, store=self.where, key=key, row=seq))
            if len(rows) < 200:
                return

    # -- lifecycle -------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and migrate now rather than on first use (surfaces a `StoreError` early)."""
        await self._get_pool()

    async def aclose(self) -> None:
        pool, loop = self._pool, self._pool_loop
        self._pool = self._pool_loop = None
        if pool is not None and loop is asyncio.get_running_loop():
            await pool.close()
        self._close_sync()

    def close(self) -> None:
        """Close without awaiting: the sync connection now, the pool as far as its event loop allows.

        Prefer `await aclose()` in async code. Here a pool whose loop is running gets its close scheduled
        on that loop; a pool whose loop has finished is dropped (its connections close when collected).
        """
        pool, loop = self._pool, self._pool_loop
        self._pool = self._pool_loop = None
        if pool is not None and loop is not None and not loop.is_closed():
            if loop.is_running():

                def schedule() -> None:
                    task = loop.create_task(pool.close())
                    self._closing.add(task)  # a strong reference until done: asyncio keeps only weak ones
                    task.add_done_callback(self._closing.discard)

                loop.call_soon_threadsafe(schedule)
            else:
                loop.run_until_complete(pool.close())
        self._close_sync()

    def _close_sync(self) -> None:
        with self._sync_lock:
            if self._sync_conn is not None:
                self._sync_conn.close()
                self._sync_conn = None

    async def __aenter__(self) -> PostgresSessionStore:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- plumbing --------------------------------------------------------------------------------------

    async def _fold(
        self, conn: psycopg.AsyncConnection[Any], key: TranscriptKey, fresh: list[SessionStoreEntry], mtime: int
    ) -> None:
        row = await (await conn.execute(self._q["summary"], key[:2])).fetchone()
        prev: SessionSummaryEntry | None = (
            None if row is None else {"session_id": key.session_id, "mtime": row[0], "data": json.loads(row[1])}
        )
        folded = _common.fold_summary(prev, key, fresh, mtime)
        data = json.dumps(folded["data"], separators=(",", ":"))
        await conn.execute(self._q["put_summary"], (*key[:2], mtime, data))

    async def _fetch(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        async with self._connection() as conn:
            return await (await conn.execute(self._q[query], params)).fetchall()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise self._error(exc) from None

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._connection() as conn, conn.transaction():
            yield conn

    async def _get_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._pool_loop is loop:
            return self._pool
        if self._open_lock is None or self._open_lock[0] is not loop:
            self._open_lock = (loop, asyncio.Lock())
        async with self._open_lock[1]:
            if self._pool is None or self._pool_loop is not loop:
                # A pool from an earlier, finished event loop can be neither used nor closed here: drop it.
                await anyio.to_thread.run_sync(self._prepare)
                self._pool = await self._open_pool()
                self._pool_loop = loop
            return self._pool

    async def _open_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
            self.dsn,
            kwargs=self._kwargs,
            min_size=1,
            max_size=self._max_connections,
            open=False,
            check=AsyncConnectionPool.check_connection,
            name=f"flower-{self.schema}",
            timeout=max(self._timeout, 30.0),
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except psycopg.Error as exc:
            await pool.close()
            raise self._error(exc) from None
        return pool

    @contextmanager
    def _sync(self) -> Iterator[psycopg.Connection[Any]]:
        with self._sync_lock:
            try:
                yield self._prepare_locked()
            except psycopg.Error as exc:
                raise self._error(exc) from None

    def _prepare(self) -> None:
        with self._sync_lock:
            try:
                self._prepare_locked()
            except psycopg.Error as exc:
                raise self._error(exc) from None

    def _prepare_locked(self) -> psycopg.Connection[Any]:
        """The sync connection, connected and with the schema migrated (the caller holds `_sync_lock`)."""
        conn = self._sync_conn
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(self.dsn, **self._kwargs)
            except psycopg.OperationalError as exc:
                raise StoreError(f"cannot connect to the session store at {self.where}: {_one_line(exc)}") from None
            try:
                migrate(conn, self.schema, self.where)
            except BaseException:
                conn.close()
                raise
            self._sync_conn = conn
        return conn

    def _error(self, exc: psycopg.Error) -> StoreError:
        return StoreError(f"session store at {self.where} failed: {_one_line(exc)}")


# -- migrating ----------------------------------------------------------------------------------------


# -- small helpers ------------------------------------------------------------------------------------


def _parse(rows: list[tuple[int, str]], where: str, key: TranscriptKey) -> list[SessionStoreEntry]:
    return [_common.parse_row(payload, store=where, key=key, row=seq) for seq, payload in rows]


async def _one(cursor: psycopg.AsyncCursor[Any]) -> tuple[Any, ...]:
    row = await cursor.fetchone()
    assert row is not None  # RETURNING of an upsert always yields its row
    return tuple(row)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _describe(params: dict[str, Any]) -> str:
    """`postgresql://user@host:port/db` without the password (for messages)."""
    user = params.get("user")
    host = params.get("host") or params.get("hostaddr") or "localhost"
    port = params.get("port")
    dbname = params.get("dbname") or user or ""
    return f"postgresql://{user + '@' if user else ''}{host}{':' + str(port) if port else ''}/{dbname}"
