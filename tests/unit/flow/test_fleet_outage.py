"""One line per database outage (`flower.flow.fleet.Outage`, issue #26 item 9): DBOS's threads log every
failed poll while PostgreSQL is down; the filter keeps the first as one line and drops the rest."""

from __future__ import annotations

import logging

import pytest

from flower.flow.fleet import Outage, unreachable

REFUSED = ('(psycopg.OperationalError) connection failed: connection to server at "127.0.0.1", port 5432 '
           "failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?")
CLOSED = "consuming input failed: server closed the connection unexpectedly\n\tThis probably means the server"


@pytest.mark.parametrize(("text", "reason"), [
    (REFUSED, "Connection refused"),
    (CLOSED, "server closed the connection unexpectedly"),
    ("FATAL: terminating connection due to administrator command", "terminating connection due to administrator "
                                                                   "command"),
    ("Exception polling schedules: Traceback ... sqlalchemy.exc.OperationalError: boom", "connection lost"),
    ("Workflow already exists in queue", None),
    ("DBOSNonExistentWorkflowError: run-1", None),
])
def test_unreachable_names_the_reason_in_a_few_words(text: str, reason: str | None) -> None:
    assert unreachable(text) == reason


def _record(message: str, exc: BaseException | None = None) -> logging.LogRecord:
    return logging.LogRecord("dbos", logging.WARNING, "_queue.py", 1, message, (), (type(exc), exc, None)
                             if exc is not None else None)


def test_an_outage_is_one_line_until_the_database_is_back(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage()
    with caplog.at_level(logging.WARNING, logger="flower.fleet"):
        kept = [outage.filter(_record(f"Exception listing queues: {REFUSED}")),
                outage.filter(_record("Notification listener error: " + CLOSED)),
                outage.filter(_record("Exception polling schedules", OSError(REFUSED))),
                outage.filter(_record("Workflow already exists in queue"))]
        outage.back()
        outage.back()
        outage.filter(_record(f"Exception listing queues: {REFUSED}"))
    assert kept == [False, False, False, True]  # every connection problem dropped, anything else kept
    assert [r.getMessage() for r in caplog.records] == [
        "the system database is unreachable (Connection refused); retrying until it is back",
        "the system database is reachable again",
        "the system database is unreachable (Connection refused); retrying until it is back",
    ]
