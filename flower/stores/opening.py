"""A session store from what a user names: a `postgresql://` URL, a SQLite path, or a run dir's own file.

Invariants:
- The PostgreSQL driver is imported only when a PostgreSQL URL is given.
- Opening for reading (`create=False`) never creates a store: a missing SQLite file is one `StoreError`
  naming it, and the file is opened read-only (a read-only medium is fine).
- `create=True` makes the SQLite file's folder and opens it for writing (a run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import anyio
from claude_agent_sdk.types import SessionKey, SessionStore, SessionStoreEntry

from flower.errors import ConfigError, StoreError
from flower.util.rundir import checked_sqlite

__all__ = ["POSTGRES_SCHEMES", "StoreReader", "close_store", "is_postgres", "open_store"]


class StoreReader(SessionStore, Protocol):
    """A session store the readers (`flower report`, `sessions`, `preview`) can also walk without an event
    loop: the SQLite and PostgreSQL stores `open_store` hands out."""

    def load_sync(self, key: SessionKey) -> list[SessionStoreEntry] | None: ...

    def find_session(self, session_id: str) -> SessionKey | None: ...

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(url: str | None) -> bool:
    """`url` names a PostgreSQL database."""
    return bool(url) and str(url).startswith(POSTGRES_SCHEMES)


def open_store(url: str | None, run_dir: Path | None = None, *, create: bool = False) -> StoreReader:
    """The session store named by `url` (a DSN or a SQLite path), else `<run_dir>/sessions.db`."""
    if url and is_postgres(url):
        from flower.stores.postgres import PostgresSessionStore  # psycopg only when asked for

        return PostgresSessionStore(url)
    from flower.stores.sqlite import SqliteSessionStore

    if url:
        path = Path(url)
    elif run_dir is not None:
        path = checked_sqlite(Path(run_dir) / "sessions.db", run_dir)
    else:
        raise ConfigError("no session store: give --store or --run-dir")
    if not create and not path.is_file():
        raise StoreError(f"no session store at {path}")
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteSessionStore(path)
    return SqliteSessionStore(path, readonly=True)  # reading never writes: a read-only medium is fine


def close_store(store: object) -> None:
    """Close a store opened here (its async `aclose`, else `close`)."""
    closer = getattr(store, "aclose", None)
    if closer is not None:
        anyio.run(closer)
    elif callable(close := getattr(store, "close", None)):
        close()
