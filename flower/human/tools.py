"""The channel's two MCP tools and the hook that keeps `ask` on the main thread (L-8).

`ask(question, options?)` waits for the human; `inbox()` returns at once. Both run in-process (an SDK MCP
server), so a question's wait is an `await` in the run's own event loop, answered from any thread.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from claude_agent_sdk import (
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    McpSdkServerConfig,
    create_sdk_mcp_server,
    tool,
)

from flower import texts
from flower.human.records import Ask

__all__ = ["main_thread_only", "make_server"]

_ASK_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question, complete in itself."},
        "options": {"type": "array", "items": {"type": "string"}, "description": "Choices, if there are a few."},
    },
    "required": ["question"],
}
_INBOX_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def make_server(
    name: str,
    ask: Callable[[str, Sequence[str]], Awaitable[Ask]],
    inbox: Callable[[], str],
    sync: Callable[[], None],
) -> McpSdkServerConfig:
    """An SDK MCP server `name` with the ask and inbox tools over the channel's own methods."""

    @tool("ask", texts.ASK_TOOL, _ASK_SCHEMA)
    async def ask_tool(args: dict[str, Any]) -> dict[str, Any]:
        item = await ask(str(args.get("question") or ""), _strings(args.get("options")))
        return {"content": [{"type": "text", "text": item.reply()}]}

    @tool("inbox", texts.INBOX_TOOL, _INBOX_SCHEMA)
    async def inbox_tool(args: dict[str, Any]) -> dict[str, Any]:
        await asyncio.to_thread(sync)
        return {"content": [{"type": "text", "text": inbox()}]}

    return create_sdk_mcp_server(name, tools=[ask_tool, inbox_tool])


def main_thread_only(tool_name: str) -> HookMatcher:
    """A PreToolUse hook that denies `tool_name` to subagents (they carry `agent_id`)."""

    async def deny_subagents(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        if not input_data.get("agent_id"):
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": texts.ASK_NOT_FROM_SUBAGENT}}

    return HookMatcher(matcher=re.escape(tool_name), hooks=[deny_subagents])


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v) for v in value]
    return []
