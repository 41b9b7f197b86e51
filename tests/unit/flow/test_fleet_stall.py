"""What `flower runs` says about an unfinished fleet run whose steps a silent process holds (issue #26 item 3)."""

from __future__ import annotations

from typing import Any

import pytest

from flower.flow.fleet import Beat, interval
from flower.flow.runs import RunRow, stall_reason


def row(*holders: dict[str, Any]) -> RunRow:
    return RunRow("r1", "fan", "running", 2, 6, 0.0, "/ws", "", holders=holders)


def holder(executor: str, role: str | None, age: float | None, *, timeout: float = 30.0,
           silent: bool = True) -> dict[str, Any]:
    return {"executor": executor, "items": ["each[1]", "each[4]"], "role": role, "heartbeat_s": age,
            "timeout_s": timeout if role else None, "silent": silent}


@pytest.mark.parametrize(("holders", "said"), [
    ((), None),
    ((holder("w1", "worker", 2.0, silent=False),), None),  # beating: nothing to say
    ((holder("w1", "worker", 14.0),),
     "run r1 is stalled: each[1], each[4] held by worker w1, last heartbeat 14 s ago "
     "(its steps go back to the queue after 30 s)"),
    ((holder("w1", "worker", 95.0),),
     "run r1 is stalled: each[1], each[4] held by worker w1, last heartbeat 95 s ago "
     "(past its timeout: no live fleet process has released them yet)"),
    ((holder("lead-7", "starter", 40.0),),
     "run r1 is stalled: each[1], each[4] held by starter lead-7, last heartbeat 40 s ago "
     "(run `flower resume` to continue)"),
    ((holder("old", None, None),), "run r1 is stalled: each[1], each[4] held by executor old, "
                                   "which records no heartbeat"),
])
def test_a_stall_names_the_silent_holder_its_steps_and_its_last_heartbeat(
    holders: tuple[dict[str, Any], ...], said: str | None
) -> None:
    assert stall_reason(row(*holders)) == said


def test_a_process_is_silent_after_two_missed_beats() -> None:
    assert interval(30) == 5.0 and interval(2) == 0.5 and interval(600) == 5.0
    assert not Beat("w1", "worker", "h", 1, 30.0, 10.0).silent
    assert Beat("w1", "worker", "h", 1, 30.0, 11.5).silent
