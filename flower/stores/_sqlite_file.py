"""The SQLite file under `SqliteSessionStore`: its schema and migrations, opening it (read-write or read-only),
refusing a file that is not a flower store or is corrupted, and one write transaction with bounded retries.

Corrupted means: SQLite's `quick_check` fails (a torn page, a bad b-tree), or an entry's payload no longer
matches the CRC-32 stored with it (bytes rotted inside a record, which no SQLite check sees)."""

from __future__ import annotations

import random
import sqlite3
import time
import urllib.parse
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

from flower.errors import StoreError
from flower.stores import _common
from flower.stores._common import Migration

__all__ = [
    "BUSY_TIMEOUT_S", "LOCK_RETRIES", "MIGRATIONS", "SCHEMA_VERSION", "crc", "open_readonly", "open_store_file",
    "store_error", "transaction",
]

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
    # SQLite checks its pages' structure, never their content: bytes rotted inside a stored entry pass
    # `quick_check`. A CRC-32 of each payload written since lets the open check find them (rows of a
    # version-1 file have none and are checked by structure only).
    Migration(2, "entry checksums", ("ALTER TABLE entries ADD COLUMN crc INTEGER",)),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
_VERSION_TABLE = "flower_schema"



def transaction(conn: sqlite3.Connection, path: Path, run: Callable[[sqlite3.Connection], T]) -> T:
    """Run `run` in one `BEGIN IMMEDIATE` transaction, retrying while another process holds the lock."""
    for attempt in range(LOCK_RETRIES + 1):
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if is_busy(exc) and attempt < LOCK_RETRIES:
                time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
                continue
            raise store_error(path, exc) from None
        try:
            result = run(conn)
            conn.execute("COMMIT")
            return result
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError):
                raise store_error(path, exc) from None
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
        return StoreError(f"session store {path} stayed locked by another process: {exc}")
    if "readonly" in str(exc) or "read-only" in str(exc):
        return StoreError(f"session store {path} is read-only ({exc}): a run must write it; the reading "
                          "commands (report, preview, sessions) open it read-only")
    if "malformed" in str(exc):
        return StoreError(f"session store {path} is corrupted ({exc}); refusing to use it: restore a backup, or "
                          f"salvage the readable rows with `sqlite3 {path} .recover`")
    return StoreError(f"session store {path} cannot be used: {exc}")


def open_store_file(path: Path) -> sqlite3.Connection:
    """Connect, refuse anything that is not a flower store (without writing to it), then migrate."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"session store {path} cannot be opened: {exc}") from None
    try:
        try:
            version = schema_version(conn, path)
        except StoreError as exc:
            cause = exc.__context__
            if isinstance(cause, sqlite3.OperationalError) and cannot_open(cause) and path.is_file():
                raise StoreError(
                    f"session store {path} is on a read-only filesystem or folder ({cause}): a run must write "
                    "it; report, preview and sessions read it read-only"
                ) from None
            raise
        if version > 0:
            check_integrity(conn, path)
        if version < SCHEMA_VERSION:
            set_wal(conn, path)
            transaction(conn, path, partial(migrate, path=path))
        else:
            set_wal(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def open_readonly(path: Path) -> sqlite3.Connection:
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
            version = schema_version(conn, path)
        except StoreError as exc:
            conn.close()
            if isinstance(exc.__context__, sqlite3.OperationalError) and cannot_open(exc.__context__):
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
            check_integrity(conn, path)
        except BaseException:
            conn.close()
            raise
        return conn
    raise StoreError(f"session store {path} cannot be opened read-only: {last}")


def cannot_open(exc: sqlite3.Error) -> bool:
    text = str(exc)
    return "unable to open" in text or "readonly" in text or "read-only" in text


_CHECKED: dict[tuple[str, int, int, int], None] = {}
"""Files that passed `quick_check`, by (path, inode, size, mtime): a re-open in the same process is free."""


def check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a corrupted file (a torn page, a bad index) before it is read or appended to.

    `PRAGMA quick_check(1)` reads every page once but skips the index-content cross-check of
    `integrity_check`: about 0.3-0.6 s for a 200 MB store (see bench/store.py), once per process per file.
    Then each entry's payload is compared with its CRC-32 (one more pass over the payloads).
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
    if verdict == "ok":
        verdict = _bad_checksum(conn) or verdict
    if verdict != "ok":
        raise StoreError(
            f"session store {path} is corrupted ({' '.join(verdict.split())[:160]}); refusing to use it: restore "
            f"a backup, or salvage the readable rows with `sqlite3 {path} .recover`"
        )
    if stamp is not None:
        _CHECKED[stamp] = None


def crc(payload: str | bytes) -> int:
    """The checksum stored with an entry: CRC-32 of its UTF-8 bytes (as SQLite stores the text)."""
    return zlib.crc32(payload.encode("utf-8") if isinstance(payload, str) else payload)


def _bad_checksum(conn: sqlite3.Connection) -> str | None:
    """The first entry whose payload no longer matches its checksum, as a verdict; None when all match."""
    try:
        if "crc" not in {row[1] for row in conn.execute("PRAGMA table_info(entries)")}:
            return None  # a version-1 file, opened read-only (a writer migrates it first)
        conn.create_function("flower_crc", 1, lambda data: crc(bytes(data)), deterministic=True)
        row = conn.execute("SELECT seq FROM entries WHERE crc IS NOT NULL AND "
                           "crc != flower_crc(CAST(payload AS BLOB)) ORDER BY seq LIMIT 1").fetchone()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None if row is None else f"entry row {row[0]} does not match its checksum"


def schema_version(conn: sqlite3.Connection, path: Path) -> int:
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
        if cannot_open(exc):  # kept as __context__ for the read-only fallback
            raise StoreError(f"session store {path} cannot be read: {exc}")  # __context__ kept on purpose
        raise StoreError(f"{path} is not a usable flower session store: {exc}") from None
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"session store {path} has schema version {version}, newer than this flower ({SCHEMA_VERSION})"
        )
    return cast(int, version)


def set_wal(conn: sqlite3.Connection, path: Path) -> None:
    for attempt in range(LOCK_RETRIES + 1):
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or attempt == LOCK_RETRIES:
                raise store_error(path, exc) from None
            time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))


def migrate(conn: sqlite3.Connection, *, path: Path) -> None:
    # Checked again under the write lock: another process may have migrated (or the file changed) meanwhile.
    current = schema_version(conn, path)
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
