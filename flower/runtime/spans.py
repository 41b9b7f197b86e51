"""`SpanRecorder`: one step's events turned into OpenTelemetry spans with the GenAI semantic conventions (the
span tree and the invariants are in `flower.runtime.tracing`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from flower.agent.eventinfo import USAGE_KEYS, denial_reason, dispatch_of, spill_of, usage_of
from flower.agent.events import Event

__all__ = ["PROVIDER", "SpanRecorder"]

log = logging.getLogger("flower.runtime.tracing")

PROVIDER = "anthropic"


def _ns() -> int:
    return time.time_ns()


@dataclass
class _Open:
    """A span still open, with what its children add up to."""

    span: Span
    agent: str = "main"
    cost: float = 0.0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    counts: dict[str, int] = field(default_factory=dict)

    def add_usage(self, usage: Mapping[str, int]) -> None:
        for key in USAGE_KEYS:
            self.usage[key] += usage.get(key, 0)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


def _usage_attributes(usage: Mapping[str, int]) -> dict[str, int]:
    read, write = usage.get("cache_read_input_tokens", 0), usage.get("cache_creation_input_tokens", 0)
    return {
        # The GenAI conventions count cached input in input_tokens and break it out beside.
        "gen_ai.usage.input_tokens": usage.get("input_tokens", 0) + read + write,
        "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
        "gen_ai.usage.cache_read.input_tokens": read,
        "gen_ai.usage.cache_creation.input_tokens": write,
    }


class SpanRecorder:
    """Turns one step's events into spans; call it with each event (an `on_event` callback)."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.step: _Open | None = None
        self.generation: _Open | None = None
        self.generation_number = 0
        self.dispatches: dict[str, _Open] = {}
        """Open subagent dispatch spans by the Agent call's id (= the subagent's `agent`)."""
        self.tools: dict[str, _Open] = {}
        self.retry: _Open | None = None
        self.seen: set[str] = set()
        """API message ids already counted."""
        self.last: dict[str, int] = {}
        """When each thread last did something (its next API request went out after that)."""
        self.model: str | None = None

    # --- entry --------------------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        try:
            self._on(event)
        except Exception:  # tracing must never disturb the run
            log.debug("tracing could not record a %s event", event.kind, exc_info=True)

    def _on(self, event: Event) -> None:
        now = _ns()
        if event.kind == "step" and event.payload.get("phase") == "start":
            self._start_step(event, now)
            return
        if self.step is None:
            return
        if self.retry is not None and event.kind != "retry":
            self._end(self.retry, now)
            self.retry = None
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            handler(event, now)
        agent = str(event.payload.get("agent", "main"))
        self.last[agent] = now

    # --- spans ----------------------------------------------------------------------------------------

    def _open(self, name: str, parent: _Open | None, now: int, attributes: Mapping[str, Any]) -> _Open:
        ctx = trace.set_span_in_context(parent.span) if parent is not None else otel_context.get_current()
        span = self.tracer.start_span(name, context=ctx, start_time=now, attributes=dict(attributes))
        return _Open(span)

    def _end(self, item: _Open, now: int) -> None:
        item.span.end(end_time=now)

    def _thread(self, agent: str) -> _Open | None:
        """The span a thread's chat and tool spans hang under: its dispatch, or the generation."""
        if agent != "main" and agent in self.dispatches:
            return self.dispatches[agent]
        return self.generation or self.step

    def _start_step(self, event: Event, now: int) -> None:
        if self.step is not None:  # a step that never ended (should not happen): close it first
            self._close_all(now)
        name = str(event.payload.get("agent_name") or event.text)
        self.model = event.payload.get("model") or None
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, "gen_ai.provider.name": PROVIDER,
            "flower.step": event.text,
        }
        if self.model:
            attributes["gen_ai.request.model"] = self.model
        for key in ("run_id", "resume"):
            if event.payload.get(key):
                attributes[f"flower.{key}"] = str(event.payload[key])
        if event.payload.get("run_id"):  # Phoenix and Langfuse group a run's traces by session
            attributes["session.id"] = str(event.payload["run_id"])
        self.step = self._open(f"invoke_agent {name}", None, now, attributes)
        self._start_generation(now)
        self.last["main"] = now

    def _start_generation(self, now: int) -> None:
        self.generation_number += 1
        self.generation = self._open(f"generation {self.generation_number}", self.step, now,
                                     {"flower.generation": self.generation_number})

    def _end_generation(self, now: int, session: object = None) -> None:
        gen = self.generation
        if gen is None:
            return
        for call_id in list(self.tools):
            self._end_tool(call_id, now, unfinished=True)
        for call_id in list(self.dispatches):
            self._end_dispatch(call_id, now, None, unfinished=True)
        if session:
            gen.span.set_attribute("gen_ai.conversation.id", str(session))
        gen.span.set_attributes(_usage_attributes(gen.usage))
        if gen.cost:
            gen.span.set_attribute("flower.cost_usd", round(gen.cost, 6))
        for name, value in gen.counts.items():
            gen.span.set_attribute(f"flower.{name}", value)
        self._end(gen, now)
        self.generation = None

    def _close_all(self, now: int) -> None:
        if self.retry is not None:
            self._end(self.retry, now)
            self.retry = None
        self._end_generation(now)
        if self.step is not None:
            self._end(self.step, now)
            self.step = None

    # --- events -----------------------------------------------------------------------------------

    def _on_step(self, event: Event, now: int) -> None:
        if event.payload.get("phase") != "end" or self.step is None:
            return
        step = self.step
        self._end_generation(now)
        step.span.set_attributes(_usage_attributes(step.usage))
        for name, value in step.counts.items():
            step.span.set_attribute(f"flower.{name}", value)
        cost = event.payload.get("cost_usd")
        if isinstance(cost, (int, float)):
            step.span.set_attribute("flower.cost_usd", float(cost))
            step.span.set_attribute("gen_ai.usage.cost", float(cost))
        for key in ("turns", "session_id", "context"):
            found = event.payload.get(key)
            if isinstance(found, (int, str)) and found != "":
                step.span.set_attribute(
                    "gen_ai.conversation.id" if key == "session_id" else f"flower.{key}", found)
        ok = bool(event.payload.get("ok"))
        step.span.set_attribute("flower.ok", ok)
        if not ok:
            step.span.set_status(Status(StatusCode.ERROR, str(event.payload.get("error") or "step failed")))
        self._end(step, now)
        self.step = None

    def _on_text(self, event: Event, now: int) -> None:
        self._chat(event, now)

    def _on_thinking(self, event: Event, now: int) -> None:
        self._chat(event, now)

    def _chat(self, event: Event, now: int) -> None:
        """One span per API message, from the thread's previous event to the message's arrival."""
        message_id = event.payload.get("message_id")
        if not isinstance(message_id, str) or message_id in self.seen:
            return
        self.seen.add(message_id)
        agent = str(event.payload.get("agent", "main"))
        parent = self._thread(agent)
        usage = usage_of(event.payload)
        model = str(event.payload.get("model") or self.model or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER, "gen_ai.response.id": message_id,
            **_usage_attributes(usage),
        }
        if model:
            attributes["gen_ai.response.model"] = attributes["gen_ai.request.model"] = model
        context = event.payload.get("context")
        if agent == "main" and isinstance(context, int):
            attributes["flower.context"] = context
        start = min(self.last.get(agent, now), now)
        span = self._open(f"chat {model}".strip(), parent, start, attributes)
        self._end(span, now)
        for holder in {id(x): x for x in (parent, self.generation, self.step) if x is not None}.values():
            holder.add_usage(usage)
        if agent == "main" and isinstance(context, int) and self.generation is not None:
            self.generation.span.set_attribute("flower.context", context)

    def _on_tool_call(self, event: Event, now: int) -> None:
        self._chat(event, now)
        call_id = str(event.payload.get("id") or "")
        agent = str(event.payload.get("agent", "main"))
        parent = self._thread(agent)
        dispatch = dispatch_of(event.tool, event.payload)
        if dispatch is not None:
            worker, description, brief = dispatch
            self.dispatches[call_id] = self._open(f"invoke_agent {worker}", parent, now, {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": worker,
                "gen_ai.agent.description": description, "gen_ai.provider.name": PROVIDER,
                "gen_ai.tool.call.id": call_id, "flower.brief_chars": len(brief),
            })
            if parent is not None:
                parent.count("dispatches")
            self.last[call_id] = now
            return
        self.tools[call_id] = self._open(f"execute_tool {event.tool}", parent, now, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": str(event.tool),
            "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function",
        })
        self.tools[call_id].agent = agent
        if parent is not None:
            parent.count("tool_calls")

    def _on_tool_result(self, event: Event, now: int) -> None:
        call_id = str(event.payload.get("id") or "")
        if call_id in self.dispatches:
            self._end_dispatch(call_id, now, event)
        elif call_id in self.tools:
            self._end_tool(call_id, now, event=event)

    def _end_tool(self, call_id: str, now: int, *, event: Event | None = None, unfinished: bool = False) -> None:
        item = self.tools.pop(call_id)
        span = item.span
        if unfinished:
            span.set_status(Status(StatusCode.ERROR, "no result before the session ended"))
        elif event is not None:
            text, is_error = event.text or "", bool(event.payload.get("is_error"))
            span.set_attribute("flower.result_chars", len(text))
            spill = spill_of(text)
            if spill is not None:
                span.set_attributes({"flower.spilled_chars": spill[0], "flower.spill_path": spill[1]})
                self._count_up("spills")
                self._count_up("spilled_chars", spill[0])
            reason = denial_reason(text, is_error)
            if reason is not None:
                span.set_attributes({"flower.denied": True, "flower.denial": reason[:500]})
                self._count_up("denials")
            if is_error:
                span.set_status(Status(StatusCode.ERROR, (reason or text.strip().split("\n")[0])[:200]))
        self._end(item, now)

    def _end_dispatch(self, call_id: str, now: int, event: Event | None, unfinished: bool = False) -> None:
        item = self.dispatches.pop(call_id)
        for tool_id in [t for t, open_ in self.tools.items() if open_.agent == call_id]:
            self._end_tool(tool_id, now, unfinished=True)
        span = item.span
        span.set_attributes(_usage_attributes(item.usage))
        for name, value in item.counts.items():
            span.set_attribute(f"flower.{name}", value)
        if unfinished:
            span.set_status(Status(StatusCode.ERROR, "no reply before the session ended"))
        elif event is not None:
            span.set_attribute("flower.reply_chars", len(event.text or ""))
            if event.payload.get("is_error"):
                span.set_status(Status(StatusCode.ERROR, (event.text or "").strip()[:200]))
        self._end(item, now)

    def _count_up(self, name: str, n: int = 1) -> None:
        for holder in (self.generation, self.step):
            if holder is not None:
                holder.count(name, n)

    def _on_result(self, event: Event, now: int) -> None:
        session = event.payload.get("session_id")
        if session and self.generation is not None:
            self.generation.span.set_attribute("gen_ai.conversation.id", str(session))
        cost = event.payload.get("cost_usd")
        if isinstance(cost, (int, float)) and self.generation is not None:
            self.generation.cost += float(cost)

    def _on_error(self, event: Event, now: int) -> None:
        if self.generation is not None:
            self.generation.span.add_event("error", {"message": (event.text or "")[:500]})

    def _on_retry(self, event: Event, now: int) -> None:
        if self.retry is not None:
            self._end(self.retry, now)
        attributes: dict[str, Any] = {"flower.error": (event.text or "")[:500]}
        for key in ("kind", "attempt", "delay"):
            value = event.payload.get(key)
            if isinstance(value, (int, float, str)):
                attributes[f"flower.retry.{key}"] = value
        self.retry = self._open("retry", self.generation or self.step, now, attributes)
        self._count_up("retries")

    def _on_handoff(self, event: Event, now: int) -> None:
        retired = event.payload.get("retired")
        self._end_generation(now, retired)
        attributes: dict[str, Any] = {"flower.handoff_chars": len(event.text or "")}
        for key in ("generation", "path", "retired", "degraded"):
            value = event.payload.get(key)
            if isinstance(value, (int, str, bool)):
                attributes[f"flower.handoff.{key}"] = value
        self._end(self._open("handoff", self.step, now, attributes), now)
        if self.step is not None:
            self.step.count("handoffs")
        self.generation_number = int(event.payload.get("generation") or self.generation_number + 1) - 1
        self._start_generation(now)
        self.last["main"] = now

    def _on_interrupt(self, event: Event, now: int) -> None:
        if self.generation is not None:
            self.generation.span.add_event("interrupt", {"message": (event.text or "")[:500]})
