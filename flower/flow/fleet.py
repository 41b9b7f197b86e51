"""Fleet liveness: heartbeats in PostgreSQL, and the release of work a dead worker holds.

DBOS tags every workflow with the executor running it. Self-hosted, it recovers an executor's PENDING
workflows only when a process with that executor id starts again, or when a live process is asked to
recover them (its admin API's workflow recovery, `DBOS._recover_pending_workflows`). A `flower worker`
killed for good would keep its claimed parallel steps, and with them the queue's concurrency limit, forever.
So each fleet process records a heartbeat row in the system database (`flower_fleet.heartbeats`), and every
live process looks, at each beat, for workers silent longer than their own timeout and has DBOS recover
their pending workflows: DBOS puts them back in their queue, where any live process takes them.

Invariants:
- Times are the server's (`now()`), so machines with skewed clocks agree on who is silent.
- Only rows of role `worker` are ever released; a starter (`flower run`) beats so that `flower runs` can
  tell it is alive, but its run is continued by running it again (`flower resume`), as before.
- Each worker states its own timeout in its row; whoever releases it uses that value.
- Releasing is DBOS's recovery, which is idempotent: two processes releasing one worker at once, or the
  worker restarting under its name meanwhile, run each workflow once.
- A database error in the heartbeat thread is logged once per kind and retried at the next beat; it never
  ends the process.
- While the database cannot be reached (a PostgreSQL restart, a cut link), DBOS's background threads log
  every failed poll, several with a traceback; `Outage` (a filter on DBOS's logger) turns that into one line
  when the outage starts, and the heartbeat says in one line when the database answers again (issue #26
  item 9). DBOS's threads retry on their own; nothing is restarted.
- A lease: a worker that has not beaten for `fence_after(timeout)` (one beat interval short of the timeout
  the others wait for) stops the steps it runs (`on_lost`), so a worker cut off from the database (a
  partition: its connections hang, nothing fails) never goes on with a step another process has taken by
  then: no late API calls, no late result. A watchdog thread judges it, since the beat itself may hang.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DEFAULT_TIMEOUT", "OUTAGE", "Beat", "Heartbeat", "Outage", "beating", "fence_after", "heartbeats",
           "unreachable"]

DEFAULT_TIMEOUT = 30.0
"""Seconds of silence after which a worker's claimed steps go back to the queue."""

Role = Literal["worker", "starter"]

_log = logging.getLogger("flower.fleet")

_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS flower_fleet",
    """CREATE TABLE IF NOT EXISTS flower_fleet.heartbeats (
        executor_id text PRIMARY KEY,
        role text NOT NULL,
        host text NOT NULL,
        pid integer NOT NULL,
        timeout_s double precision NOT NULL,
        beat timestamptz NOT NULL)""",
)
_BEAT = """INSERT INTO flower_fleet.heartbeats (executor_id, role, host, pid, timeout_s, beat)
           VALUES (%s, %s, %s, %s, %s, now())
           ON CONFLICT (executor_id) DO UPDATE SET role = EXCLUDED.role, host = EXCLUDED.host,
               pid = EXCLUDED.pid, timeout_s = EXCLUDED.timeout_s, beat = now()"""
_SILENT = """SELECT executor_id, extract(epoch FROM now() - beat) FROM flower_fleet.heartbeats
             WHERE role = 'worker' AND executor_id <> %s AND beat < now() - make_interval(secs => timeout_s)"""
_ALL = "SELECT executor_id, role, host, pid, timeout_s, extract(epoch FROM now() - beat) FROM flower_fleet.heartbeats"


# The text of a lost or refused connection to the database, as psycopg and SQLAlchemy word it.
_UNREACHABLE = re.compile(r"OperationalError|connection failed|Connection refused|server closed the connection|"
                          r"consuming input failed|could not connect|the connection is (?:closed|lost)|"
                          r"terminating connection|connection to server at|SSL connection has been closed",
                          re.IGNORECASE)
_REASON = re.compile(r"(Connection refused|server closed the connection unexpectedly|terminating connection[^\n]*|"
                     r"could not connect[^\n]*|connection timeout expired|the connection is (?:closed|lost))",
                     re.IGNORECASE)


def unreachable(text: str) -> str | None:
    """The reason, in a few words, when `text` says the database could not be reached; else None."""
    if not _UNREACHABLE.search(text):
        return None
    found = _REASON.search(text)
    return " ".join(found.group(1).split()) if found else "connection lost"


class Outage(logging.Filter):
    """One line per database outage instead of every failed poll of every DBOS thread, with tracebacks."""

    def __init__(self) -> None:
        super().__init__()
        self._down = threading.Event()

    @property
    def down(self) -> bool:
        return self._down.is_set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f" {type(record.exc_info[1]).__name__} {record.exc_info[1]}"
        reason = unreachable(text)
        if reason is None:
            return True
        self.lost(reason)
        return False

    def lost(self, reason: str) -> None:
        """The database is unreachable: said once, until `back()`."""
        if not self._down.is_set():
            self._down.set()
            _log.warning("the system database is unreachable (%s); retrying until it is back", reason)

    def back(self) -> None:
        """The database answered: said once after an outage."""
        if self._down.is_set():
            self._down.clear()
            _log.warning("the system database is reachable again")


OUTAGE = Outage()
"""The process's one outage state: DBOS's logger and the heartbeat report to it."""


