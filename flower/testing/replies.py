"""What a scripted step answers: replies, errors, drops, and how they are put on the wire.

A step is one of:
- `Reply` — an assistant message made of blocks (`Text`, `ToolUse`, `Thinking`), streamed as a real SSE
  stream (or sent as one JSON message when the request says `stream: false`);
- `Error` — an HTTP error with the real API's error body (`{"type": "error", "error": {...}}`);
- `Drop` — the connection is cut mid-stream after a few events.

Every step may carry a `delay` (seconds before the answer starts). Usage numbers can be set per reply; when
`input_tokens` is left out it is derived from the request's size (about 4 characters a token), so
context-size logic sees a growing context without a test computing it.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "Block",
    "Drop",
    "Error",
    "Reply",
    "Step",
    "Text",
    "Thinking",
    "ToolUse",
    "Usage",
    "api_error",
    "prompt_too_long",
    "structured",
    "text",
    "thinking",
    "tool_use",
]

DEFAULT_MODEL = "claude-opus-5-5"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Usage:
    """Token usage reported for one reply; `None` input means "derive it from the request size"."""

    input_tokens: int | None = None
    """Uncached input tokens; `None` derives about one token per 4 characters of the request body."""
    output_tokens: int = 10
    """Output tokens of the reply."""
    cache_read_input_tokens: int = 0
    """Input tokens served from the prompt cache."""
    cache_creation_input_tokens: int = 0
    """Input tokens written to the prompt cache."""

    def resolve(self, request_chars: int, cached_chars: int = 0) -> dict[str, int]:
        """Concrete numbers; a derived input is split into cache read (the `cached_chars` prefix), cache
        creation (the rest, which the next request can read) and a token of uncached input."""
        if self.input_tokens is None and cached_chars:
            total = max(1, request_chars // 4)
            read = min(total - 1, cached_chars // 4)
            return {"input_tokens": 1, "output_tokens": self.output_tokens,
                    "cache_read_input_tokens": read + self.cache_read_input_tokens,
                    "cache_creation_input_tokens": total - read - 1 + self.cache_creation_input_tokens}
        derived = max(1, request_chars // 4)
        return {
            "input_tokens": self.input_tokens if self.input_tokens is not None else derived,
            "output_tokens": self.output_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
        }


@dataclass(frozen=True)
class Text:
    """A text block."""

    text: str


@dataclass(frozen=True)
class Thinking:
    """A thinking block (streamed as `thinking_delta` plus a `signature_delta`)."""

    thinking: str
    signature: str = "fake-signature"


@dataclass(frozen=True)
class ToolUse:
    """A `tool_use` block; `id` is generated (`toolu_fake…`) when left out."""

    name: str
    input: Mapping[str, Any]
    id: str | None = None


Block = Union[Text, Thinking, ToolUse]


@dataclass(frozen=True)
class Reply:
    """One assistant message. Several `ToolUse` blocks make parallel calls."""

    blocks: tuple[Block, ...]
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    """Defaults to `tool_use` when a block is a ToolUse, else `end_turn`."""
    delay: float = 0.0
    """Seconds to wait before answering (a slow model)."""
    chunk: int = 40
    """Characters per `text_delta` / `input_json_delta` event."""


@dataclass(frozen=True)
class Error:
    """An HTTP error answer with the real API's body shape."""

    status: int
    message: str = ""
    type: str | None = None
    """Defaults to the real API's type for the status (529 -> overloaded_error, ...)."""
    delay: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    """Extra response headers (a subscription's `anthropic-ratelimit-unified-*` ones, say)."""


@dataclass(frozen=True)
class Drop:
    """Start a stream, send `after_events` SSE events, then cut the connection (ECONNRESET)."""

    after_events: int = 3
    delay: float = 0.0


Step = Union[Reply, Error, Drop]

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_ERROR_MESSAGES: dict[int, str] = {
    429: "Number of request tokens has exceeded your per-minute rate limit (fake)",
    500: "Internal server error (fake)",
    529: "Overloaded (fake)",
}


# --- constructors: the short forms scripts are written in -------------------------------------


def text(content: str, *, usage: Usage | None = None, delay: float = 0.0) -> Reply:
    """A reply with one text block."""
    return Reply((Text(content),), usage=usage or Usage(), delay=delay)


def thinking(thought: str, then: str, *, usage: Usage | None = None) -> Reply:
    """A reply that thinks, then says `then`."""
    return Reply((Thinking(thought), Text(then)), usage=usage or Usage())


