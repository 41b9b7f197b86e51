"""`Request`: one recorded `POST /v1/messages` call, with helpers to read what the CLI sent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

__all__ = ["MAIN", "Request"]

MAIN = "main"


@dataclass(frozen=True)
class Request:
    """One recorded `POST /v1/messages` request."""

    index: int
    """Position among all recorded message requests, from 0."""
    thread: str
    """`"main"` or the subagent's id."""
    headers: Mapping[str, str]
    """Request headers, lower-cased names."""
    body: Mapping[str, Any]
    """The parsed JSON body."""
    size: int
    """Length in bytes of the raw body."""

    @property
    def is_subagent(self) -> bool:
        return self.thread != MAIN

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @cached_property
    def system_text(self) -> str:
        system = self.body.get("system") or ""
        if isinstance(system, str):
            return system
        return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))

    @cached_property
    def text(self) -> str:
        """All text of the messages (text, tool_result and tool_use inputs) joined, for `in` checks."""
        return "\n".join(_block_text(b) for m in self.messages for b in _content(m))

    @property
    def chars(self) -> int:
        """Total characters of the messages' JSON: the context-size proxy of this request."""
        return len(json.dumps(self.messages, ensure_ascii=False))

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.body.get("tools") or []]

    def last_user(self) -> dict[str, Any]:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return dict(message)
        return {}

    def last_user_text(self) -> str:
        return "\n".join(_block_text(b) for b in _content(self.last_user()))

    def tool_results(self) -> list[dict[str, Any]]:
        """The `tool_result` blocks of the last user message."""
        return [b for b in _content(self.last_user()) if b.get("type") == "tool_result"]

    def result_text(self, tool_use_id: str | None = None) -> str:
        """Text of the last user message's tool results (of one id, when given)."""
        return "\n".join(_block_text(b) for b in self.tool_results()
                         if tool_use_id is None or b.get("tool_use_id") == tool_use_id)


def _content(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        inner = block.get("content")
        if isinstance(inner, list):
            return "\n".join(_block_text(b) for b in inner if isinstance(b, Mapping))
        return str(inner or "")
    if kind == "tool_use":
        return json.dumps(block.get("input", {}), ensure_ascii=False)
    return ""
