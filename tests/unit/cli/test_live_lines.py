"""The live view's lines for issue #17: retries say attempt n/N, the wait and the endpoint; the endpoint's
going and coming back; a degraded handoff's reason; the cost of a session counted once (items 2, 10)."""

from __future__ import annotations

import io

from flower.agent.events import Event
from flower.cli.live import LiveView


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
