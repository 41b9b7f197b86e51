"""`async for event in rt.stream(spec, prompt)`: a step's events as an async iterator (L-3), the SDK's idiom
next to the `on_event` callback.

`EventStream` wraps anything that takes an `on_event` callback and returns an awaitable (a step, a
workflow): it starts it as a task on the first `async for`, yields each event as it happens, and keeps what
it returned in `.result`.

Invariants:
- Events come in the order they were emitted; none is dropped (the buffer is unbounded, so the run never
  waits for a slow consumer).
- An exception of the run is raised from the `async for` after the events before it were yielded.
- A consumer that stops early (`break`, an exception, `aclose()`) cancels the run; its session stays
  resumable like any interrupted session.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

import anyio

from flower.agent.events import Event, OnEvent, emit

__all__ = ["EventStream"]

T = TypeVar("T")


class EventStream(Generic[T]):
    """The events of one run, to `async for` over; `.result` holds what the run returned once it ended."""

    def __init__(self, start: Callable[[OnEvent], Awaitable[T]], on_event: OnEvent | None = None) -> None:
        self._start = start
        self._on_event = on_event
        self._started = False
        self.result: T | None = None
        """What the run returned (a `StepResult` for `Runtime.stream`); None until the stream is exhausted."""

    def __aiter__(self) -> AsyncIterator[Event]:
        if self._started:
            raise RuntimeError("an EventStream can be iterated once")
        self._started = True
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        send, receive = anyio.create_memory_object_stream[Event](math.inf)

        def forward(event: Event) -> None:
            emit(self._on_event, event)
            send.send_nowait(event)

        async def run() -> T:
            with send:
                return await self._start(forward)

        task = asyncio.ensure_future(run())
        try:
            with receive:
                async for event in receive:
                    yield event
            self.result = await task
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
