"""The live view's lines for issue #17: retries say attempt n/N, the wait and the endpoint; the endpoint's
going and coming back; a degraded handoff's reason; the cost of a session counted once (items 2, 10)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from flower.agent.events import Event
from flower.cli.live import LiveView, answer_target


def view() -> tuple[LiveView, io.StringIO]:
    sink = io.StringIO()
    return LiveView(threshold=1000, file=sink, live=False, clock=lambda: 0.0), sink


def test_retry_lines_name_attempt_wait_and_endpoint() -> None:
    live, sink = view()
    live.update(Event("retry", "API Error: 529 Overloaded", payload={
        "kind": "transient", "delay": 4.06, "attempt": 2, "max_attempts": 6, "endpoint": "http://127.0.0.1:8080"}))
    live.update(Event("retry", "unknown", payload={  # the CLI's own api_retry, as the runtime passes it on
        "attempt": 1, "max_retries": 10, "retry_delay_ms": 512, "error_status": None, "error": "unknown",
        "endpoint": "https://api.anthropic.com"}))
    assert sink.getvalue().splitlines() == [
        "~ retry 2/6 (transient) in 4.1s to http://127.0.0.1:8080: API Error: 529 Overloaded",
        "~ retry 1/10 in 0.5s to https://api.anthropic.com: unknown",
    ]


def test_endpoint_and_window_events_are_shown_and_the_threshold_follows() -> None:
    live, sink = view()
    live.update(Event("system", "endpoint http://h:1 is unreachable: probing it for up to 600s",
                      payload={"subtype": "endpoint_down"}))
    live.update(Event("system", "endpoint http://h:1 is back after 12s", payload={"subtype": "endpoint_back"}))
    live.update(Event("system", "model m: window 200,000 tokens, handoff threshold 150,000",
                      payload={"subtype": "window", "threshold": 150_000}))
    live.update(Event("system", "init", payload={"subtype": "init"}))  # not shown
    assert sink.getvalue().splitlines() == [
        "! endpoint http://h:1 is unreachable: probing it for up to 600s",
        "! endpoint http://h:1 is back after 12s",
        "! model m: window 200,000 tokens, handoff threshold 150,000",
    ]
    assert live.threshold == 150_000


def test_a_degraded_handoff_says_why() -> None:
    live, sink = view()
    live.update(Event("handoff", "doc", payload={"generation": 2, "path": "/n/h.md", "degraded": True,
                                                 "reason": "the handoff was incomplete"}))
    assert "# handoff (degraded: the handoff was incomplete): generation 2 continues from /n/h.md" in sink.getvalue()


def test_a_sessions_running_total_is_counted_once() -> None:
    live, _ = view()
    for total in (0.1, 0.25):  # one session: the work, then the handoff round
        live.update(Event("result", "", payload={"session_id": "s1", "cost_usd": total, "turns": 1}))
    live.update(Event("result", "", payload={"session_id": "s2", "cost_usd": 0.05, "turns": 1}))
    assert round(live.cost, 6) == 0.3 and live.turns == 3


def test_a_new_process_after_a_retry_starts_a_new_total() -> None:
    live, _ = view()
    live.update(Event("result", "", payload={"session_id": "s1", "cost_usd": 0.4, "turns": 1}))
    live.update(Event("retry", "x", payload={"kind": "transient", "attempt": 2, "max_attempts": 6}))
    live.update(Event("result", "", payload={"session_id": "s1", "cost_usd": 0.4, "turns": 1}))  # resumed
    assert round(live.cost, 6) == 0.8


LONG_ANSWER = "\n".join(f"answer line {n}" for n in range(40))


def test_prose_on_the_way_is_cut_with_a_hint_and_the_answer_is_printed_whole() -> None:
    """Issue #28 item 5: main-thread prose that a tool call follows is cut to 6 lines and says so; the prose a
    result follows is the answer, printed whole and unindented, in a pipe as on a terminal."""
    live, sink = view()
    live.update(Event("text", LONG_ANSWER, payload={"agent": "main"}))
    live.update(Event("tool_call", "", "Read", {"agent": "main", "id": "r1", "input": {"file_path": "a"}}))
    live.update(Event("text", "sub prose is never shown", payload={"agent": "t9"}))
    live.update(Event("text", LONG_ANSWER, payload={"agent": "main"}))
    live.update(Event("result", "ok", payload={"cost_usd": 0.1, "turns": 2}))
    lines = sink.getvalue().splitlines()
    cut = lines.index("  ... (34 more lines; the final answer is printed whole)")
    assert lines[:cut] == [f"  answer line {n}" for n in range(6)]
    assert lines[cut + 1].startswith("- context") and lines[cut + 2] == "* Read a"  # a status line in a pipe
    start = lines.index("answer line 0")
    assert lines[start:start + 40] == LONG_ANSWER.splitlines()
    assert "sub prose is never shown" not in sink.getvalue()


def test_prose_still_held_when_the_view_closes_is_printed_whole() -> None:
    sink = io.StringIO()
    with LiveView(threshold=1000, file=sink, live=False, clock=lambda: 0.0) as live:
        live.update(Event("text", LONG_ANSWER, payload={"agent": "main"}))
    assert sink.getvalue().splitlines()[:40] == LONG_ANSWER.splitlines()


def test_a_switch_to_the_fallback_model_is_one_line() -> None:
    from claude_agent_sdk import SystemMessage

    from flower.agent.events import to_events

    live, sink = view()
    data = {"type": "system", "subtype": "model_fallback", "trigger": "overloaded", "original_model": "opus-x",
            "fallback_model": "sonnet-y", "content": "Switched", "session_id": "s1"}
    [event] = to_events(SystemMessage(subtype="model_fallback", data=data))
    assert (event.kind, event.payload["subtype"], event.payload["model"], event.payload["fallback_model"],
            event.payload["trigger"]) == ("system", "model_fallback", "opus-x", "sonnet-y", "overloaded")
    live.update(event)
    assert sink.getvalue().splitlines() == [
        "! model opus-x failed (overloaded): this turn runs on the fallback sonnet-y"]


def test_a_typed_reply_shows_its_value() -> None:
    live, sink = view()
    live.update(Event("tool_call", "", tool="StructuredOutput",
                      payload={"id": "t1", "input": {"files": 2, "names": ["a.txt"]}}))
    live.update(Event("tool_call", "", tool="Bash", payload={"id": "t2", "input": {"command": "ls"}}))
    assert sink.getvalue().splitlines() == ['* StructuredOutput {"files": 2, "names": ["a.txt"]}', "* Bash ls"]


def test_an_approval_is_shown_with_how_to_answer_it_and_how_it_ended() -> None:
    sink = io.StringIO()
    live = LiveView(threshold=1000, file=sink, live=False, clock=lambda: 0.0, answer_to="/tmp/proj/runs")
    about = {"tool": "Bash", "rule": "Bash(git push:*)", "agent": "shipper", "call": "git push origin main"}
    for state, answer in (("asked", ""), ("answered", "yes, go"), ("answered", "no: frozen"), ("declined", "later"),
                          ("timeout", "")):
        live.update(Event("ask", "Approve ...", payload={"id": "q1", "state": state, "answer": answer,
                                                          "approval": about}))
    live.update(Event("ask", "Approve ...", payload={"id": "q1", "state": "timeout", "answer": "the wait was cut short",
                                                      "approval": about}))  # a Ctrl-C ended the wait
    live.update(Event("ask", "Which colour?", payload={"id": "q2", "state": "asked"}))  # not an approval
    assert sink.getvalue().splitlines() == [
        "? q1 approve shipper's Bash: git push origin main",
        "  flower answer /tmp/proj/runs q1 yes|no [reason]   (rule Bash(git push:*))",
        "+ q1 approved: go",
        "x q1 denied: frozen",
        "x q1 denied: later",
        "x q1 denied: nobody answered in time",
        "x q1 denied: the wait was cut short",
    ]


def test_the_approval_hint_names_the_runs_real_run_dir_or_store(tmp_path: Path) -> None:
    """What each command's live view is given to print after `flower answer`: the run dir a SQLite run's
    `human.db` is in, or `--store DSN RUN_ID` for a run whose store is PostgreSQL (never the DSN itself)."""

    class Store:
        def __init__(self, dsn: str) -> None:
            self.dsn = dsn

    runtime = SimpleNamespace(run_dir=tmp_path / "runs", run_id="20261205T1-1-a", store=None)
    assert answer_target(runtime) == str(tmp_path / "runs")
    runtime.store = SimpleNamespace(base=Store("postgresql://u:secret@h/db"))
    assert answer_target(runtime) == "--store DSN 20261205T1-1-a"
