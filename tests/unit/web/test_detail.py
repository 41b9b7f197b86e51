"""One run's steps for `flower web`: manifest rows, then the attempts recorded in flight (issue #29)."""

from __future__ import annotations

from flower.web.detail import _steps


def record(session: str, workflow: str, status: str, machine: str = "lead-1", label: str = "two") -> dict[str, str]:
    return {"session_id": session, "label": label, "workflow_id": workflow, "workflow_status": status,
            "machine": machine}


def test_finished_rows_come_first_with_their_generations_and_machine() -> None:
    rows = [{"step": "one", "ok": True, "session_id": "s2", "retired": ["s1"], "cost_usd": 0.5}]
    (step,) = _steps(rows, [record("s1", "run", "PENDING", label="one")], running=True)
    assert (step["step"], step["state"], step["sessions"], step["handoffs"]) == ("one", "done", ["s1", "s2"], 1)
    assert step["machine"] == "lead-1" and step["branch"] == "run"


def test_an_attempt_no_row_names_is_running_done_or_unfinished_by_its_workflow() -> None:
    flying = [record("s3", "run", "PENDING"), record("s4", "run/each[1]", "SUCCESS", "w1", "each[1]"),
              record("s5", "run/each[2]", "ERROR", "w1", "each[2]")]
    assert [(s["step"], s["state"], s["machine"]) for s in _steps([], flying, running=True)] == [
        ("two", "running", "lead-1"), ("each[1]", "done", "w1"), ("each[2]", "failed", "w1")]
    assert _steps([], flying[:1], running=False)[0]["state"] == "unfinished"  # its process died


def test_a_failed_or_interrupted_row_keeps_its_state() -> None:
    rows = [{"step": "one", "ok": False, "session_id": "s1"},
            {"step": "two", "ok": False, "session_id": "s2", "state": "interrupted"}]
    assert [s["state"] for s in _steps(rows, [], running=False)] == ["failed", "interrupted"]