def tool_use(
    name: str,
    input: Mapping[str, Any] | None = None,
    *more: tuple[str, Mapping[str, Any]],
    say: str | None = None,
    usage: Usage | None = None,
    delay: float = 0.0,
) -> Reply:
    """A reply calling `name(input)`; each extra `(name, input)` pair is a parallel call in the same message."""
    blocks: list[Block] = [Text(say)] if say else []
    blocks.append(ToolUse(name, dict(input or {})))
    blocks.extend(ToolUse(n, dict(i)) for n, i in more)
    return Reply(tuple(blocks), usage=usage or Usage(), delay=delay)


def structured(value: Mapping[str, Any], *, say: str | None = None, usage: Usage | None = None) -> Reply:
    """A final reply that gives `value` as the step's structured output: a call to the `StructuredOutput`
    tool the CLI offers when a step has an output type (the CLI checks `value` against the schema, so a
    script may give a wrong one on purpose). A session without an output type has no such tool, and the
    fake refuses the step (`check_tools`)."""
    return tool_use("StructuredOutput", value, say=say, usage=usage)


def api_error(status: int, message: str = "", *, type: str | None = None, delay: float = 0.0,
              headers: Mapping[str, str] | None = None) -> Error:
    """An HTTP error step (`api_error(529)` is an overloaded error), with any extra response `headers`."""
    return Error(status, message, type, delay, tuple((headers or {}).items()))


def prompt_too_long(tokens: int = 1_000_001, maximum: int = 1_000_000) -> Error:
    """The real API's 400 for a context that does not fit the window."""
    return Error(400, f"prompt is too long: {tokens} tokens > {maximum} maximum")


# --- wire rendering ---------------------------------------------------------------------------


def error_body(step: Error) -> dict[str, Any]:
    kind = step.type or _ERROR_TYPES.get(step.status, "api_error")
    message = step.message or _ERROR_MESSAGES.get(step.status, f"{kind} (fake)")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _block_id(block: ToolUse) -> str:
    return block.id or f"toolu_fake{next(_ids):03d}_{secrets.token_hex(4)}"


def _stop_reason(reply: Reply) -> str:
    if reply.stop_reason is not None:
        return reply.stop_reason
    return "tool_use" if any(isinstance(b, ToolUse) for b in reply.blocks) else "end_turn"


def materialize(reply: Reply, model: str, usage: dict[str, int]) -> dict[str, Any]:
    """The complete assistant message (the `stream: false` answer, and what the stream adds up to)."""
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if isinstance(block, Text):
            content.append({"type": "text", "text": block.text})
        elif isinstance(block, Thinking):
            content.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
        else:
            content.append({"type": "tool_use", "id": _block_id(block), "name": block.name,
                            "input": dict(block.input)})
    return {
        "id": f"msg_fake_{next(_ids):04d}_{secrets.token_hex(3)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": usage,
    }


def _event(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _pieces(s: str, size: int) -> Iterator[str]:
    for i in range(0, len(s), max(1, size)):
        yield s[i : i + size]


def _block_events(index: int, block: dict[str, Any], chunk: int) -> Iterator[bytes]:
    kind = block["type"]
    if kind == "text":
        yield _event("content_block_start", {"type": "content_block_start", "index": index,
                                             "content_block": {"type": "text", "text": ""}})
        for piece in _pieces(block["text"], chunk):
            yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                 "delta": {"type": "text_delta", "text": piece}})
    elif kind == "thinking":
        yield _event("content_block_start", {"type": "content_block_start", "index": index,
                                             "content_block": {"type": "thinking", "thinking": "",
                                                               "signature": ""}})
        for piece in _pieces(block["thinking"], chunk):
            yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                 "delta": {"type": "thinking_delta", "thinking": piece}})
        yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": {"type": "signature_delta",
                                                       "signature": block["signature"]}})
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        yield _event("content_block_start", {"type": "content_block_start", "index": index,
                                             "content_block": start})
        for piece in _pieces(json.dumps(block["input"]), chunk):
            yield _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                                 "delta": {"type": "input_json_delta", "partial_json": piece}})
    yield _event("content_block_stop", {"type": "content_block_stop", "index": index})


def sse_events(message: dict[str, Any], chunk: int) -> Iterator[bytes]:
    """The SSE stream of a complete message, event by event, as the real API frames it."""
    usage = message["usage"]
    head = {**message, "content": [], "stop_reason": None,
            "usage": {**usage, "output_tokens": 1}}
    yield _event("message_start", {"type": "message_start", "message": head})
    yield _event("ping", {"type": "ping"})
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block, chunk)
    yield _event("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                   "usage": usage})
    yield _event("message_stop", {"type": "message_stop"})


Kind = Literal["reply", "error", "drop"]


def kind_of(step: Step) -> Kind:
    if isinstance(step, Reply):
        return "reply"
    return "error" if isinstance(step, Error) else "drop"
