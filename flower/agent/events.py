"""Events: one flat, frozen record for UIs, never an SDK object (L-3).

`to_events(message)` turns one SDK message into zero or more `Event`s. A synthetic API-error message
(model `<synthetic>` with an error) becomes an `error` event, never result text; the CLI's switch to the
fallback model becomes a `system` event of subtype `model_fallback` (primary, fallback, trigger). Kinds not recognised
become `unknown`, so a newer SDK cannot crash a UI. `emit()` calls a user callback and swallows its
exceptions: a broken UI must not kill a long run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from flower.agent.eventinfo import usage_of
from flower.agent.usage import message_context

__all__ = ["Event", "EventKind", "OnEvent", "emit", "to_events"]

log = logging.getLogger(__name__)

EventKind = Literal[
    "text", "thinking", "prompt", "tool_call", "tool_result", "result", "error", "retry", "handoff",
    "step", "system", "interrupt", "unknown", "ask", "mail",
]


@dataclass(frozen=True)
class Event:
    """Something that happened in a run, flat enough for any UI."""

    kind: EventKind
    """What happened."""
    text: str = ""
    """Human-readable text (prose, a tool's output, an error message)."""
    tool: str | None = None
    """The tool's name for tool_call / tool_result events."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    """Plain data: `agent` ("main" or the Agent call's id), ids, usage, cost, ..."""

    @property
    def on_main(self) -> bool:
        return bool(self.payload.get("agent", "main") == "main")


OnEvent = Callable[[Event], Any]


def _agent(message: Any) -> str:
    return getattr(message, "parent_tool_use_id", None) or "main"


def _result_text(block: ToolResultBlock) -> str:
    content = block.content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content or "")


def _assistant(message: AssistantMessage) -> Iterator[Event]:
    agent = _agent(message)
    # Context of this API message (S-24); the same message may arrive as several SDK messages.
    usage = {"message_id": message.message_id, "context": message_context(message.usage),
             "model": message.model, "usage": usage_of({"usage": message.usage})}
    if message.model == "<synthetic>" and message.error:
        text = " ".join(b.text for b in message.content if isinstance(b, TextBlock))
        yield Event("error", text, payload={"agent": agent, "error": message.error})
        return
    for block in message.content:
        if isinstance(block, TextBlock):
            yield Event("text", block.text, payload={"agent": agent, **usage})
        elif isinstance(block, ThinkingBlock):
            yield Event("thinking", block.thinking, payload={"agent": agent, **usage})
        elif isinstance(block, ToolUseBlock):
            yield Event("tool_call", "", block.name,
                        {"agent": agent, "id": block.id, "input": dict(block.input), **usage})


def _user(message: UserMessage) -> Iterator[Event]:
    agent = _agent(message)
    if isinstance(message.content, str):
        yield Event("prompt", message.content, payload={"agent": agent})
        return
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            yield Event("tool_result", _result_text(block), None,
                        {"agent": agent, "id": block.tool_use_id, "is_error": bool(block.is_error)})
        elif isinstance(block, TextBlock):
            yield Event("prompt", block.text, payload={"agent": agent})


def to_events(message: Any) -> list[Event]:
    """The events one SDK message stands for."""
    if isinstance(message, AssistantMessage):
        return list(_assistant(message))
    if isinstance(message, UserMessage):
        return list(_user(message))
    if isinstance(message, ResultMessage):
        kind: EventKind = "error" if message.is_error else "result"
        # An error result without text (a budget or turn cap) says what stopped it through `errors`.
        said = message.result or ("; ".join(message.errors or []) or message.subtype if message.is_error else "")
        return [Event(kind, said, payload={
            "session_id": message.session_id, "cost_usd": message.total_cost_usd, "turns": message.num_turns,
            "subtype": message.subtype, "api_error_status": message.api_error_status})]
    if isinstance(message, SystemMessage):
        if message.subtype == "api_retry":
            return [Event("retry", str(message.data.get("error", "")), payload=dict(message.data))]
        session = message.data.get("session_id") if isinstance(message.data, Mapping) else None
        if message.subtype == "model_fallback":
            return [_fallback(message.data, session)]
        return [Event("system", message.subtype, payload={"subtype": message.subtype, "session_id": session})]
    return [Event("unknown", type(message).__name__)]


def _fallback(data: Mapping[str, Any], session: Any) -> Event:
    """The CLI switched models for the rest of the turn: its primary one was overloaded, failing or missing."""
    primary, fallback = str(data.get("original_model") or "?"), str(data.get("fallback_model") or "?")
    trigger = str(data.get("trigger") or "")
    text = f"model {primary} failed ({trigger or 'unavailable'}): this turn runs on the fallback {fallback}"
    return Event("system", text, payload={"subtype": "model_fallback", "session_id": session, "model": primary,
                                          "fallback_model": fallback, "trigger": trigger})


_failed: set[int] = set()


def emit(callback: OnEvent | None, event: Event) -> None:
    """Call `callback(event)`; its exceptions are logged (the first with its traceback), never raised."""
    if callback is None:
        return
    try:
        callback(event)
    except Exception as exc:  # a UI callback must never kill the run
        if id(callback) in _failed:
            log.debug("on_event callback failed again (%s event): %s", event.kind, exc)
        else:
            _failed.add(id(callback))
            log.exception("on_event callback failed for a %s event; later failures are logged at debug level",
                          event.kind)
