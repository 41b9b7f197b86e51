"""`report --by step` attributes each API message by the session it was made in (issue #28 item 6).

The sessions of a fan-out overlap in time; a judged round resumes the work's session; a fork copies its
parent's history. Every message lands in its step's row once, and the rows add up to the total.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flower.report.breakdown import attempts, breakdown, step_of
from flower.report.rundata import RunData

USAGE = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}


def reply(ident: str, second: float, **extra: Any) -> dict[str, Any]:
    return {"type": "assistant", "timestamp": f"2026-01-01T10:00:{second:06.3f}Z",
            "message": {"id": ident, "model": "claude-sonnet-4-5", "usage": USAGE,
                        "content": [{"type": "text", "text": ident}]}, **extra}


def started(step: str, session: str, second: float, **extra: Any) -> dict[str, Any]:
    return {"run_id": "r", "step": step, "session_id": session, "started": f"2026-01-01T10:00:{second:06.3f}+00:00",
            **extra}


def data(**fields: Any) -> RunData:
    return RunData("run", Path("runs"), **fields)


def by_step(run: RunData) -> dict[str, int]:
    rows = breakdown(run, "step")
    assert rows[-1].key == "total"
    assert sum(b.messages for b in rows[:-1]) == rows[-1].messages
    assert sum(b.cost_usd for b in rows[:-1]) == pytest.approx(rows[-1].cost_usd)
    return {b.key: b.messages for b in rows}


def test_overlapping_fan_out_items_each_get_their_own_messages() -> None:
    # Three items run at once; item i replies i + 1 times, the replies interleaved in time.
    main = {f"s{i}": [reply(f"m{i}-{n}", 1 + n + i / 10) for n in range(i + 1)] for i in range(3)}
    rows = [started(f"fan[{i}]", f"s{i}", 0.5 + i / 100) for i in range(3)]
    # The step rows (appended as the items end) would put every message in the last one's window.
    steps = [{"step": f"fan[{i}]", "session_id": f"s{i}", "started": "2026-01-01T10:00:00.500+00:00",
              "ended": "2026-01-01T10:00:09.000+00:00"} for i in range(3)]
    shown = by_step(data(steps=steps, started=rows, main=main))
    assert shown == {"fan[0]": 1, "fan[1]": 2, "fan[2]": 3, "total": 6}
    assert [b.key for b in breakdown(data(steps=steps, started=rows, main=main), "step")] == \
        ["fan[0]", "fan[1]", "fan[2]", "total"]


def test_a_resumed_session_splits_at_the_resume_and_a_fork_copy_counts_once() -> None:
    work = [reply("w1", 1), reply("w2", 2), reply("r1", 6), reply("r2", 7)]
    bequest = [*work, reply("b1", 9)]  # the fork copied the work's history, ids and all
    rows = [started("work", "w", 0.5), started("work:judge#1", "j", 3),
            started("work#round2", "w", 5, resumed=True), started("bequest", "b", 8.5, forked_from="w")]
    main = {"b": bequest, "w": work, "j": [reply("j1", 4)]}  # the fork listed first: still counted under work
    sub = {"agent-1": [reply("a1", 1.5)], "agent-2": [reply("a2", 6.5)]}
    run = data(steps=[], started=rows, main=main, subagents=sub, parents={"agent-1": "w", "agent-2": "w"})
    assert by_step(run) == {"work": 3, "work:judge#1": 1, "work#round2": 3, "bequest": 1, "total": 8}


def test_a_killed_step_has_its_row_and_an_unknown_session_is_named() -> None:
    # The killed process's session has a session row but no step row; another session has neither.
    rows = [started("clarify", "c", 0), started("work", "k", 2)]
    steps = [{"step": "clarify", "session_id": "c", "started": "2026-01-01T10:00:00.000+00:00",
              "ended": "2026-01-01T10:00:01.500+00:00"}]
    main = {"c": [reply("c1", 1)], "k": [reply("k1", 3), reply("k2", 4)], "x1234567890": [reply("x1", 5)]}
    assert by_step(data(steps=steps, started=rows, main=main)) == \
        {"clarify": 1, "work": 2, "session x1234567": 1, "total": 4}


def test_a_run_without_session_rows_falls_back_to_its_step_rows() -> None:
    steps = [{"step": "a", "session_id": "s2", "retired": ["s1"], "started": "2026-01-01T10:00:00.000+00:00"},
             {"step": "a#retry1", "session_id": "s2", "started": "2026-01-01T10:00:05.000+00:00"}]
    main = {"s1": [reply("1", 1)], "s2": [reply("2", 2), reply("3", 6)]}
    run = data(steps=steps, main=main)
    assert attempts(run)["s2"] == [("2026-01-01T10:00:00.000+00:00", "a"), ("2026-01-01T10:00:05.000+00:00", "a#retry1")]
    assert by_step(run) == {"a": 2, "a#retry1": 1, "total": 3}
    assert step_of("s9", None, attempts(run)) == "session s9"


def test_the_table_says_what_a_session_row_is_and_keeps_every_row() -> None:
    import io

    from rich.console import Console

    from flower.report.terminal import print_breakdown

    main = {"c": [reply("c1", 1)], "x1234567890": [reply("x1", 5)]}
    rows = breakdown(data(steps=[], started=[started("clarify", "c", 0)], main=main), "step")
    out = io.StringIO()
    print_breakdown(Console(file=out, width=80, color_system=None), rows, "step", label="runs")
    shown = out.getvalue()
    assert [line.split()[0] for line in shown.splitlines()[4:7]] == ["clarify", "session", "total"]
    assert "`session <id>`: a session the manifest names no step for" in " ".join(shown.split())
