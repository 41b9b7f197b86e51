"""Where a failed run is forked from (`flower.flow.previous.retry_from`, issue #26 item 7): the checkpoints
before it are kept, so the finished steps replay and only what failed runs again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flower.flow.previous import ended, failed, retry_from


@dataclass
class _Result:
    ok: bool


def _settle(step: str, fid: int, failed_at: str | None = None) -> dict[str, Any]:
    return {"function_id": fid, "function_name": f"settle:{step}", "output": {"_failed_at": failed_at},
            "error": None}


def _agent(label: str, fid: int, ok: bool) -> dict[str, Any]:
    return {"function_id": fid, "function_name": f"agent:{label}", "output": _Result(ok), "error": None}


def _row(name: str, fid: int, error: Any = None) -> dict[str, Any]:
    return {"function_id": fid, "function_name": name, "output": None, "error": error}


def test_a_failed_attempt_is_where_the_retry_starts() -> None:
    steps = [_agent("clarify", 1, True), _settle("clarify", 2), _agent("goal", 3, True), _settle("goal", 4),
             _agent("work", 5, False), _settle("work", 6, "work")]
    assert retry_from(steps) == 5


def test_the_last_attempt_of_the_failed_step_is_retried_not_its_earlier_rounds() -> None:
    steps = [_agent("one", 1, True), _settle("one", 2), _agent("work", 3, True), _row("gate:work", 4),
             _row("feedback:work", 5), _agent("work#round2", 6, False), _settle("work", 7, "work")]
    assert retry_from(steps) == 6


def test_a_gate_that_stopped_a_good_attempt_is_asked_again() -> None:
    steps = [_agent("one", 1, True), _settle("one", 2), _agent("two", 3, True), _row("gate:two", 4),
             _settle("two", 5, "two")]
    assert retry_from(steps) == 4


def test_a_checkpoint_that_raised_is_where_the_retry_starts() -> None:
    steps = [_agent("one", 1, True), _settle("one", 2), _row("when:two", 3, error=ValueError("boom"))]
    assert retry_from(steps) == 3


def test_without_a_failed_settle_the_retry_starts_after_the_last_settled_step() -> None:
    assert retry_from([_agent("one", 1, True), _settle("one", 2), _agent("two", 3, True)]) == 3
    assert retry_from([]) == 1


def test_the_order_of_the_rows_does_not_matter() -> None:
    steps = [_settle("work", 4, "work"), _agent("work", 3, False), _settle("one", 2), _agent("one", 1, True)]
    assert retry_from(steps) == 3


def test_failed_reads_the_status_and_the_output() -> None:
    assert failed("SUCCESS", {"_failed_at": "two"}) and failed("ERROR", None)
    assert not failed("SUCCESS", {"_failed_at": None}) and not failed("PENDING", None)
    assert not failed("CANCELLED", {"_failed_at": "x"})


def test_a_failed_run_refused_by_a_new_start_names_the_retry() -> None:
    refused = ended("r1", "SUCCESS", {"_failed_at": "two"}, name="flow")
    assert refused is not None and refused.state == "failed"
    assert str(refused) == ("run r1 of flow failed at step two: nothing to continue (flower resume r1 retries its "
                            "failed step; flower run --new starts a fresh run)")
