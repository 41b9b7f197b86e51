"""Where the web app reads runs from: a run dir, or a fleet's PostgreSQL store (issue #29).

A `Source` names the run dir (manifest, `sessions.db`, `dbos.sqlite`, `human.db`) and the optional store
DSN, exactly as `flower runs`, `flower logs` and `flower asks` take them; everything is opened per read and
closed again, so a run that starts after the server did is seen, and no handle outlives a request.

Invariants: reading never creates a store, a system database or a mailbox (a run dir without `human.db`
has no questions); every read here is blocking and is called from a worker thread, never the event loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flower.errors import ConfigError

if TYPE_CHECKING:
    from flower.human.mailbox import Letter, Mailbox
    from flower.stores.opening import StoreReader

__all__ = ["Source"]


@dataclass(frozen=True)
class Source:
    """A run dir, and the store that holds its sessions, runs and letters when it is not the run dir."""

    run_dir: Path
    """The run dir (manifest, SQLite files); with a PostgreSQL store it may hold only the manifest."""
    store: str | None = None
    """A `postgresql://` DSN or a SQLite session store file, as `--store` takes it."""
    schema: str = "flower"
    """The PostgreSQL schema of the store's mailbox."""

    @classmethod
    def checked(cls, run_dir: str | Path, store: str | None, *, schema: str = "flower") -> Source:
        """One line when there is nothing to read: a run dir that is not a directory and no store."""
        folder = Path(run_dir).resolve()
        if not store and not folder.is_dir():
            raise ConfigError(f"run dir {run_dir} is not a directory (give a run dir, or --store DSN)")
        return cls(folder, store, schema)

    @property
    def label(self) -> str:
        if self.store and self._postgres:
            from urllib.parse import urlsplit

            parts = urlsplit(self.store)  # host and database only: a DSN may carry a password
            return f"PostgreSQL {parts.hostname or 'localhost'}{parts.path or ''}"
        return str(self.run_dir)

    @property
    def _postgres(self) -> bool:
        from flower.human.mailbox import is_postgres_dsn

        return bool(self.store) and is_postgres_dsn(str(self.store))

    @contextlib.contextmanager
    def session_store(self) -> Iterator[StoreReader]:
        from flower.stores.opening import close_store, open_store

        base = open_store(self.store, self.run_dir)
        try:
            yield base
        finally:
            close_store(base)

    @contextlib.contextmanager
    def mailbox(self, *, create: bool = False) -> Iterator[Mailbox | None]:
        """The mailbox `flower asks / answer / say` use for this source; None when a run dir has none yet
        (reading creates nothing; `create` is for posting)."""
        from flower.human.mailbox import MAILBOX_FILE, open_mailbox

        if not self._postgres and not create and not (self.run_dir / MAILBOX_FILE).exists():
            yield None
            return
        box = open_mailbox(self.run_dir, self.store if self._postgres else None, schema=self.schema)
        try:
            yield box
        finally:
            box.close()

    def letters(self) -> list[Letter]:
        with self.mailbox() as box:
            return box.read(None) if box is not None else []

    def stream_sessions(self, run_id: str) -> list[dict[str, Any]]:
        """The sessions the run's attempts recorded the instant they began (`flower.flow.durable`'s stream),
        of the run and of its parallel branches: what is in flight before the manifest has a row. Each record
        names its workflow and the machine that runs it (the DBOS executor: a fleet worker's `--id`)."""
        from dbos import error as dbos_error

        from flower.flow import engine
        from flower.flow.durable import SESSIONS

        client = engine.client(self.run_dir, self.store)
        if client is None:
            return []
        found: list[dict[str, Any]] = []
        try:
            statuses = [*client.list_workflows(workflow_ids=[run_id], load_input=False, load_output=False),
                        *client.list_workflows(workflow_id_prefix=f"{run_id}/", load_input=False,
                                               load_output=False)]
            for status in statuses:
                with contextlib.suppress(dbos_error.DBOSStreamTimeoutError):
                    for value in client.read_stream(status.workflow_id, SESSIONS, timeout_seconds=0.05,
                                                    polling_interval_sec=0.01):
                        if isinstance(value, dict) and value.get("session_id"):
                            found.append({**value, "workflow_id": status.workflow_id,
                                          "machine": status.executor_id, "workflow_status": status.status})
        finally:
            client.destroy()
        return found
