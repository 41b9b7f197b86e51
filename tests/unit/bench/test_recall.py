"""The recall probe's plant and count (bench/_recall.py, issue #27): what the scripted model carries and
what an answer is credited with."""

from __future__ import annotations

from pathlib import Path

from bench._recall import DECISIONS, carried, plant, recalled, seen


def test_planted_notes_hold_each_decision_once(tmp_path: Path) -> None:
    paths = plant(tmp_path)
    assert len(paths) == len(DECISIONS) == 8
    texts = [(tmp_path / path).read_text() for path in paths]
    assert [seen(text) for text in texts] == [[ident] for ident in DECISIONS]


def test_a_summary_carries_what_its_context_holds_and_an_answer_is_counted_once_per_decision() -> None:
    context = "Read DECISION-03 ... DECISION-00 ... DECISION-03 again; DECISION-99 is no planted decision"
    summary = carried(context)
    assert seen(summary) == ["DECISION-03", "DECISION-00"] and DECISIONS["DECISION-03"] in summary
    assert recalled(summary) == 2 and recalled(summary + summary) == 2 and recalled("nothing") == 0
