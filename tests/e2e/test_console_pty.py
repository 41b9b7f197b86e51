"""The interactive input line through a real pty at 80 columns (issue #15, L-12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.ptykit import CTRL_C, CTRL_D, Term

pytestmark = pytest.mark.e2e
DRIVER = Path(__file__).parents[1] / "support" / "console_driver.py"
ROOT = Path(__file__).parents[2]


def _log(term: Term) -> list[list[str]]:
    return json.loads(term.expect_regex(r"LOG (\[.*\])\r?\n"))  # type: ignore[no-any-return]


def test_a_number_answers_text_goes_to_the_inbox_ctrl_c_remarks_then_stops() -> None:
    term = Term([str(DRIVER)], cwd=ROOT)
    term.expect("answer (a number picks an option")
    term.expect("STATUS context 12K")  # the bottom toolbar
    term.send("2\r")
    term.expect("+ q1 answer: TSV")
    term.expect("say (added to the brief")
    term.send("也处理 CRLF\r")
    term.expect("+ received")
    term.send(CTRL_C)
    term.expect("interrupted: a remark")
    term.send("slow down\r")
    term.expect("! interrupted: slow down")
    term.send(CTRL_C)
    term.expect("interrupted: a remark")
    term.send(CTRL_C)
    assert _log(term) == [["answer", "q1", "TSV"], ["mail", "terminal", "也处理 CRLF"],
                          ["interrupt", "slow down"], ["stop"]]
    assert term.wait_exit() == 0


def test_end_of_input_declines_the_pending_question() -> None:
    term = Term([str(DRIVER)], cwd=ROOT)
    term.expect("answer (a number")
    term.send(CTRL_D)
    assert _log(term) == [["decline", "q1", "nobody is at the terminal"]]
