"""Ctrl-C on a terminal during a workflow run (L-7): the first press asks for a remark in a thread and
hands it to the in-flight step's runtime as an interrupt; a second press during the prompt stops."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from flower.flow import durable
from flower.flow.signals import REMARK_PROMPT, guard
from flower.runtime.runtime import Runtime


class Recorder(Runtime):
    """A real Runtime whose interrupts are recorded (no step is running, so there is nothing to stop)."""

    def interrupt(self, message: str = "") -> None:
        self.interrupts = [*getattr(self, "interrupts", []), message]


def test_first_ctrl_c_asks_for_a_remark_then_interrupts_second_stops(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    runtime = Recorder(tmp_path / "ws", run_dir=tmp_path / "runs")
    live = durable.Live(workflow=None, runtime=runtime, on_event=None, run_id="r1", meta={})
    live.inflight["two"] = durable.InFlight("two", "two", "sess-1", runtime)
    durable._LIVE["r1"] = live
    asked: list[str] = []
    answered, release = threading.Event(), threading.Event()

    def ask(prompt: str) -> str:
        asked.append(prompt)
        answered.set()
        if len(asked) > 1:
            release.wait(5)  # the user has not answered yet
        return "  also check the README  "

    try:
        with guard(interactive=True, ask=ask) as state:
            os.kill(os.getpid(), signal.SIGINT)
            assert answered.wait(5)
            for _ in range(100):
                if getattr(runtime, "interrupts", None):
                    break
                threading.Event().wait(0.02)
            assert asked == [REMARK_PROMPT] and runtime.interrupts == ["also check the README"]
            assert state["interrupts"] == 0  # delivered: the next press is a first one again
            answered.clear()
            os.kill(os.getpid(), signal.SIGINT)
            assert answered.wait(5)  # asking again, and Ctrl-C is pressed during the question
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                threading.Event().wait(1)
    finally:
        release.set()
        durable._LIVE.pop("r1", None)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_rows(tmp_path: Path) -> None:
    """The rows SIGTERM/SIGHUP write: one per in-flight attempt, state interrupted, with its session."""
    import json

    from flower.flow.signals import record_interrupted

    (tmp_path / "ws").mkdir()
    runtime = Runtime(tmp_path / "ws", run_dir=tmp_path / "runs")
    live: Any = durable.Live(workflow=None, runtime=runtime, on_event=None, run_id="r2", meta={})
    live.inflight["each[1]"] = durable.InFlight("each", "each[1]", "sess-9", runtime)
    assert record_interrupted([live], "killed by SIGHUP") == 1
    (row,) = json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]
    assert (row["run_id"], row["step"], row["session_id"], row["state"]) == ("r2", "each[1]", "sess-9", "interrupted")
    assert row["error"] == "killed by SIGHUP"
