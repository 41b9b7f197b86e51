"""The human channel's states, budget, threads, inbox, log and mailbox, without a model (issue #14, L-8).

The end-to-end tests (tests/e2e/test_human_e2e.py) show the same through the real CLI; here every state is
driven directly, including the races (an answer from another thread, a late answer after a timeout).
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from flower import texts
from flower.agent.events import Event
from flower.human.channel import HumanChannel
from flower.human.mailbox import SqliteMailbox, pending_questions

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_an_answer_from_another_thread_settles_the_question(tmp_path: Path) -> None:
    ch = HumanChannel(timeout_s=10, log_path=tmp_path / "notes" / "qa.md")

    def human() -> None:
        while not ch.pending():
            time.sleep(0.01)
        assert ch.answer(ch.pending()[0].id, "  use PostgreSQL  ")

    thread = threading.Thread(target=human)
    thread.start()
    item = await ch.ask("Which database?", ["SQLite", "PostgreSQL"])
    thread.join()
    assert (item.state, item.answer, item.options) == ("answered", "use PostgreSQL", ("SQLite", "PostgreSQL"))
    assert item.reply() == texts.ASK_ANSWERED.format(answer="use PostgreSQL")
    assert not ch.answer(item.id, "too late")  # settled once
    log = (tmp_path / "notes" / "qa.md").read_text()
    assert "Which database?" in log and "- PostgreSQL" in log and "[answered," in log and "use PostgreSQL" in log


async def test_timeouts_and_the_budget_have_three_meanings_each() -> None:
    """timeout_s <= 0 falls through at once; max_asks 0 forbids; None is unlimited (L-8)."""
    at_once = await HumanChannel(timeout_s=0).ask("anyone?")
    assert (at_once.state, at_once.reply()) == ("timeout", texts.ASK_TIMEOUT)
    short = HumanChannel(timeout_s=0.2)
    started = time.monotonic()
    waited = await short.ask("anyone there?")
    assert waited.state == "timeout" and 0.15 < time.monotonic() - started < 5
    assert not short.answer(waited.id, "late")  # a late answer changes nothing
    forbidden = HumanChannel(max_asks=0, timeout_s=0)
    item = await forbidden.ask("may I?")
    assert (item.state, item.reply(), forbidden.remaining) == ("over_budget", texts.ASK_OVER_BUDGET, 0)
    assert HumanChannel().remaining == -1


async def test_invalid_and_over_budget_asks_do_not_use_up_the_budget_and_framework_asks_never_count() -> None:
    ch = HumanChannel(max_asks=1, timeout_s=0)
    assert (await ch.ask("   ")).state == "invalid"
    assert (await ch.ask("")).reply() == texts.ASK_INVALID
    assert (await ch.ask("first")).state == "timeout"  # counted: it was a real question
    assert (await ch.ask("second")).state == "over_budget"
    assert (await ch.ask("third")).state == "over_budget"
    assert ch.remaining == 0
    assert (await ch.ask("judge says unreachable: what now?", framework=True)).state == "timeout"
    assert [a.id for a in ch.asks] == ["q1", "q2", "q3", "q4", "q5", "q6"]


async def test_decline_carries_its_reason_and_ui_errors_are_recorded_not_raised() -> None:
    seen: list[Event] = []

    def broken_ui(event: Event) -> None:
        seen.append(event)
        raise RuntimeError("the frontend crashed")

    ch = HumanChannel(timeout_s=5, on_event=broken_ui)
    task = asyncio.create_task(ch.ask("Delete the old table?"))
    while not ch.pending():
        await asyncio.sleep(0.01)
    assert ch.decline(ch.pending()[0].id, "not my call")
    item = await task
    assert item.state == "declined" and "Reason: not my call." in item.reply()
    assert [(e.kind, e.payload["state"]) for e in seen] == [("ask", "asked"), ("ask", "declined")]
    assert ch.ui_errors == ["on_event: RuntimeError: the frontend crashed"] * 2


async def test_mail_is_appended_to_the_brief_and_delivered_once(tmp_path: Path) -> None:
    brief = tmp_path / "brief.md"
    brief.write_text("# Brief\n\n## Goal\nShip it.\n")
    ch = HumanChannel(amend_path=brief, log_path=tmp_path / "qa.md")
    assert ch.send("   ") is None
    assert ch.inbox() == texts.INBOX_EMPTY
    ch.send("Also support Windows paths.")
    ch.send("And keep the CLI flags stable.")
    text = ch.inbox()
    assert text.splitlines()[1:3] == ["1. Also support Windows paths.", "2. And keep the CLI flags stable."]
    assert str(brief) in text
    assert ch.inbox() == texts.INBOX_EMPTY
    body = brief.read_text()
    assert body.startswith("# Brief\n\n## Goal\nShip it.\n")  # never overwritten
    assert body.index("Windows paths") < body.index("CLI flags stable") and body.count("## Added during the run") == 2
    unsaved = HumanChannel()
    unsaved.send("note this")
    assert texts.INBOX_NOT_SAVED in unsaved.inbox()


async def test_an_unwritable_log_is_recorded_and_the_question_still_answers(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    ch = HumanChannel(timeout_s=0, log_path=blocker / "qa.md")  # a file where a folder should be
    assert (await ch.ask("q?")).state == "timeout"
    assert ch.ui_errors and ch.ui_errors[0].startswith("log: ")


async def test_answers_and_mail_cross_processes_through_the_mailbox(tmp_path: Path) -> None:
    """What `flower answer` / `flower say` do from another process: letters in the run's mailbox."""
    path = tmp_path / "human.db"
    ch = HumanChannel(timeout_s=10, mailbox=SqliteMailbox(path), run="run-1", poll_s=0.05)
    other = SqliteMailbox(path)  # its own connection, as another process has

    async def human() -> None:
        while not pending_questions(other.read("run-1")):
            await asyncio.sleep(0.02)
        (question,) = pending_questions(other.read("run-1"))
        assert (question.id, question.question, question.options) == ("q1", "Which port?", ("8080", "9090"))
        other.post("run-2", "answer", "wrong run", ref="q1")
        other.post("run-1", "answer", "9090", ref="q1")
        other.post("run-1", "mail", "the deadline moved to Friday")

    helper = asyncio.create_task(human())
    item = await ch.ask("Which port?", ["8080", "9090"])
    await helper
    assert (item.state, item.answer) == ("answered", "9090")
    assert pending_questions(other.read("run-1")) == []
    assert "the deadline moved to Friday" in ch.inbox()
    # A new process of the same run continues the ids and does not deliver the mail again.
    again = HumanChannel(timeout_s=0, mailbox=SqliteMailbox(path), run="run-1")
    again.sync()
    assert again.inbox() == texts.INBOX_EMPTY
    assert (await again.ask("next?")).id == "q2"
    kinds = [letter.kind for letter in other.read("run-1")]
    # Each process of the run says it is the current one ("open"): `flower say RUN_DIR` sends there.
    assert kinds == ["open", "question", "answer", "mail", "settled", "received", "open"]


