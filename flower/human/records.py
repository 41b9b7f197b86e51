"""What the human channel keeps: each question (`Ask`) and each message (`Mail`), and how a question ended (L-8).

Plain records; `flower.human.channel.HumanChannel` creates and settles them. `Ask.reply()` is the text the model
sees as the ask tool's result for each state (all in `flower.texts`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from flower import texts

__all__ = ["Ask", "AskState", "Mail", "stamp"]

AskState = Literal["asked", "answered", "timeout", "declined", "over_budget", "invalid"]


@dataclass
class Ask:
    """One question and how it ended."""

    id: str
    """"q1", "q2", ... unique within a run (also across processes sharing its mailbox)."""
    question: str
    options: Sequence[str] = ()
    """The choices offered (a tuple); typed as a sequence so UIs may read it through a protocol."""
    asked_at: float = field(default_factory=time.time)
    state: AskState = "asked"
    answer: str = ""
    """The human's answer, or the reason given when declining."""
    settled_at: float | None = None
    framework: bool = False
    """Asked by flower itself, not by the model; never counts against `max_asks`."""
    approval: dict[str, Any] | None = None
    """For a question about a tool call that needs approval (L-15): the tool, rule, agent and the call's key."""

    @property
    def waited_s(self) -> float:
        """Seconds from asking to settling (or until now), one decimal."""
        end = self.settled_at if self.settled_at is not None else time.time()
        return round(end - self.asked_at, 1)

    @property
    def answered(self) -> bool:
        return self.state == "answered"

    def reply(self) -> str:
        """What the model sees as the tool's result."""
        if self.state == "answered":
            return texts.ASK_ANSWERED.format(answer=self.answer)
        if self.state == "declined":
            return texts.ASK_DECLINED.format(reason=f" Reason: {self.answer}." if self.answer else "")
        if self.state == "over_budget":
            return texts.ASK_OVER_BUDGET
        if self.state == "invalid":
            return texts.ASK_INVALID
        return texts.ASK_TIMEOUT


@dataclass
class Mail:
    """A message the human sent during the run."""

    id: str
    text: str
    sent_at: float = field(default_factory=time.time)
    taken: bool = False
    """Delivered to the model by an inbox call."""
    source: str = "python"
    """"python" (this process) or "mailbox" (another process or machine)."""


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
