"""B-14: what tracing costs a run, per event, measured side by side with the live view on the same events.

The demo's events (a real scripted run through the CLI: two workers, a spill, a handoff) are replayed into
(a) `traced()` with no tracer provider (tracing off: the callback is passed through, nothing is built),
(b) a `SpanRecorder` on the OpenTelemetry SDK with an in-memory exporter, and (c) the live view writing
plain lines to a buffer. A model call takes seconds; an event costs microseconds either way.
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench._table import row
from flower.cli.demo import run_demo
from flower.cli.live import LiveView
from flower.runtime import tracing

BENCH = "tracing"


def _per_event(events: list[Any], make: Any, loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        consume = make()
        for event in events:
            consume(event)
    return (time.perf_counter() - start) / loops / max(1, len(events)) * 1e6


def run(tiny: bool = False) -> list[dict[str, Any]]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    events = anyio.run(run_demo, Path(tempfile.mkdtemp(prefix="flower-bench-tracing-")) / "demo").events
    loops = 5 if tiny else 200
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))

    def recorder() -> Any:
        memory.clear()
        return tracing.SpanRecorder(provider.get_tracer("bench"))

    def live() -> Any:
        return LiveView(file=io.StringIO(), live=False).update

    def off() -> Any:
        return tracing.traced(lambda event: None)

    view = _per_event(events, live, loops)
    spans = _per_event(events, recorder, loops)
    passthrough = _per_event(events, off, loops)
    return [
        row(BENCH, "live view, per event", view, "us", None, f"{len(events)} events of the demo run"),
        row(BENCH, "span recorder on the OTel SDK, per event", spans, "us", spans / view, "vs the live view"),
        row(BENCH, "tracing off (no provider), per event", passthrough, "us", passthrough / view,
            "the callback is passed through untouched"),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
