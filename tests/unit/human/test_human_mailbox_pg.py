"""The PostgreSQL mailbox: letters, pending questions, and a dropped connection opened again (issue #14, L-8)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import psycopg
import pytest

from flower.human.mailbox import PostgresMailbox, pending_questions

pytestmark = pytest.mark.postgres

DSN = os.environ.get("FLOWER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def mailbox() -> Iterator[PostgresMailbox]:
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL unreachable at {DSN}: {exc}")
    schema = f"human_unit_{os.getpid()}_{secrets.token_hex(3)}"
    box = PostgresMailbox(DSN, schema=schema)
    try:
        yield box
    finally:
        box.close()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_letters_of_a_run_and_broadcasts_in_order(mailbox: PostgresMailbox) -> None:
    first = mailbox.post("r1", "question", "Which port?", ref="q1", meta={"options": ["80", "443"]})
    mailbox.post("r2", "question", "Other run?", ref="q1")
    mailbox.post("*", "mail", "to everyone")
    assert [(x.run, x.kind, x.body) for x in mailbox.read("r1")] == [("r1", "question", "Which port?"),
                                                                      ("*", "mail", "to everyone")]
    assert [x.id for x in mailbox.read("r1", after=first)] == [first + 2]
    (pending,) = pending_questions(mailbox.read("r1"))
    assert (pending.id, pending.options) == ("q1", ("80", "443"))


def test_a_dropped_connection_is_opened_again(mailbox: PostgresMailbox) -> None:
    mailbox.post("r", "mail", "before")
    pid = mailbox._conn.info.backend_pid  # noqa: SLF001 - the connection the test kills
    with psycopg.connect(DSN, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    mailbox.post("r", "mail", "after")  # the first statement meets the dead connection and opens a new one
    assert [x.body for x in mailbox.read("r")] == ["before", "after"]


def test_of_concurrent_claims_on_separate_connections_exactly_one_posts(mailbox: PostgresMailbox) -> None:
    """`flower answer` from eight machines at once: one answer letter, the others see it (issue #26 item 8)."""
    import threading

    mailbox.post("r", "question", "Which port?", ref="q1")
    boxes = [PostgresMailbox(DSN, schema=mailbox.schema) for _ in range(8)]
    barrier = threading.Barrier(len(boxes))
    outcomes: dict[int, object] = {}

    def answer(i: int) -> None:
        barrier.wait()
        outcomes[i] = boxes[i].claim("r", "q1", "answer", f"port {i}", by=f"human {i}")

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(len(boxes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for box in boxes:
        box.close()
    answers = [x for x in mailbox.read("r") if x.kind == "answer"]
    assert len(answers) == 1
    (winner,) = [i for i, first in outcomes.items() if first is None]
    assert (answers[0].body, answers[0].meta) == (f"port {winner}", {"by": f"human {winner}"})
    assert all(first == answers[0] for i, first in outcomes.items() if i != winner)
    mailbox.post("r", "settled", "", ref="q2", meta={"state": "timeout"})
    settled = mailbox.claim("r", "q2", "decline", "", by="late")
    assert settled is not None and settled.kind == "settled"
