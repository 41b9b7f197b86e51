"""What the runtime controls about a live CLI session: its cooperative interrupt and its running tasks."""

from __future__ import annotations

import asyncio

from claude_agent_sdk import (
    TERMINAL_TASK_STATUSES,
    ClaudeSDKClient,
    TaskNotificationMessage,
    TaskStartedMessage,
    TaskUpdatedMessage,
)

__all__ = ["Steering", "Tasks"]


class Steering:
    """The run's cooperative interrupt: the remark waiting for the next resume, and the live client to stop.
    `interrupt` is thread-safe."""

    def __init__(self) -> None:
        self.note: str | None = None
        self.handoff: str | None = None
        """A handoff asked for by a person (`Runtime.handoff`), with its focus (empty: none), or None."""
        self._client: ClaudeSDKClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def interrupt(self, message: str) -> None:
        self.note = message
        client, loop = self._client, self._loop
        if client is None or loop is None:
            return
        if _running_loop() is loop:  # called from the run's own event loop (an on_event callback)
            loop.create_task(client.interrupt())
        else:
            asyncio.run_coroutine_threadsafe(client.interrupt(), loop)

    def attach(self, client: ClaudeSDKClient) -> None:
        self._client, self._loop = client, asyncio.get_running_loop()

    def detach(self) -> None:
        self._client = None


class Tasks:
    """The CLI's tasks still running, by task id; background Agent calls also by call id until their task is
    known. A refresh waits for them, since it ends the CLI process and them with it."""

    def __init__(self, running: set[str] | None = None) -> None:
        self.running: set[str] = set(running or ())
        self._calls: dict[str, str] = {}
        """Task id -> the tool call that started it."""

    def track(self, msg: object) -> None:
        """Started by a task_started message, ended by a terminal notification or update (the SDK: a
        stopped task may end with the update alone)."""
        if isinstance(msg, TaskStartedMessage):
            self.running.add(msg.task_id)
            if msg.tool_use_id:
                self._calls[msg.task_id] = msg.tool_use_id
        elif isinstance(msg, TaskNotificationMessage) or (
                isinstance(msg, TaskUpdatedMessage) and (msg.patch or {}).get("status") in TERMINAL_TASK_STATUSES):
            self.running.discard(msg.task_id)
            self.running.discard(self._calls.pop(msg.task_id, "") or getattr(msg, "tool_use_id", "") or "")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
