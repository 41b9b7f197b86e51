"""OpenTelemetry spans for a run, derived from its events (B-14).

A `SpanRecorder` (`flower.runtime.spans`) consumes the runtime's `Event`s (it sits in front of `on_event`) and turns them into spans
with the GenAI semantic conventions, so Langfuse, Phoenix, Logfire or Jaeger show a flower run:

    run <run_id>                         (optional: `run_span()`, or any span of the caller's)
    └ invoke_agent <spec>                one step (gen_ai.operation.name = invoke_agent)
      ├ generation 1                     one session of the step (S-22)
      │ ├ chat <model>                   one API message of the main thread, with its token usage
      │ ├ execute_tool Bash              one tool call (spilled chars, denial)
      │ ├ invoke_agent <worker type>     one subagent dispatch, named by the worker type
      │ │ ├ chat <model>
      │ │ └ execute_tool Read
      │ └ retry                          the runtime's wait before resuming the same session (L-4)
      ├ handoff                          generation 1 hands over (S-22)
      └ generation 2 ...

Tracing is off unless a tracer provider is configured: the global one (`trace.set_tracer_provider`, what
Logfire/Phoenix/Langfuse setups do), one given to `set_provider()`, or the CLI's `--otlp URL`. Off, the
runtime's callback is passed through untouched and no span object is ever made.

Invariants:
- Spans are made from events only; the runtime's only part is to call `traced(on_event)`.
- Token usage is counted once per API message (an API message may arrive as several SDK messages).
- Every span a step opened is ended by the step's end event, children before parents.
- A fault in the recorder is logged and never reaches the run or the user's callback.
- Span start times are the times events arrived; a chat span runs from the thread's previous event (the
  request went out then) to the message's arrival.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib import metadata

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer, TracerProvider

from flower.agent.events import Event, OnEvent
from flower.runtime.spans import SpanRecorder

__all__ = ["SpanRecorder", "enabled", "run_span", "set_provider", "traced", "tracer"]


TRACER_NAME = "flower"

_provider: TracerProvider | None = None


def set_provider(provider: TracerProvider | None) -> TracerProvider | None:
    """Use `provider` for flower's spans instead of the global one (None: back to the global); returns the
    previous setting."""
    global _provider
    previous, _provider = _provider, provider
    return previous


def enabled() -> bool:
    """Whether a real tracer provider is configured (flower's own, or the global one)."""
    if _provider is not None:
        return True
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def tracer() -> Tracer:
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    return provider.get_tracer(TRACER_NAME, _version())


def _version() -> str:
    try:
        return metadata.version("flower-runtime")
    except metadata.PackageNotFoundError:
        return "0"


def traced(on_event: OnEvent | None) -> OnEvent | None:
    """`on_event` with a fresh `SpanRecorder` in front when tracing is on; `on_event` itself otherwise."""
    if not enabled():
        return on_event
    recorder = SpanRecorder(tracer())

    def both(event: Event) -> None:
        recorder(event)
        if on_event is not None:
            on_event(event)

    return both


@contextlib.contextmanager
def run_span(run_id: str, name: str | None = None) -> Iterator[Span | None]:
    """A span around a whole run (several steps); steps started inside it become its children."""
    if not enabled():
        yield None
        return
    attributes = {"flower.run_id": run_id, "gen_ai.workflow.name": name or run_id}
    with tracer().start_as_current_span(f"run {name or run_id}", attributes=attributes) as span:
        yield span
