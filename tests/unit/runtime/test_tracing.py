"""Tracing's pure parts (issue #18, B-14): the OTLP endpoint, and the event readings spans rely on."""

from __future__ import annotations

import pytest

from flower import texts
from flower.agent.eventinfo import denial_reason, dispatch_of, spill_of, usage_of
from flower.cli.otel import otlp_endpoint
from flower.errors import ConfigError


def test_otlp_endpoint_gets_the_traces_path_only_when_it_has_none() -> None:
    assert otlp_endpoint("http://localhost:4318") == "http://localhost:4318/v1/traces"
    assert otlp_endpoint("http://localhost:4318/") == "http://localhost:4318/v1/traces"
    assert otlp_endpoint("https://collector/otlp/v1/traces") == "https://collector/otlp/v1/traces"
    with pytest.raises(ConfigError, match="localhost:4318"):
        otlp_endpoint("localhost:4318")


def test_event_readings() -> None:
    pointer = texts.SPILL_POINTER.format(chars="12,345", path="/ws/.flower/spill/ab.txt")
    assert spill_of(f"head\n{pointer}\nrest") == (12345, "/ws/.flower/spill/ab.txt")
    assert spill_of("no pointer") is None
    assert denial_reason("PreToolUse:Bash hook error: Dispatch a subagent.") == "Dispatch a subagent."
    assert denial_reason("PreToolUse:Bash hook error: x", is_error=False) is None
    assert denial_reason("Exit code 1") is None
    assert dispatch_of("Agent", {"input": {"subagent_type": "tester", "description": "d", "prompt": "p"}}) == (
        "tester", "d", "p")
    assert dispatch_of("Bash", {"input": {}}) is None
    assert usage_of({"usage": {"input_tokens": 3, "cache_read_input_tokens": 5}}) == {
        "input_tokens": 3, "output_tokens": 0, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 0}


def test_pricing_follows_the_clis_catalog() -> None:
    from flower.agent.usage import DEFAULT_TIER, message_cost, tier_for

    assert tier_for("claude-opus-5-5") != tier_for("claude-opus-5")  # the longest id wins
    assert tier_for("claude-opus-4-1-20250805").input == 15 and tier_for("claude-sonnet-4-5-20250929").input == 3
    assert tier_for("some-future-model") == DEFAULT_TIER and tier_for(None) == DEFAULT_TIER
    # measured against the bundled CLI: 1M tokens of each kind on claude-opus-5-5 cost 4 / 20 / 0.2 / 5 USD
    one = 1_000_000
    assert [message_cost("claude-opus-5-5", {k: one}) for k in (
        "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")] == [4, 20, 0.2, 5]


def test_span_recorder_on_synthetic_events_retry_and_unfinished_calls() -> None:
    """Retry spans last until the next event; a call without a result is closed, marked, at the step's end."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import StatusCode

    from flower.agent.events import Event
    from flower.runtime.tracing import SpanRecorder

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    record = SpanRecorder(provider.get_tracer("t"))
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0}
    for event in [
        Event("step", "s", payload={"phase": "start", "agent_name": "solo", "model": "m"}),
        Event("tool_call", "", "Bash", {"agent": "main", "id": "t1", "message_id": "m1", "usage": usage,
                                        "context": 110, "input": {"command": "ls"}}),
        Event("retry", "overloaded", payload={"kind": "transient", "delay": 0.5, "attempt": 1}),
        Event("text", "back", payload={"agent": "main", "message_id": "m2", "usage": usage, "context": 120}),
        Event("text", "again", payload={"agent": "main", "message_id": "m2", "usage": usage, "context": 120}),
        Event("step", "s", payload={"phase": "end", "ok": False, "error": "boom", "cost_usd": 0.01}),
    ]:
        record(event)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert set(spans) == {"invoke_agent solo", "generation 1", "chat m", "execute_tool Bash", "retry"}
    retry = spans["retry"]
    assert retry.attributes["flower.retry.kind"] == "transient" and retry.end_time >= retry.start_time
    assert spans["execute_tool Bash"].status.status_code == StatusCode.ERROR  # never got its result
    step = spans["invoke_agent solo"]
    assert step.status.status_code == StatusCode.ERROR and step.attributes["flower.retries"] == 1
    # two API messages, each counted once although m2 arrived twice
    assert step.attributes["gen_ai.usage.input_tokens"] == 220 and step.attributes["gen_ai.usage.output_tokens"] == 10
    assert len([s for s in memory.get_finished_spans() if s.name == "chat m"]) == 2
