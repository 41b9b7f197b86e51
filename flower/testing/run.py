"""Running one prompt through the real SDK and CLI, collecting every message.

`query()` raises `ResultError` after it has yielded an `is_error` result
(docs/sdk-notes.md#threads-on-the-wire); a test usually wants the messages either way, so `collect()` keeps
them and returns the error separately.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

__all__ = ["Collected", "collect"]


@dataclass
class Collected:
    """Messages of one `query()` run."""

    messages: list[Any] = field(default_factory=list)
    """Every SDK message, in order."""
    error: BaseException | None = None
    """What `query()` raised after its messages, if anything."""

    @property
    def results(self) -> list[ResultMessage]:
        return [m for m in self.messages if isinstance(m, ResultMessage)]

    @property
    def result(self) -> ResultMessage:
        if not self.results:
            raise AssertionError(f"no ResultMessage; error: {self.error!r}")
        return self.results[-1]

    @property
    def session_id(self) -> str:
        return self.result.session_id


async def collect(prompt: str, options: ClaudeAgentOptions) -> Collected:
    """Run `prompt`, returning all messages and the error `query()` raised at the end, if any."""
    out = Collected()
    try:
        async for message in query(prompt=prompt, options=options):
            out.messages.append(message)
    except Exception as exc:  # the SDK raises after an error result; the caller decides
        out.error = exc
    return out