def test_concurrent_syncs_take_each_letter_once(tmp_path: Path) -> None:
    path = tmp_path / "human.db"
    ch = HumanChannel(mailbox=SqliteMailbox(path), run="r")
    other = SqliteMailbox(path)
    for i in range(5):
        other.post("*", "mail", f"note {i}")  # sent to every run of the run dir, as `flower say RUN_DIR` does
    threads = [threading.Thread(target=ch.sync) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [m.text for m in ch.mail] == [f"note {i}" for i in range(5)]
    sent = [str(letter.id) for letter in other.read("r") if letter.kind == "mail"]
    assert sorted(letter.ref for letter in other.read("r") if letter.kind == "received") == sent and len(sent) == 5


async def test_a_bound_channel_follows_the_runtimes_run_id(tmp_path: Path) -> None:
    """A workflow that continues an earlier run gives the runtime that run's id; the letters follow it."""

    class FakeRuntime:
        run_dir = tmp_path / "runs"
        run_id = "new-run"
        workbench = None
        store = None

    rt = FakeRuntime()
    ch = HumanChannel(timeout_s=0.1, poll_s=0.05).bind(rt)
    other = SqliteMailbox(tmp_path / "runs" / "human.db")
    other.post("old-run", "question", "asked before the crash", ref="q4")
    other.post("old-run", "settled", "", ref="q4")
    rt.run_id = "old-run"
    item = await ch.ask("after the restart?")
    assert (item.id, item.state, ch.run) == ("q5", "timeout", "old-run")
    assert [(x.kind, x.ref) for x in other.read("old-run")][2:] == [("open", ""), ("question", "q5"),
                                                                    ("settled", "q5")]
    assert [x.kind for x in other.read("new-run")] == ["open"]
