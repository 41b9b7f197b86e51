"""`HumanChannel.approve`: the channel's side of a tool call that needs approval, without a model (L-15).

The end-to-end tests (tests/e2e/test_approval_e2e.py) show it through `flower run`, `flower answer` and a
SIGKILL; here each way an approval ends is driven directly, and so is what a process finds in the mailbox
that an earlier process of the same session left.
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
from flower.walls.approval import Call

pytestmark = pytest.mark.anyio

PUSH = Call("Bash", {"command": "git push origin main"}, "Bash(git push:*)", "shipper", "toolu_1", "sess-1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def answer_when_asked(ch: HumanChannel, text: str, *, decline: bool = False) -> threading.Thread:
    def human() -> None:
        deadline = time.monotonic() + 10
        while not ch.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        qid = ch.pending()[0].id
        assert ch.decline(qid, text) if decline else ch.answer(qid, text)

    thread = threading.Thread(target=human)
    thread.start()
    return thread


async def test_yes_allows_no_denies_with_its_reason_and_a_decline_or_a_vague_answer_denies() -> None:
    events: list[Event] = []
    ch = HumanChannel(timeout_s=10, max_asks=0, on_event=events.append)  # approvals never count against it
    cases = [("yes", True, ""), ("no: frozen until Friday", False, "frozen until Friday"),
             ("perhaps", False, "perhaps")]
    for said, allowed, reason in cases:
        thread = answer_when_asked(ch, said)
        decision = await ch.approve(PUSH)
        thread.join()
        assert (decision.allowed, decision.state, decision.reason) == (allowed, "answered", reason), said
    thread = answer_when_asked(ch, "ask me tomorrow", decline=True)
    declined = await ch.approve(PUSH)
    thread.join()
    assert (declined.allowed, declined.state, declined.reason) == (False, "declined", "ask me tomorrow")
    asked = events[0]
    assert asked.text == "Approve shipper's Bash: git push origin main  (rule Bash(git push:*))"
    assert asked.payload["options"] == ["yes", "no"] and asked.payload["approval"]["agent"] == "shipper"


async def test_no_answer_in_time_denies_as_a_timeout() -> None:
    decision = await HumanChannel(timeout_s=0.1).approve(PUSH)
    assert (decision.allowed, decision.state) == (False, "timeout")
    at_once = await HumanChannel(timeout_s=0).approve(PUSH)
    assert (at_once.allowed, at_once.state) == (False, "timeout")


async def test_an_answer_the_dead_process_never_took_holds_for_the_same_call_once(tmp_path: Path) -> None:
    box = SqliteMailbox(tmp_path / "human.db")
    dead = HumanChannel(timeout_s=30, poll_s=30).attach(box, "run-1")
    waiting = asyncio.ensure_future(dead.approve(PUSH))
    while not pending_questions(box.read("run-1")):
        await asyncio.sleep(0.01)
    assert box.claim("run-1", "q1", "answer", "yes", by="test") is None  # `flower answer`; run-1 never reads it
    waiting.cancel()  # the process dies: no letter of its own follows
    with pytest.raises(asyncio.CancelledError):
        await waiting

    # The resumed session runs in a new run (`flower run --resume` makes one) and issues the call again.
    resumed = HumanChannel(timeout_s=0.2).attach(box, "run-2")
    again = Call(PUSH.tool, dict(PUSH.tool_input), PUSH.rule, PUSH.agent, "toolu_2", PUSH.session)
    decision = await resumed.approve(again)
    assert (decision.allowed, decision.qid) == (True, "q1@run-1")
    assert [letter.ref for letter in box.read(None) if letter.kind == "question"] == ["q1"]  # not asked again
    # Taken once: the same call later in the session is asked (and, unanswered here, times out).
    later = await resumed.approve(Call(PUSH.tool, dict(PUSH.tool_input), PUSH.rule, PUSH.agent, "toolu_3",
                                       PUSH.session))
    assert (later.allowed, later.state) == (False, "timeout")
    # Another call, or the same call of another session, never takes an earlier answer.
    other = HumanChannel(timeout_s=0.1).attach(box, "run-3")
    assert not (await other.approve(Call("Bash", {"command": "git push -f"}, PUSH.rule, "", "t4", "sess-1"))).allowed
    assert not (await other.approve(Call("Bash", dict(PUSH.tool_input), PUSH.rule, "", "t5", "sess-2"))).allowed


async def test_an_approval_left_waiting_by_a_dead_process_is_closed_and_asked_again(tmp_path: Path) -> None:
    box = SqliteMailbox(tmp_path / "human.db")
    dead = HumanChannel(timeout_s=30).attach(box, "run-1")
    waiting = asyncio.ensure_future(dead.approve(PUSH))
    while not pending_questions(box.read("run-1")):
        await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # Cancelled in-process settles it; a SIGKILL would not: take that letter back out of the picture.
    box._conn.execute("DELETE FROM human_letters WHERE kind = 'settled'")  # what a killed process leaves
    assert [q.id for q in pending_questions(box.read(None))] == ["q1"]

    resumed = HumanChannel(timeout_s=5, poll_s=0.05).attach(box, "run-2")
    again = Call(PUSH.tool, dict(PUSH.tool_input), PUSH.rule, PUSH.agent, "toolu_2", PUSH.session)

    def human() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            waiting_now = pending_questions(box.read(None))
            if [(q.run, q.id) for q in waiting_now] == [("run-2", "q1")]:
                assert box.claim("run-2", "q1", "answer", "yes", by="test") is None
                return
            time.sleep(0.02)
        raise AssertionError(f"never asked again alone: {pending_questions(box.read(None))}")

    thread = threading.Thread(target=human)
    thread.start()
    decision = await resumed.approve(again)
    thread.join()
    assert (decision.allowed, decision.qid) == (True, "q1")
    closed = [letter for letter in box.read("run-1") if letter.kind == "settled"]
    assert [(letter.ref, letter.meta["state"]) for letter in closed] == [("q1", "abandoned")]


async def test_a_wait_cut_short_says_so_and_not_that_nobody_answered_in_time() -> None:
    """Ctrl-C in `flower run` interrupts the turn, which cancels the approval hook's wait: the question ends
    (as a timeout, so no answer is taken) with a reason saying the wait was cut short, which the live view
    shows instead of "nobody answered in time" (it was 8 s of 120 in the run that found this)."""
    events: list[Event] = []
    ch = HumanChannel(timeout_s=120, on_event=events.append)
    waiting = asyncio.ensure_future(ch.approve(PUSH))
    while not ch.pending():
        await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    ended = events[-1].payload
    assert (ended["state"], ended["answer"]) == ("timeout", texts.ASK_CUT_SHORT)
