"""Tracing a real run (issue #18, B-14): the demo's scripted run through the real CLI, recorded by the
OpenTelemetry SDK's in-memory exporter, shows the span tree with the GenAI attributes.

The demo has everything a trace must show: two workers (tester, fixer), a spilled test log, two denials, a
resumed second step and a handoff to a second generation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.otlp import OtlpReceiver

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from flower.cli.demo import run_demo  # noqa: E402
from flower.runtime import tracing  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    previous = tracing.set_provider(provider)
    try:
        yield memory
    finally:
        tracing.set_provider(previous)


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


async def test_a_run_traces_steps_generations_workers_tools_spills_and_handoffs(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    with tracing.run_span("demo", "calc demo"):
        run = await run_demo(tmp_path / "demo")
    assert [s.ok for s in run.steps] == [True, True]
    spans = list(exporter.get_finished_spans())
    assert all(s.end_time is not None and s.start_time is not None and s.end_time >= s.start_time for s in spans)
    trace_ids = {s.context.trace_id for s in spans if s.context is not None}
    assert len(trace_ids) == 1  # one run, one trace

    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "run calc demo" and _attr(root, "flower.run_id") == "demo"
    steps = _children(spans, root)
    assert [s.name for s in steps] == ["invoke_agent lead", "invoke_agent lead"]
    assert [_attr(s, "flower.step") for s in steps] == ["survey-and-fix", "verify"]
    for step, result in zip(steps, run.steps):
        assert _attr(step, "gen_ai.operation.name") == "invoke_agent" and _attr(step, "session.id") == "demo"
        assert _attr(step, "gen_ai.agent.name") == "lead" and _attr(step, "flower.ok") is True
        assert _attr(step, "gen_ai.conversation.id") == result.session_id
        assert _attr(step, "flower.cost_usd") == pytest.approx(result.cost_usd)
        assert _attr(step, "gen_ai.usage.input_tokens") > 0 and _attr(step, "gen_ai.usage.output_tokens") > 0

    first, second = steps
    (gen1,) = [s for s in _children(spans, first)]
    assert gen1.name == "generation 1"
    under = _children(spans, gen1)
    workers = [s for s in under if _attr(s, "gen_ai.operation.name") == "invoke_agent"]
    assert [w.name for w in workers] == ["invoke_agent tester", "invoke_agent fixer"]
    assert [_attr(w, "gen_ai.agent.name") for w in workers] == ["tester", "fixer"]
    assert all(_attr(w, "flower.reply_chars") > 0 and _attr(w, "gen_ai.usage.output_tokens") > 0 for w in workers)
    tester, fixer = workers
    tester_tools = [s for s in _children(spans, tester) if _attr(s, "gen_ai.operation.name") == "execute_tool"]
    assert [s.name for s in tester_tools] == ["execute_tool Bash", "execute_tool Write", "execute_tool Bash"]
    (spilled,) = [s for s in spans if _attr(s, "flower.spill_path")]
    assert spilled in tester_tools and _attr(spilled, "flower.spilled_chars") > 15_000
    assert str(_attr(spilled, "flower.spill_path")).startswith(str(run.repo / ".flower"))
    assert {s.name for s in _children(spans, fixer)} >= {"execute_tool Edit", "execute_tool Bash"}
    assert any(s.name.startswith("chat ") for s in _children(spans, tester))  # the worker's own API messages

    main_tools = [s for s in under if _attr(s, "gen_ai.operation.name") == "execute_tool"]
    denied = [s for s in main_tools if _attr(s, "flower.denied")]
    assert [s.name for s in denied] == ["execute_tool Bash", "execute_tool Write"]
    assert all("Dispatch a subagent" in str(_attr(s, "flower.denial")) for s in denied)
    assert _attr(gen1, "flower.denials") == 2 and _attr(gen1, "flower.spills") == 1
    chats = [s for s in under if _attr(s, "gen_ai.operation.name") == "chat"]
    assert chats and all(_attr(c, "flower.context") > 0 for c in chats)
    assert all(_attr(c, "gen_ai.usage.input_tokens") > 0 for c in chats)

    second_children = _children(spans, second)
    assert [s.name for s in sorted(second_children, key=lambda s: s.start_time or 0)] == [
        "generation 1", "handoff", "generation 2"]
    (handoff,) = [s for s in second_children if s.name == "handoff"]
    assert _attr(handoff, "flower.handoff.generation") == 2
    assert str(_attr(handoff, "flower.handoff.path")).endswith(".md")
    retired_gen = next(s for s in second_children if s.name == "generation 1")
    assert _attr(retired_gen, "gen_ai.conversation.id") == run.steps[1].retired[0]


async def test_tracing_is_off_without_a_provider() -> None:
    """No provider configured: the runtime's callback is passed through untouched."""
    def callback(event: Any) -> None:
        return None

    assert not tracing.enabled()
    assert tracing.traced(callback) is callback and tracing.traced(None) is None


def test_cli_otlp_exports_the_runs_spans(scripted_api: Any, tmp_path: Path) -> None:
    """`flower once --otlp URL --events`: the spans reach an OTLP/HTTP collector; events print as JSON lines."""
    import json

    from click.testing import CliRunner

    from flower.cli import cli
    from flower.testing import text, tool_use

    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    scripted_api.script([tool_use("Read", {"file_path": str(tmp_path / "ws" / "a.txt")}), text("read it")])
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    collector = OtlpReceiver()
    try:
        env = scripted_api.cli_env(tmp_path / "home")
        result = CliRunner().invoke(cli, ["once", "read a.txt", "-w", str(tmp_path / "ws"), "-r",
                                          str(tmp_path / "runs"), "--otlp", collector.url, "--events"],
                                    env=env, catch_exceptions=False)
    finally:
        collector.stop()
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["kind"] for e in lines][0] == "step" and lines[-1]["kind"] == "summary" and lines[-1]["ok"]
    assert any(e["kind"] == "tool_call" and e["tool"] == "Read" for e in lines)
    assert set(collector.paths) == {"/v1/traces"}
    names = sorted(s.name for s in collector.spans)
    assert names[:1] == ["chat claude-opus-5-5"] and "execute_tool Read" in names
    assert {"invoke_agent once", "generation 1"} <= set(names) and any(n.startswith("run once") for n in names)
