"""Steering from `flower web` writes the letters `flower answer` and `flower say` write (issue #29 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.errors import ConfigError
from flower.human.mailbox import open_mailbox, pending_questions
from flower.web import steer
from flower.web.source import Source


def asked(run_dir: Path, run: str = "run-1") -> None:
    box = open_mailbox(run_dir)
    box.post(run, "question", "Which colour?", ref="q1", meta={"options": ["red", "blue"]})
    box.close()


def letters(run_dir: Path) -> list[tuple[str, str, str, str]]:
    box = open_mailbox(run_dir)
    try:
        return [(letter.run, letter.kind, letter.ref, letter.body) for letter in box.read(None)]
    finally:
        box.close()


def test_an_answer_is_a_letter_of_the_question_and_its_run(tmp_path: Path) -> None:
    asked(tmp_path)
    assert steer.answer(Source(tmp_path), "q1", " blue ") == "answered q1: Which colour?"
    assert letters(tmp_path)[1][:4] == ("run-1", "answer", "q1", "blue")


def test_a_decline_may_be_empty_an_answer_may_not(tmp_path: Path) -> None:
    asked(tmp_path)
    with pytest.raises(ConfigError, match="the answer is empty"):
        steer.answer(Source(tmp_path), "q1", "  ")
    assert steer.answer(Source(tmp_path), "q1", "", decline=True) == "declined q1: Which colour?"
    assert letters(tmp_path)[1][1] == "decline"


def test_a_question_that_does_not_wait_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"q1 is not waiting for an answer \(waiting: none\)"):
        steer.answer(Source(tmp_path), "q1", "blue")
    assert not (tmp_path / "human.db").exists()  # refusing created no mailbox
    asked(tmp_path)
    with pytest.raises(ConfigError, match=r"q2 is not waiting .*waiting: q1"):
        steer.answer(Source(tmp_path), "q2", "blue")
    with pytest.raises(ConfigError, match="q1 is not waiting"):
        steer.answer(Source(tmp_path), "q1", "blue", run="run-2")  # the same id in another run


def test_mail_goes_to_the_run_whose_channel_wrote_else_to_every_run(tmp_path: Path) -> None:
    asked(tmp_path)
    assert steer.say(Source(tmp_path), "run-1", "hurry") == "sent to run run-1: the run's next inbox call delivers it"
    assert steer.say(Source(tmp_path), "run-9", "hello").startswith("sent to every run of this mailbox")
    assert letters(tmp_path)[1:] == [("run-1", "mail", "", "hurry"), ("*", "mail", "", "hello")]
    box = open_mailbox(tmp_path)
    assert [q.id for q in pending_questions(box.read("run-1"))] == ["q1"]  # mail settles nothing
    box.close()
    with pytest.raises(ConfigError, match="the message is empty"):
        steer.say(Source(tmp_path), "run-1", " ")


def test_a_handoff_or_an_interrupt_is_a_steering_letter_of_the_run(tmp_path: Path) -> None:
    """Issue #29 (steering) and #27 (handoff): the letters `flower handoff` writes; the run's channel takes
    them at its next tool boundary."""
    asked(tmp_path)
    assert steer.steer_run(Source(tmp_path), "run-1", "handoff", " port  the lexer ") == (
        "asked run run-1 to hand over at its next tool boundary: port the lexer")
    assert steer.steer_run(Source(tmp_path), "run-1", "interrupt", "") == (
        "asked run run-1 to stop its turn at its next tool boundary")
    assert letters(tmp_path)[1:] == [("run-1", "handoff", "", "port the lexer"), ("run-1", "interrupt", "", "")]
