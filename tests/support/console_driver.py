"""A program that runs flower's input line over a small in-memory channel and prints what it did.

Used by tests/e2e/test_console_pty.py through a real pty. The channel here is the test's own stand-in
for a run's human channel: it records what the input line asked of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import anyio

from flower.cli.console import InputLine


@dataclass
class Ask:
    id: str
    question: str
    options: tuple[str, ...]
    done: bool = False


@dataclass
class Channel:
    asks: list[Ask] = field(default_factory=lambda: [Ask("q1", "Which format?", ("CSV", "TSV"))])
    log: list[list[str]] = field(default_factory=list)

    def pending(self) -> list[Ask]:
        return [a for a in self.asks if not a.done]

    def _settle(self, kind: str, ask_id: str, text: str) -> bool:
        for item in self.asks:
            if item.id == ask_id and not item.done:
                item.done = True
                self.log.append([kind, ask_id, text])
                print(f"+ {ask_id} {kind}: {text}")  # a real channel reports this as an event
                return True
        return False

    def answer(self, ask_id: str, text: str) -> bool:
        return self._settle("answer", ask_id, text)

    def decline(self, ask_id: str, reason: str = "") -> bool:
        return self._settle("decline", ask_id, reason)

    def send(self, text: str, *, source: str = "python") -> str:
        self.log.append(["mail", source, text])
        return text


async def main() -> None:
    channel = Channel()
    line = InputLine(channel, interrupt=lambda remark: channel.log.append(["interrupt", remark]),
                     stop=lambda: channel.log.append(["stop"]), status=lambda: "STATUS context 12K")
    await line.run()
    print("LOG " + json.dumps(channel.log, ensure_ascii=False))


anyio.run(main)
