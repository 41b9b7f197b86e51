"""`SqliteSessionStore`: the SDK's `SessionStore` protocol on one SQLite file (S-18).

Invariants:
* Entries are stored verbatim (compact JSON text) and returned deep-equal, in append order: `entries.seq` is
  an AUTOINCREMENT rowid, so it only grows, even across deletes. Rewriting happens elsewhere, on the way
  out (P-3, B-6).
* `append` is idempotent on an entry's uuid within one transcript, against stored rows and within the batch
  (the SDK retries failed batches). A batch that adds nothing changes nothing: no mtime tick, no fold.
* Every write is one `BEGIN IMMEDIATE` transaction, so several processes can write one file: SQLite serialises
  them, the busy timeout waits for the lock and a bounded retry covers the rest. The file is in WAL mode with
  `synchronous=NORMAL`: a committed append survives a crash of the writer process (the CLI keeps its own
  durable JSONL; the store is a mirror).
* `mtime` comes from one strictly increasing millisecond clock kept in the file, shared by `list_sessions`
  and the summaries, and by every process writing the file.
* A file that is not a flower store (garbage, another application's SQLite, a newer flower schema) is refused
  with a `StoreError` naming it, before anything is written to it.

Blocking SQLite calls run in a worker thread (`anyio.to_thread`) so a 100k-entry load never stalls the event
loop; one connection per store, guarded by a lock, serves both the async protocol and the sync helpers.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, cast

import anyio.to_thread
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from flower.errors import StoreError
from flower.stores import _common
from flower.stores._common import Migration, TranscriptKey
from flower.stores._sqlite_file import (
    MIGRATIONS,
    crc,
    open_readonly,
    open_store_file,
    store_error,
    transaction,
)

__all__ = ["MIGRATIONS", "Migration", "SqliteSessionStore"]

T = TypeVar("T")


class SqliteSessionStore(SessionStore):
    """Session transcripts in one SQLite file; subagent transcripts live under their `subpath`."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        """Open (creating and migrating unless `readonly`) the store at `path`.

        `readonly=True` (the reading commands) opens the file with `mode=ro` and never writes: a store on a
        read-only filesystem or file stays readable. Either way a file that fails SQLite's
        `PRAGMA quick_check` is refused before anything reads or writes it.
        """
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = open_readonly(self.path) if readonly else open_store_file(self.path)

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"

    # -- SessionStore protocol -------------------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if entries:
            await anyio.to_thread.run_sync(self.append_sync, key, list(entries))

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        return await anyio.to_thread.run_sync(self.load_sync, key)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        rows = await self._in_thread(
            "SELECT session_id, mtime FROM transcripts WHERE project_key = ? AND subpath = ''", (project_key,)
        )
        return [{"session_id": sid, "mtime": mtime} for sid, mtime in rows]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        rows = await self._in_thread(
            "SELECT session_id, mtime, data FROM summaries WHERE project_key = ?", (project_key,)
        )
        return [
            {"session_id": sid, "mtime": mtime,
             "data": dict(_common.parse_row(data, store=str(self.path), key=f"{project_key}/{sid}", row="summary"))}
            for sid, mtime, data in rows
        ]

    async def delete(self, key: SessionKey) -> None:
        await anyio.to_thread.run_sync(self._write, partial(_delete, key=TranscriptKey.of(key)))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        rows = await self._in_thread(
            "SELECT subpath FROM transcripts WHERE project_key = ? AND session_id = ? AND subpath != ''"
            " ORDER BY id",
            (key["project_key"], key["session_id"]),
        )
        return [subpath for (subpath,) in rows]

    # -- sync helpers (runtime, report, preview) -------------------------------------------------------

    def append_sync(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """`append` without an event loop (tools, tests, benchmarks)."""
        if not entries:
            return
        tkey = TranscriptKey.of(key)
        # Encode before taking the write lock: other writers wait only for the inserts.
        rows = _common.encode_batch(entries, store=str(self.path), key=tkey)
        self._write(partial(_append, key=tkey, entries=entries, rows=rows))

    def load_sync(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        tkey = TranscriptKey.of(key)

        def run(conn: sqlite3.Connection) -> list[SessionStoreEntry] | None:
            tid = _transcript_id(conn, tkey)
            if tid is None:
                return None
            rows = conn.execute("SELECT seq, payload FROM entries WHERE transcript = ? ORDER BY seq", (tid,))
            return [_common.parse_row(payload, store=str(self.path), key=tkey, row=seq) for seq, payload in rows]

        return self._read(run)

    def has_session(self, session_id: str, project_key: str | None = None) -> bool:
        """Whether a main transcript with this id exists (in `project_key`, or in any project)."""
        if project_key is None:
            return self.find_session(session_id) is not None
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT 1 FROM transcripts WHERE project_key = ? AND session_id = ? AND subpath = ''",
                (project_key, session_id),
            ).fetchall()
        )
        return bool(rows)

    def find_session(self, session_id: str) -> SessionKey | None:
        """The main key of a session id, whatever its project (the newest if several projects have it)."""
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT project_key FROM transcripts WHERE session_id = ? AND subpath = ''"
                " ORDER BY mtime DESC LIMIT 1",
                (session_id,),
            ).fetchall()
        )
        return {"project_key": rows[0][0], "session_id": session_id} if rows else None

    def project_keys(self) -> list[str]:
        """Every project key with a stored transcript, sorted (for listings without a manifest)."""
        rows = self._read(lambda conn: conn.execute(
            "SELECT DISTINCT project_key FROM transcripts ORDER BY project_key").fetchall())
        return [row[0] for row in rows]

    def last_context(self, key: SessionKey) -> int | None:
        """Main-thread context of the last turn (`_common.last_context`), reading backwards from the end."""
        tkey = TranscriptKey.of(key)

        def run(conn: sqlite3.Connection) -> int | None:
            tid = _transcript_id(conn, tkey)
            if tid is None:
                return None
            cursor = conn.execute(
                "SELECT seq, payload FROM entries WHERE transcript = ? AND type = 'assistant' ORDER BY seq DESC",
                (tid,),
            )
            store = str(self.path)
            return _common.last_context(
                _common.parse_row(payload, store=store, key=tkey, row=seq) for seq, payload in cursor
            )

        return self._read(run)

    # -- lifecycle -------------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def aclose(self) -> None:
        """Same as `close()`; lets callers close any flower store with `await store.aclose()`."""
        self.close()

    def __enter__(self) -> SqliteSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> SqliteSessionStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- plumbing --------------------------------------------------------------------------------------

    async def _in_thread(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        return await anyio.to_thread.run_sync(self._read, lambda conn: conn.execute(query, params).fetchall())

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"session store {self.path} is closed")
        return self._conn

    def _read(self, run: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return run(self._connection())
            except sqlite3.DatabaseError as exc:
                raise store_error(self.path, exc) from None

    def _write(self, run: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return transaction(self._connection(), self.path, run)


# -- transactions -------------------------------------------------------------------------------------


def _transcript_id(conn: sqlite3.Connection, key: TranscriptKey) -> int | None:
    row = conn.execute(
        "SELECT id FROM transcripts WHERE project_key = ? AND session_id = ? AND subpath = ?", key
    ).fetchone()
    return None if row is None else cast(int, row[0])


def _stored_uuids(conn: sqlite3.Connection, tid: int, uuids: list[str]) -> set[str]:
    stored: set[str] = set()
    for start in range(0, len(uuids), 500):  # stay under old SQLite's 999-parameter limit
        chunk = uuids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT uuid FROM entries WHERE transcript = ? AND uuid IN ({marks})", (tid, *chunk))
        stored.update(uuid for (uuid,) in rows)
    return stored


def _tick(conn: sqlite3.Connection) -> int:
    """The next value of the file's shared millisecond clock (inside the write transaction)."""
    (last,) = conn.execute("SELECT last_ms FROM clock WHERE id = 1").fetchone()
    mtime = _common.next_mtime(last)
    conn.execute("UPDATE clock SET last_ms = ? WHERE id = 1", (mtime,))
    return mtime


