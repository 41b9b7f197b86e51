"""The interactive terminal's bottom input line (L-12).

While a run works, the last terminal line stays an input line (prompt_toolkit, with output printed
above it): a typed line answers the pending question (a number picks one of its options; an empty line
lets the model decide), otherwise it goes to the run's inbox. Ctrl-C is a key here, not a signal: once,
the line asks for an optional remark and the runtime is interrupted with it; twice, the run stops and the
caller prints how to resume. End of input (Ctrl-D) declines what is pending and stops reading.

Without a terminal there is no input line: questions are answered with `flower answer` from elsewhere.

`route` is the whole decision, pure, so it is unit-tested; `InputLine` only wires it to a terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = ["Action", "InputLine", "Steerable", "route"]


class Question(Protocol):
    id: str
    question: str
    options: Sequence[str]


class Steerable(Protocol):
    """What the input line needs from a human channel (`flower.human.HumanChannel` has it)."""

    def pending(self) -> Sequence[Question]: ...
    def answer(self, ask_id: str, text: str) -> bool: ...
    def decline(self, ask_id: str, reason: str = "") -> bool: ...
    def send(self, text: str, *, source: str = ...) -> Any: ...


@dataclass(frozen=True)
class Action:
    kind: Literal["answer", "decline", "mail", "nothing"]
    ask_id: str = ""
    text: str = ""


def route(line: str, pending: Question | None) -> Action:
    """What a typed line means, given the question waiting for an answer (if any)."""
    text = line.strip()
    if pending is None:
        return Action("mail", text=text) if text else Action("nothing")
    if not text:
        return Action("decline", pending.id, "the human left it to you")
    if text.isdigit() and pending.options and 1 <= int(text) <= len(pending.options):
        return Action("answer", pending.id, pending.options[int(text) - 1])
    return Action("answer", pending.id, text)


ANSWER_PROMPT = "answer (a number picks an option; Enter = you decide) > "
SAY_PROMPT = "say (added to the brief; Ctrl-C = interrupt) > "
REMARK_PROMPT = "interrupted: a remark for the agent (Enter = none; Ctrl-C again = stop) > "


class InputLine:
    """The bottom input line over a running step. `await line.run()` until `close()` or end of input.

    `interrupt(remark)` is called on the first Ctrl-C once the remark is typed (Runtime.interrupt is
    thread-safe); `stop()` on the second. `status` feeds the bottom toolbar (the live view's status line).
    `say` prints a line above the input (questions, receipts).
    """

    def __init__(
        self,
        channel: Steerable | None,
        *,
        interrupt: Callable[[str], None],
        stop: Callable[[], None],
        status: Callable[[], str] | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.channel = channel
        self.interrupt = interrupt
        self.stop = stop
        self.status = status
        self.say = say
        self._closed = False
        self._session: Any = None

    def _pending(self) -> Question | None:
        if self.channel is None:
            return None
        items = list(self.channel.pending())
        return items[0] if items else None

    def _message(self) -> str:
        return ANSWER_PROMPT if self._pending() is not None else SAY_PROMPT

    def close(self) -> None:
        """Stop reading (the step ended); safe from any thread of the run's loop."""
        self._closed = True
        app = getattr(self._session, "app", None)
        if app is not None and app.is_running:
            app.exit(result=None)

    async def run(self) -> None:
        from prompt_toolkit import PromptSession

        self._session = PromptSession()
        status = self.status
        toolbar = (lambda: status()) if status is not None else None
        while not self._closed:
            try:
                line = await self._session.prompt_async(
                    self._message, bottom_toolbar=toolbar, refresh_interval=0.5)
            except KeyboardInterrupt:
                if await self._remark():
                    continue
                self.stop()
                return
            except EOFError:
                pending = self._pending()
                if pending is not None and self.channel is not None:
                    self.channel.decline(pending.id, "nobody is at the terminal")
                return
            if line is None or self._closed:
                return
            self._apply(route(line, self._pending()))

    async def _remark(self) -> bool:
        """After one Ctrl-C: read a remark and interrupt; False when Ctrl-C comes again (stop)."""
        try:
            remark = await self._session.prompt_async(REMARK_PROMPT)
        except (KeyboardInterrupt, EOFError):
            return False
        self.interrupt((remark or "").strip())
        self.say("! interrupted" + (f": {remark.strip()}" if remark and remark.strip() else ""))
        return True

    def _apply(self, action: Action) -> None:
        channel = self.channel
        if action.kind == "nothing":
            return
        if channel is None:
            self.say("! nothing to send it to: this run has no human channel")
            return
        # An answer or a skip is shown by the channel's own event (as one from another machine would be).
        if action.kind == "answer":
            channel.answer(action.ask_id, action.text)
        elif action.kind == "decline":
            channel.decline(action.ask_id, action.text)
        elif action.kind == "mail" and channel.send(action.text, source="terminal") is not None:
            self.say("+ received: the agent reads it at its next inbox check; appended to the brief")
