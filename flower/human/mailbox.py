"""The mailbox: how questions, answers and mail cross between a run and another process or machine (L-8).

A run's channel and the `flower asks / answer / say` commands share one append-only table of *letters* in
the run's durable home: `human.db` in its run dir (SQLite; the session store's own file refuses foreign
tables) or the run's PostgreSQL database. A letter is never changed or deleted (P-3); the state of a question is derived from the letters
(a `question` without a `settled` letter is pending). A `human.db` that holds tables of another program is
refused, never written to.

Why not DBOS messaging: `DBOS.recv` may only be called from a DBOS workflow, and a channel serves any run,
including a plain `Runtime.run` that no workflow wraps; the letters need nothing but the store's database.

Kinds, and who writes them:
- the run: `open` (a process of the run attached its channel: the newest `open` names the run that is current
  in a run dir), `question` (ref = question id, body = question, meta = {"options": [...]}, and for a tool call
  that needs approval "approval": {tool, rule, agent, key, call, tool_use_id}), `settled`
  (ref = question id, body = answer or reason, meta = {"state": ...}), `received` (ref = a mail letter's id);
- anyone else: `answer` (ref = question id, body = the answer), `decline` (ref = question id, body = reason),
  `mail` (body = the message); `answer` and `decline` carry meta = {"by": who sent it}.

Answering is compare-and-set (`Mailbox.claim`): an `answer` or `decline` is appended only while no `answer`,
`decline` or `settled` letter of that question exists, checked and written in one transaction, so of
concurrent answerers exactly one is told "answered" and the model gets that answer.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from flower.errors import ConfigError, StoreError
from flower.util.oneline import first_line
from flower.util.rundir import checked_sqlite

__all__ = [
    "Letter",
    "LetterKind",
    "MAILBOX_FILE",
    "Mailbox",
    "PendingQuestion",
    "PostgresMailbox",
    "SqliteMailbox",
    "is_postgres_dsn",
    "open_mailbox",
    "pending_questions",
]

T = TypeVar("T")
LetterKind = Literal["open", "question", "settled", "received", "answer", "decline", "mail", "handoff", "interrupt"]
KINDS = ("open", "question", "settled", "received", "answer", "decline", "mail", "handoff", "interrupt")
STEERING = ("handoff", "interrupt")
"""Letters that steer a run (`flower handoff`, `flower web`): its bound channel takes each once, at the next
main-thread tool boundary."""
RUN_KINDS = ("open", "question", "settled", "received")
"""The letters only a run writes: the newest of them names the run that is current."""
SETTLING = ("answer", "decline", "settled")
"""The letters after which a question takes no other answer."""
MAILBOX_FILE = "human.db"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class Letter:
    """One row of the mailbox."""

    id: int
    """Increasing in the order letters were posted."""
    run: str
    """The run the letter belongs to."""
    kind: LetterKind
    """What the letter says (see the module docstring)."""
    ref: str
    """The question id or mail letter id it refers to; empty for mail."""
    body: str
    """Question, answer, reason or message text."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Options of a question, state of a settlement."""
    at: float = 0.0
    """Seconds since the epoch."""


@dataclass(frozen=True)
class PendingQuestion:
    """A question still waiting for an answer."""

    run: str
    id: str
    question: str
    options: tuple[str, ...]
    asked_at: float
    approval: dict[str, Any] | None = None
    """For an approval (L-15): the tool, rule, agent and call it asks about; None for a question."""


