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
import random
import sqlite3
import threading
import time
import urllib.parse
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

__all__ = ["MIGRATIONS", "Migration", "SqliteSessionStore"]

T = TypeVar("T")

BUSY_TIMEOUT_S = 30.0
"""How long one statement waits for another process's write lock (SQLite's busy handler)."""
LOCK_RETRIES = 8
"""Extra attempts, with jittered backoff, after the busy timeout itself gives up."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial schema",
        (
            """CREATE TABLE transcripts (
                id INTEGER PRIMARY KEY,
                project_key TEXT NOT NULL,
                session_id TEXT NOT NULL,
                subpath TEXT NOT NULL DEFAULT '',
                mtime INTEGER NOT NULL,
                UNIQUE (project_key, session_id, subpath))""",
            "CREATE INDEX transcripts_by_session ON transcripts (session_id)",
            """CREATE TABLE entries (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                transcript INTEGER NOT NULL REFERENCES transcripts (id),
                uuid TEXT,
                type TEXT,
                payload TEXT NOT NULL)""",
            "CREATE INDEX entries_by_transcript ON entries (transcript, seq)",
            "CREATE UNIQUE INDEX entries_uuid ON entries (transcript, uuid) WHERE uuid IS NOT NULL",
            """CREATE TABLE summaries (
                project_key TEXT NOT NULL,
                session_id TEXT NOT NULL,
                mtime INTEGER NOT NULL,
                data TEXT NOT NULL,
                PRIMARY KEY (project_key, session_id))""",
            "CREATE TABLE clock (id INTEGER PRIMARY KEY CHECK (id = 1), last_ms INTEGER NOT NULL)",
            "INSERT INTO clock (id, last_ms) VALUES (1, 0)",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
_VERSION_TABLE = "flower_schema"


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
        self._conn: sqlite3.Connection | None = _open_readonly(self.path) if readonly else _open(self.path)

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
                raise _store_error(self.path, exc) from None

    def _write(self, run: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            return _transaction(self._connection(), self.path, run)


# -- transactions -------------------------------------------------------------------------------------


def _transaction(conn: sqlite3.Connection, path: Path, run: Callable[[sqlite3.Connection], T]) -> T:
    """Run `run` in one `BEGIN IMMEDIATE` transaction, retrying while another process holds the lock."""
    for attempt in range(LOCK_RETRIES + 1):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc) and attempt < LOCK_RETRIES:
                time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
                continue
            raise _store_error(path, exc) from None
        try:
            result = run(conn)
            conn.execute("COMMIT")
            return result
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError):
                raise _store_error(path, exc) from None
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
        return StoreError(f"session store {path} stayed locked by another process: {exc}")
    if "readonly" in str(exc) or "read-only" in str(exc):
        return StoreError(f"session store {path} is read-only ({exc}): a run must write it; the reading "
                          "commands (report, preview, sessions) open it read-only")
    if "malformed" in str(exc):
        return StoreError(f"session store {path} is corrupted ({exc}); refusing to use it: restore a backup, or "
                          f"salvage the readable rows with `sqlite3 {path} .recover`")
    return StoreError(f"session store {path} cannot be used: {exc}")


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
        "INSERT INTO entries (transcript, uuid, type, payload) VALUES (?, ?, ?, ?)",
        [(tid, *rows[i]) for i in keep],
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


def _open(path: Path) -> sqlite3.Connection:
    """Connect, refuse anything that is not a flower store (without writing to it), then migrate."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"session store {path} cannot be opened: {exc}") from None
    try:
        try:
            version = _schema_version(conn, path)
        except StoreError as exc:
            cause = exc.__context__
            if isinstance(cause, sqlite3.OperationalError) and _cannot_open(cause) and path.is_file():
                raise StoreError(
                    f"session store {path} is on a read-only filesystem or folder ({cause}): a run must write "
                    "it; report, preview and sessions read it read-only"
                ) from None
            raise
        if version > 0:
            _check_integrity(conn, path)
        if version < SCHEMA_VERSION:
            _set_wal(conn, path)
            _transaction(conn, path, partial(_migrate, path=path))
        else:
            _set_wal(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _open_readonly(path: Path) -> sqlite3.Connection:
    """Connect with `mode=ro`; on a read-only filesystem, where SQLite cannot create the WAL index file,
    fall back to `immutable=1` (nobody can write that file anyway). Never creates, migrates or writes."""
    if not path.is_file():
        raise StoreError(f"no session store at {path}")
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
    last: sqlite3.Error | None = None
    for suffix in ("", "&immutable=1"):
        try:
            conn = sqlite3.connect(uri + suffix, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            last = exc
            continue
        try:
            version = _schema_version(conn, path)
        except StoreError as exc:
            conn.close()
            if isinstance(exc.__context__, sqlite3.OperationalError) and _cannot_open(exc.__context__):
                last = exc.__context__
                continue
            raise
        except BaseException:
            conn.close()
            raise
        if version == 0:
            conn.close()
            raise StoreError(f"{path} is an empty SQLite file, not a flower session store")
        try:
            _check_integrity(conn, path)
        except BaseException:
            conn.close()
            raise
        return conn
    raise StoreError(f"session store {path} cannot be opened read-only: {last}")


def _cannot_open(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "unable to open" in text or "readonly" in text or "read-only" in text


_CHECKED: dict[tuple[str, int, int, int], None] = {}
"""Files that passed `quick_check`, by (path, inode, size, mtime): a re-open in the same process is free."""


def _check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a corrupted file (a torn page, a bad index) before it is read or appended to.

    `PRAGMA quick_check(1)` reads every page once but skips the index-content cross-check of
    `integrity_check`: about 0.3-0.6 s for a 200 MB store (see bench/store.py), once per process per file.
    """
    try:
        info = path.stat()
        wal = path.with_name(path.name + "-wal")
        wal_mtime = wal.stat().st_mtime_ns if wal.exists() else 0
    except OSError:
        info, wal_mtime = None, 0
    stamp = (str(path.resolve()), info.st_ino, info.st_size, max(info.st_mtime_ns, wal_mtime)) if info else None
    if stamp is not None and stamp in _CHECKED:
        return
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.DatabaseError as exc:
        rows = [(str(exc),)]
    verdict = str(rows[0][0]) if rows else "no answer"
    if verdict != "ok":
        raise StoreError(
            f"session store {path} is corrupted ({' '.join(verdict.split())[:160]}); refusing to use it: restore "
            f"a backup, or salvage the readable rows with `sqlite3 {path} .recover`"
        )
    if stamp is not None:
        _CHECKED[stamp] = None


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's flower schema version (0 for an empty file); StoreError for anything else."""
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables:
            return 0
        if _VERSION_TABLE not in tables:
            shown = ", ".join(sorted(tables)[:5])
            raise StoreError(f"{path} is an SQLite database but not a flower session store (tables: {shown})")
        (version,) = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {_VERSION_TABLE}").fetchone()
    except sqlite3.DatabaseError as exc:
        if "malformed" in str(exc):
            raise StoreError(
                f"session store {path} is corrupted ({exc}); refusing to use it: restore a backup, or salvage "
                f"the readable rows with `sqlite3 {path} .recover`"
            ) from None
        if _cannot_open(exc):  # kept as __context__ for the read-only fallback
            raise StoreError(f"session store {path} cannot be read: {exc}")  # __context__ kept on purpose
        raise StoreError(f"{path} is not a usable flower session store: {exc}") from None
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"session store {path} has schema version {version}, newer than this flower ({SCHEMA_VERSION})"
        )
    return cast(int, version)


def _set_wal(conn: sqlite3.Connection, path: Path) -> None:
    for attempt in range(LOCK_RETRIES + 1):
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or attempt == LOCK_RETRIES:
                raise _store_error(path, exc) from None
            time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))


def _migrate(conn: sqlite3.Connection, *, path: Path) -> None:
    # Checked again under the write lock: another process may have migrated (or the file changed) meanwhile.
    current = _schema_version(conn, path)
    if current == 0:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_VERSION_TABLE}"
            " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
        )
    for migration in MIGRATIONS[current:]:
        for statement in migration.statements:
            conn.execute(statement)
        conn.execute(
            f"INSERT INTO {_VERSION_TABLE} (version, name, applied_ms) VALUES (?, ?, ?)",
            (migration.version, migration.name, _common.now_ms()),
        )

