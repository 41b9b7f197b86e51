"""Signals during a workflow run (L-7).

- SIGTERM / SIGHUP: every agent attempt in flight gets a manifest row with state `interrupted` and its
  session id, the session stores are closed, the CLI children are ended (`flower.runtime.child`), then the
  process dies of the same signal (default action).
  The run stays unfinished in DBOS: running the same command again (or `flower resume RUN`) continues it.
- Ctrl-C once: a cooperative interrupt. On a terminal a prompt asks for an optional remark, then the
  current turn is interrupted and the same session continues with it (`Runtime.interrupt`); without a
  terminal the turn is interrupted at once with no remark. Ctrl-C twice: `KeyboardInterrupt` (the CLI stops
  and prints the resume command; the CLI children are ended on the way out); later Ctrl-Cs are ignored, so
  they cannot cut that cleanup short.

Where the platform has no SIGHUP (Windows), SIGTERM and Ctrl-C are handled alone.

Invariant: the handlers print nothing and never block (printing from a handler can deadlock on the output
lock); the remark is read by a separate thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from flower.flow.durable import Live, live_runs
from flower.runtime import child
from flower.runtime.steps import append_manifest

__all__ = ["REMARK_PROMPT", "TERMINATING", "guard", "record_interrupted"]

TERMINATING: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that end a run, those of them this platform has (Windows has no SIGHUP)."""

REMARK_PROMPT = "interrupted this round; a remark for the agent? (Enter = none; Ctrl-C again = stop) > "


def record_interrupted(runs: list[Live], reason: str) -> int:
    """A manifest row (state `interrupted`) per in-flight attempt; close the stores. Rows written."""
    written = 0
    ended = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for live in runs:
        for flight in list(live.inflight.values()):
            append_manifest(flight.runtime.run_dir, {
                "run_id": live.run_id, "step": flight.label, "session_id": flight.session_id,
                "state": "interrupted", "ok": False, "error": reason, "ended": ended,
                "workspace": str(flight.runtime.workspace),
            })
            written += 1
        for runtime in {id(f.runtime): f.runtime for f in live.inflight.values()}.values() or [live.runtime]:
            close = getattr(runtime.store, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
    return written


def _interrupt_all(remark: str) -> None:
    for live in live_runs():
        for flight in list(live.inflight.values()):
            flight.runtime.interrupt(remark)


@contextlib.contextmanager
def guard(*, interactive: bool | None = None, ask: Callable[[str], str] = input) -> Iterator[dict[str, Any]]:
    """Install the handlers for the duration of a run (main thread only; elsewhere a no-op). The yielded
    dict counts `interrupts`."""
    state: dict[str, Any] = {"interrupts": 0}
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    tty = sys.stdin.isatty() if interactive is None else interactive

    def on_term(signum: int, frame: FrameType | None) -> None:
        record_interrupted(live_runs(), f"killed by {signal.Signals(signum).name}")
        child.end_mine()  # the CLI children would go on with their tool calls and API requests
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def remark() -> None:
        try:
            text = ask(REMARK_PROMPT)
        except (EOFError, OSError):
            text = ""
        _interrupt_all(text.strip())
        state["interrupts"] = 0  # delivered: the next Ctrl-C is a first one again

    def on_int(signum: int, frame: FrameType | None) -> None:
        state["interrupts"] += 1
        if state["interrupts"] > 2:
            return  # already stopping (ending the CLI, closing DBOS): another Ctrl-C must not cut that short
        if state["interrupts"] > 1:
            raise KeyboardInterrupt
        if tty:
            threading.Thread(target=remark, name="flower-remark", daemon=True).start()
        else:
            _interrupt_all("")

    previous = {sig: signal.getsignal(sig) for sig in (*TERMINATING, signal.SIGINT)}
    for sig in TERMINATING:
        signal.signal(sig, on_term)
    signal.signal(signal.SIGINT, on_int)
    try:
        yield state
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