class Mailbox(Protocol):
    """Where letters are posted and read; implementations must be safe to call from any thread."""

    def post(self, run: str, kind: LetterKind, body: str, *, ref: str = "", meta: dict[str, Any] | None = None) -> int:
        """Append a letter; returns its id."""
        ...

    def read(self, run: str | None = None, *, after: int = 0) -> list[Letter]:
        """Letters with id > `after`, oldest first: of one run and those sent to every run (run "*"), or of
        every run when `run` is None."""
        ...

    def claim(self, run: str, ref: str, kind: LetterKind, body: str, *, by: str) -> Letter | None:
        """Post an `answer` or `decline` of question `ref` unless one of `SETTLING` got there first, in one
        transaction: None when posted, else the earliest settling letter (who won)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"unknown letter kind {kind!r}; expected one of {', '.join(KINDS)}")


_OWN_TABLES = frozenset({"human_letters", "sqlite_sequence"})
"""The tables a mailbox file holds (sqlite_sequence is SQLite's, for AUTOINCREMENT)."""
_FIRST_SETTLING = ("SELECT id, run, kind, ref, body, meta, at FROM {table} WHERE run = {mark} AND ref = {mark} "
                   "AND kind IN ({mark}, {mark}, {mark}) ORDER BY id LIMIT 1")


def _check_claim(kind: str) -> None:
    if kind not in ("answer", "decline"):
        raise ConfigError(f"only an answer or a decline is claimed, not {kind!r}")


def _letter(row: tuple[Any, ...]) -> Letter:
    id_, run, kind, ref, body, meta, at = row
    return Letter(int(id_), run, kind, ref, body, json.loads(meta or "{}"), float(at))


class SqliteMailbox:
    """Letters in a SQLite file (by default `<run_dir>/human.db`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
            self._refuse_foreign()
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS human_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, "
                "kind TEXT NOT NULL, ref TEXT NOT NULL, body TEXT NOT NULL, meta TEXT NOT NULL, at REAL NOT NULL)"
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the mailbox in {self.path}: {exc}") from None

    def __repr__(self) -> str:
        return f"SqliteMailbox({str(self.path)!r})"

    def _refuse_foreign(self) -> None:
        """An SQLite file with tables of its own (another program's `human.db`) is not written to at all."""
        try:
            tables = {name for (name,) in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error:
            self._conn.close()
            raise
        if tables - _OWN_TABLES:
            self._conn.close()
            shown = ", ".join(sorted(tables - _OWN_TABLES)[:5])
            raise StoreError(f"{self.path} is an SQLite database of something else (tables: {shown}), not a flower "
                             "mailbox: refusing to add to it (move it away, or use another run dir)")

    def post(self, run: str, kind: LetterKind, body: str, *, ref: str = "", meta: dict[str, Any] | None = None) -> int:
        _check_kind(kind)
        row = (run, kind, ref, body, json.dumps(meta or {}, ensure_ascii=False), time.time())
        with self._lock:
            try:
                cursor = self._conn.execute(
                    "INSERT INTO human_letters (run, kind, ref, body, meta, at) VALUES (?, ?, ?, ?, ?, ?)", row
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write to the mailbox in {self.path}: {exc}") from None
        return int(cursor.lastrowid or 0)

    def claim(self, run: str, ref: str, kind: LetterKind, body: str, *, by: str) -> Letter | None:
        _check_claim(kind)
        row = (run, kind, ref, body, json.dumps({"by": by}, ensure_ascii=False), time.time())
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")  # the write lock first: the check and the insert are one
                try:
                    first = self._conn.execute(_FIRST_SETTLING.format(table="human_letters", mark="?"),
                                               (run, ref, *SETTLING)).fetchone()
                    if first is None:
                        self._conn.execute(
                            "INSERT INTO human_letters (run, kind, ref, body, meta, at) VALUES (?, ?, ?, ?, ?, ?)", row)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write to the mailbox in {self.path}: {exc}") from None
        return None if first is None else _letter(first)

    def read(self, run: str | None = None, *, after: int = 0) -> list[Letter]:
        query = "SELECT id, run, kind, ref, body, meta, at FROM human_letters WHERE id > ?"
        args: tuple[Any, ...] = (after,)
        if run is not None:
            query, args = query + " AND run IN (?, '*')", (after, run)
        with self._lock:
            try:
                rows = self._conn.execute(query + " ORDER BY id", args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the mailbox in {self.path}: {exc}") from None
        return [_letter(r) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresMailbox:
    """Letters in PostgreSQL (`<schema>.human_letters`), for a run steered from another machine."""

    def __init__(self, dsn: str, *, schema: str = "flower", connect_timeout: float = 10.0) -> None:
        import psycopg

        if not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigError(f"PostgreSQL schema name {schema!r} must be lower-case letters, digits and _")
        self.dsn, self.schema = dsn, schema
        self._lock = threading.Lock()
        self._timeout = max(1, round(connect_timeout))
        try:
            self._conn = psycopg.connect(dsn, autocommit=True, connect_timeout=self._timeout)
            self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            self._conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{schema}".human_letters (id BIGSERIAL PRIMARY KEY, run TEXT NOT NULL, '
                "kind TEXT NOT NULL, ref TEXT NOT NULL, body TEXT NOT NULL, meta TEXT NOT NULL, "
                "at DOUBLE PRECISION NOT NULL)"
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the mailbox in PostgreSQL: {first_line(exc)}") from None

    def __repr__(self) -> str:
        return f"PostgresMailbox(schema={self.schema!r})"

    def _execute(self, query: str, args: tuple[Any, ...], what: str) -> list[tuple[Any, ...]]:
        """Run one statement (see `_with`)."""
        return self._with(lambda conn: [tuple(row) for row in conn.execute(query, args).fetchall()], what)

    def _with(self, work: Callable[[Any], T], what: str) -> T:
        """Run `work(connection)`; a connection that dropped (a server restart during a long run) is opened
        again once."""
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn.closed:
                        self._conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=self._timeout)
                    return work(self._conn)
                except psycopg.OperationalError as exc:
                    if attempt == 2 or not self._conn.closed:
                        raise StoreError(f"cannot {what} the mailbox: {first_line(exc)}") from None
                except psycopg.Error as exc:
                    raise StoreError(f"cannot {what} the mailbox: {first_line(exc)}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def claim(self, run: str, ref: str, kind: LetterKind, body: str, *, by: str) -> Letter | None:
        _check_claim(kind)
        table = f'"{self.schema}".human_letters'
        row = (run, kind, ref, body, json.dumps({"by": by}, ensure_ascii=False), time.time())

        def work(conn: Any) -> Letter | None:
            with conn.transaction():  # one lock per question, held to the commit: check and insert are one
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.schema}/{run}/{ref}",))
                first = conn.execute(_FIRST_SETTLING.format(table=table, mark="%s"), (run, ref, *SETTLING)).fetchone()
                if first is None:
                    conn.execute(f"INSERT INTO {table} (run, kind, ref, body, meta, at) "
                                 "VALUES (%s, %s, %s, %s, %s, %s)", row)
            return None if first is None else _letter(tuple(first))

        return self._with(work, "write to")

    def post(self, run: str, kind: LetterKind, body: str, *, ref: str = "", meta: dict[str, Any] | None = None) -> int:
        _check_kind(kind)
        row = (run, kind, ref, body, json.dumps(meta or {}, ensure_ascii=False), time.time())
        found = self._execute(f'INSERT INTO "{self.schema}".human_letters (run, kind, ref, body, meta, at) '
                              "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id", row, "write to")
        return int(found[0][0]) if found else 0

    def read(self, run: str | None = None, *, after: int = 0) -> list[Letter]:
        query = f'SELECT id, run, kind, ref, body, meta, at FROM "{self.schema}".human_letters WHERE id > %s'
        args: tuple[Any, ...] = (after,)
        if run is not None:
            query, args = query + " AND run IN (%s, '*')", (after, run)
        return [_letter(row) for row in self._execute(query + " ORDER BY id", args, "read")]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_mailbox(run_dir: str | Path, store: str | None = None, *, schema: str = "flower") -> Mailbox:
    """The mailbox of a run: in its PostgreSQL database when `store` is a postgres DSN, else in `human.db`
    beside the SQLite session store (`store`, a file) or in `run_dir`."""
    if store and is_postgres_dsn(store):
        return PostgresMailbox(store, schema=schema)
    folder = Path(store).parent if store else Path(run_dir)
    return SqliteMailbox(checked_sqlite(folder / MAILBOX_FILE, folder))


def is_postgres_dsn(store: str) -> bool:
    """A PostgreSQL connection string (URL or key=value form), not a file path."""
    return store.startswith(("postgresql://", "postgres://")) or bool(re.match(r"\s*\w+\s*=", store))


def pending_questions(letters: list[Letter]) -> list[PendingQuestion]:
    """The questions among `letters` that no `settled` letter of the same run closes, oldest first."""
    settled = {(letter.run, letter.ref) for letter in letters if letter.kind == "settled"}
    return [
        PendingQuestion(letter.run, letter.ref, letter.body, tuple(letter.meta.get("options") or ()), letter.at,
                        letter.meta.get("approval") if isinstance(letter.meta.get("approval"), dict) else None)
        for letter in letters
        if letter.kind == "question" and (letter.run, letter.ref) not in settled
    ]