@dataclass(frozen=True)
class Beat:
    """A fleet process's last heartbeat, as `flower runs` shows it."""

    executor_id: str
    role: str
    host: str
    pid: int
    timeout_s: float
    age_s: float
    """Seconds since its last beat (server time)."""

    @property
    def silent(self) -> bool:
        """No beat for longer than two beat intervals: the process is dead, frozen or cut off."""
        return self.age_s > 2 * interval(self.timeout_s) + 1


def interval(timeout: float) -> float:
    """Seconds between beats: several beats fit in one timeout."""
    return max(0.5, min(5.0, timeout / 4))


def fence_after(timeout: float) -> float:
    """Seconds without a beat after which a worker stops its steps: before the others release them."""
    return timeout - interval(timeout)


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(_plain(url), autocommit=True, connect_timeout=5,
                           options="-c statement_timeout=5000 -c lock_timeout=5000")


def _ensure(conn: Any) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('flower_fleet.heartbeats'))")  # racing creators
        for statement in _SCHEMA:
            conn.execute(statement)


def heartbeats(url: str) -> dict[str, Beat]:
    """Every fleet process's last heartbeat by executor id ({} when none was ever recorded)."""
    with contextlib.closing(_connect(url)) as conn:
        exists = conn.execute("SELECT to_regclass('flower_fleet.heartbeats')").fetchone()[0]
        if exists is None:
            return {}
        return {row[0]: Beat(row[0], row[1], row[2], int(row[3]), float(row[4]), float(row[5]))
                for row in conn.execute(_ALL).fetchall()}


class Heartbeat:
    """The thread of one fleet process: beat, then release the work of silent workers."""

    def __init__(self, url: str, executor_id: str, role: Role, timeout: float = DEFAULT_TIMEOUT,
                 on_lost: Callable[[], int] | None = None, on_back: Callable[[], None] | None = None) -> None:
        self.url, self.executor_id, self.role, self.timeout = url, executor_id, role, timeout
        self.on_lost, self.on_back = on_lost, on_back
        """Stops this process's steps (how many) once its lease ran out; None: nothing is stopped. `on_back`:
        a beat landed again after that."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="flower-heartbeat", daemon=True)
        self._watch = threading.Thread(target=self._fence, name="flower-fence", daemon=True)
        self._last_ok = time.monotonic()
        self._fenced = False
        self._conn: Any = None
        self._logged: set[str] = set()

    def start(self) -> None:
        self._thread.start()
        if self.on_lost is not None:
            self._watch.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self._watch.is_alive():
            self._watch.join(timeout=10)

    @property
    def cut_off(self) -> bool:
        """No beat landed for two beat intervals, or the database refuses: a clean stop would hang on it."""
        return time.monotonic() - self._last_ok > 2 * interval(self.timeout) + 1 or OUTAGE.down

    @property
    def fenced(self) -> bool:
        """Its lease ran out and no beat landed since."""
        return self._fenced

    def _fence(self) -> None:
        """Once no beat landed for `fence_after(timeout)`, stop the steps this process runs; again after a
        beat lands and the lease runs out anew."""
        assert self.on_lost is not None
        while not self._stop.wait(min(1.0, interval(self.timeout) / 2)):
            silent = time.monotonic() - self._last_ok
            if silent < fence_after(self.timeout) or self._fenced:
                continue
            self._fenced = True
            stopped = self.on_lost()
            _log.warning("worker %s: no heartbeat landed for %.0f s (its timeout is %.0f s): its steps may run "
                         "elsewhere now; stopped the %d it ran", self.executor_id, silent, self.timeout, stopped)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
                OUTAGE.back()
                self.release_silent()
            except Exception as exc:  # noqa: BLE001 - a database that is down now: try at the next beat
                self._drop()
                reason = unreachable(f"{type(exc).__name__} {exc}")
                if reason is not None:
                    OUTAGE.lost(reason)
                elif type(exc).__name__ not in self._logged:
                    self._logged.add(type(exc).__name__)
                    _log.warning("fleet heartbeat of %s failed: %s", self.executor_id, " ".join(str(exc).split()))
            self._stop.wait(interval(self.timeout))
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def beat(self) -> None:
        if self._conn is None:
            self._conn = _connect(self.url)
            _ensure(self._conn)
        self._conn.execute(_BEAT, (self.executor_id, self.role, socket.gethostname(), os.getpid(), self.timeout))
        self._last_ok = time.monotonic()
        if self._fenced:
            self._fenced = False
            if self.on_back is not None:
                self.on_back()
            _log.warning("worker %s: its heartbeat landed again; taking steps again", self.executor_id)

    def release_silent(self) -> list[str]:
        """Have DBOS recover the pending workflows of every worker silent past its timeout; their ids."""
        from dbos import DBOS

        released: list[str] = []
        for executor, age in self._conn.execute(_SILENT, (self.executor_id,)).fetchall():
            handles = DBOS._recover_pending_workflows([executor])
            if handles:
                released += [h.workflow_id for h in handles]
                _log.warning("worker %s silent for %.0f s: %d of its steps go back to the queue (%s)", executor,
                             float(age), len(handles), ", ".join(h.workflow_id for h in handles))
        return released


@contextlib.contextmanager
def beating(url: str, executor_id: str, role: Role, timeout: float = DEFAULT_TIMEOUT,
            on_lost: Callable[[], int] | None = None, on_back: Callable[[], None] | None = None
            ) -> Iterator[Heartbeat]:
    """A heartbeat for this process while the block runs (launched DBOS on PostgreSQL); `on_lost` stops
    its steps when its lease runs out (a worker's)."""
    heart = Heartbeat(url, executor_id, role, timeout, on_lost, on_back)
    heart.start()
    try:
        yield heart
    finally:
        heart.stop()
