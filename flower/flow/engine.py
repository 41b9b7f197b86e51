"""Launching DBOS, the durable execution engine under flower's workflows (B-13).

`launch(run_dir, store=...)` configures and launches DBOS once per process and returns the `Engine` it
runs on. The system database rule: an embedded SQLite file in `run_dir` (`dbos.sqlite`) by default, and the
store's PostgreSQL URL when the run's store is PostgreSQL (one URL for sessions and workflow state, so every
machine of a fleet sees the same runs and queues).

Invariants:
- DBOS is a process-wide singleton: `launch` again with the same database returns the running engine;
  with another database it is a `ConfigError` (call `destroy()` first).
- Functions decorated with `@DBOS.workflow()` / `@DBOS.step()` register at import time; import their
  module before `launch` (flower's own are in `flower.flow.durable`, which launches through here).
- Nothing is created or changed before the checks pass: an unreachable PostgreSQL server or a SQLite file
  that belongs to another application is one `StoreError` line, and that file is left as it was.
- DBOS logs only warnings and errors unless `verbose`.
- The application version is fixed, so a run started by one flower version is recovered by the next.
- Each process has its own executor id, so launching never auto-recovers another live process's work;
  flower decides what to continue (see `flower.flow.durable`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flower.errors import ConfigError, FlowerError, StoreError
from flower.flow import fleet
from flower.util.oneline import disk_full, first_line
from flower.util.rundir import checked_sqlite

if TYPE_CHECKING:
    from dbos import DBOSClient

__all__ = ["APP_NAME", "APP_VERSION", "Engine", "client", "current", "database_url", "destroy", "launch", "redact"]

APP_NAME = "flower"
APP_VERSION = "flower-flow-1"
"""Fixed on purpose: DBOS recovers only workflows of the same application version."""
SQLITE_NAME = "dbos.sqlite"

_lock = threading.Lock()
_current: Engine | None = None


@dataclass(frozen=True)
class Engine:
    """The DBOS this process runs on."""

    url: str
    """The system database URL (sqlite:///... or postgresql://...)."""
    executor_id: str
    """This process's id among the executors sharing the database."""
    postgres: bool
    """True on PostgreSQL (a fleet: other processes may take queued steps)."""

    @property
    def where(self) -> str:
        """The database for messages, without a password."""
        return redact(self.url)


def _is_postgres(store: str | None) -> bool:
    return bool(store) and str(store).startswith(("postgresql://", "postgres://", "postgresql+"))


def database_url(run_dir: str | os.PathLike[str], store: str | None = None) -> str:
    """The system database for a run dir and store: the store's PostgreSQL URL, else SQLite in run_dir."""
    if store and _is_postgres(store):
        url = str(store)
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://"):]
        return url
    return f"sqlite:///{(Path(run_dir).resolve() / SQLITE_NAME)}"


def redact(url: str) -> str:
    """`url` with its password replaced by ***."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _wal(path: Path) -> None:
    """Write-ahead logging: a checkpoint costs one small fsync instead of several (measured about 10x fewer
    milliseconds per DBOS step, bench/workflow.py); it stays set in the file. A killed process loses nothing
    committed; WAL needs a local disk (not a network share)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("pragma journal_mode=wal")


def _check_sqlite(path: Path) -> bool:
    """A missing file is fine (DBOS creates it); an existing one must be a DBOS system database. Neither it
    nor SQLite's side files may be a symlink or anything but a regular file. True when it holds DBOS's
    tables (False: new, or empty, e.g. its WAL was lost before the first checkpoint)."""
    checked_sqlite(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _wal(path)
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            tables = {row[0] for row in db.execute("select name from sqlite_master where type='table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a DBOS system database: {exc}") from None
    if tables and "workflow_status" not in tables:
        raise StoreError(
            f"{path} belongs to another application (tables: {', '.join(sorted(tables)[:4])}), "
            "not a DBOS system database"
        )
    _wal(path)
    return bool(tables)


def _check_postgres(url: str) -> None:
    """The server answers and the DSN's database exists. DBOS would create a missing one, so a typo in the
    DSN would start a fresh, empty fleet in a new database: the database is created by its owner, never here."""
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        if "does not exist" in str(exc) and "database" in str(exc):
            name = psycopg.conninfo.conninfo_to_dict(dsn).get("dbname") or "?"
            raise StoreError(
                f"PostgreSQL database {name!r} does not exist at {redact(url)}: check the DSN for a typo, or "
                f"create it first (createdb {name}); flower does not create databases"
            ) from None
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"cannot reach PostgreSQL at {redact(url)}: {first}") from None


_BENIGN = ("Workflow already exists in queue", "was cancelled during execution",
           "Asyncio task cancelled for workflow or step")
"""DBOS's notices that say nothing a flower user must act on (a recovered run started again by id; a
cancelled run whose step was preempted; a run stopped by Ctrl-C twice, whose stop flower reports itself)."""


class _Quiet(logging.Filter):
    """Drop DBOS's benign notices, and its tracebacks of flower's own errors (a gate that returned a
    non-bool is one line, not a page), of a cancelled run and of a full disk (the CLI says it in one line)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from dbos import error as dbos_error

        cancelled = (dbos_error.DBOSAwaitedWorkflowCancelledError, dbos_error.DBOSWorkflowCancelledError)
        if record.exc_info and record.exc_info[1] is not None and (
                isinstance(record.exc_info[1], (FlowerError, *cancelled)) or disk_full(record.exc_info[1])):
            return False  # flower's own errors, a cancelled run and a full disk reach the user as one line
        message = record.getMessage()
        return not any(benign in message for benign in _BENIGN)


def _default_executor() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def launch(
    run_dir: str | os.PathLike[str],
    *,
    store: str | None = None,
    verbose: bool = False,
    executor_id: str | None = None,
    branches: bool = True,
) -> Engine:
    """Configure and launch DBOS for this run dir and store (idempotent); return the engine.

    `branches=False`: this process takes no queued parallel branch (DBOS listens to none of the runs' queues,
    only its internal one), so on a fleet every branch runs on a `flower worker`; refused on SQLite, where
    nothing else would take them."""
    global _current
    url = database_url(run_dir, store)
    with _lock:
        if _current is not None:
            if _current.url != url:
                raise ConfigError(
                    f"DBOS already runs on {_current.where} in this process; cannot also use {redact(url)}"
                )
            return _current
        if url.startswith("sqlite:///"):
            if not branches:
                raise ConfigError("leaving the parallel steps to workers needs a fleet's PostgreSQL --store "
                                  "(on SQLite no other process takes them)")
            _check_sqlite(Path(url[len("sqlite:///"):]))
        else:
            _check_postgres(url)
        from dbos import DBOS

        level = "INFO" if verbose else "WARNING"
        dbos_log = logging.getLogger("dbos")
        if not any(isinstance(f, _Quiet) for f in dbos_log.filters):
            dbos_log.addFilter(_Quiet())
        if not url.startswith("sqlite") and fleet.OUTAGE not in dbos_log.filters:
            dbos_log.addFilter(fleet.OUTAGE)  # a PostgreSQL restart: one line, not every thread's traceback
        config: Any = {
            "name": APP_NAME,
            "system_database_url": url,
            "log_level": level,
            "console_log_level": level,
            "application_version": APP_VERSION,
            "executor_id": executor_id or _default_executor(),
        }
        try:
            DBOS(config=config)
            if not branches:
                DBOS.listen_queues([])  # DBOS's own internal queues are always listened to
            DBOS.launch()
        except Exception as exc:  # noqa: BLE001 - DBOS's own errors: one line naming the database
            DBOS.destroy()
            raise StoreError(f"cannot start DBOS on {redact(url)}: {first_line(exc)}") from None
        _current = Engine(url=url, executor_id=config["executor_id"], postgres=not url.startswith("sqlite"))
        return _current


def current() -> Engine | None:
    """The launched engine of this process, if any."""
    return _current


def destroy() -> None:
    """Shut DBOS down (joins its threads); a later `launch` may use another database."""
    global _current
    from dbos import DBOS

    with _lock:
        DBOS.destroy()
        _current = None


def client(run_dir: str | os.PathLike[str], store: str | None = None) -> DBOSClient | None:
    """A `DBOSClient` for reading and managing runs without executing anything (None: no runs stored yet).
    Reading never creates a system database."""
    url = database_url(run_dir, store)
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        if not path.exists() or not _check_sqlite(path):
            return None  # an empty file (a lost WAL took DBOS's tables with it) holds no runs either
    else:
        _check_postgres(url)
    from dbos import DBOSClient

    try:
        return DBOSClient(system_database_url=url)
    except Exception as exc:  # noqa: BLE001 - one line naming the database
        raise StoreError(f"cannot read runs from {redact(url)}: {first_line(exc)}") from None
