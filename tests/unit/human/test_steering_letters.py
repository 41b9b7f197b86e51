"""A bound channel takes steering letters at a tool boundary, each once (issue #27, #29)."""

from __future__ import annotations

from pathlib import Path

from flower.human.channel import HumanChannel
from flower.human.mailbox import open_mailbox


class _Runtime:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.run_id, self.workbench, self.store = run_dir, "run-1", None, None
        self.calls: list[tuple[str, str]] = []
        self.boundary: list[object] = []

    def handoff(self, goal: str = "") -> None:
        self.calls.append(("handoff", goal))

    def interrupt(self, message: str = "") -> None:
        self.calls.append(("interrupt", message))

    def on_boundary(self, callback: object) -> None:
        self.boundary.append(callback)


def test_steering_letters_reach_the_bound_runtime_once_each(tmp_path: Path) -> None:
    rt = _Runtime(tmp_path)
    channel = HumanChannel().bind(rt)  # type: ignore[arg-type]
    assert rt.boundary == [channel.sync]
    box = open_mailbox(tmp_path)
    box.post("run-1", "handoff", "port the lexer")
    box.post("*", "interrupt", "look at the tests first")
    box.post("run-2", "handoff", "not ours")
    channel.sync()
    channel.sync()
    assert rt.calls == [("handoff", "port the lexer"), ("interrupt", "look at the tests first")]
    again = HumanChannel().bind(_Runtime(tmp_path))  # type: ignore[arg-type]  # a restarted run: taken already
    again.sync()
    assert [letter.kind for letter in box.read("run-1")].count("received") == 2
    box.close()