def _append(
    conn: sqlite3.Connection,
    *,
    key: TranscriptKey,
    entries: list[SessionStoreEntry],
    rows: list[tuple[str | None, str | None, str]],
) -> None:
    tid = _transcript_id(conn, key)
    uuids = [uuid for uuid, _, _ in rows]
    stored = set() if tid is None else _stored_uuids(conn, tid, [u for u in uuids if u is not None])
    keep = _common.fresh_indexes(uuids, stored)
    if not keep:
        return
    mtime = _tick(conn)
    if tid is None:
        tid = conn.execute(
            "INSERT INTO transcripts (project_key, session_id, subpath, mtime) VALUES (?, ?, ?, ?)", (*key, mtime)
        ).lastrowid
    else:
        conn.execute("UPDATE transcripts SET mtime = ? WHERE id = ?", (mtime, tid))
    conn.executemany(
        "INSERT INTO entries (transcript, uuid, type, payload, crc) VALUES (?, ?, ?, ?, ?)",
        [(tid, *rows[i], crc(rows[i][2])) for i in keep],
    )
    if key.is_main:
        _fold(conn, key, [entries[i] for i in keep], mtime)


def _fold(conn: sqlite3.Connection, key: TranscriptKey, fresh: list[SessionStoreEntry], mtime: int) -> None:
    row = conn.execute(
        "SELECT mtime, data FROM summaries WHERE project_key = ? AND session_id = ?", key[:2]
    ).fetchone()
    prev: SessionSummaryEntry | None = (
        None if row is None else {"session_id": key.session_id, "mtime": row[0], "data": json.loads(row[1])}
    )
    folded = _common.fold_summary(prev, key, fresh, mtime)
    conn.execute(
        "INSERT INTO summaries (project_key, session_id, mtime, data) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (project_key, session_id) DO UPDATE SET mtime = excluded.mtime, data = excluded.data",
        (*key[:2], mtime, json.dumps(folded["data"], separators=(",", ":"))),
    )


def _delete(conn: sqlite3.Connection, *, key: TranscriptKey) -> None:
    """Delete one transcript; a main key takes its subagent transcripts and its summary with it."""
    where, params = (
        ("project_key = ? AND session_id = ?", key[:2])
        if key.is_main
        else ("project_key = ? AND session_id = ? AND subpath = ?", tuple(key))
    )
    conn.execute(f"DELETE FROM entries WHERE transcript IN (SELECT id FROM transcripts WHERE {where})", params)
    conn.execute(f"DELETE FROM transcripts WHERE {where}", params)
    if key.is_main:
        conn.execute("DELETE FROM summaries WHERE project_key = ? AND session_id = ?", key[:2])


# -- opening and migrating ----------------------------------------------------------------------------


