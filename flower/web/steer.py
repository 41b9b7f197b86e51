"""Steering from `flower web`: answer or decline a waiting question, mail the inbox, interrupt with a remark,
ask for a handoff, cancel a run.

Each action is the one the CLI command does, through the same library calls: `flower answer` and `flower
say` append letters to the run's mailbox (`flower.human.mailbox`: `pending_questions`, then `claim`, the
compare-and-set of concurrent answerers), `flower cancel` is
`flower.flow.runs.cancel_run`. So it works for a run on another machine of a fleet (its mailbox and its
DBOS state are in the fleet's PostgreSQL), and the letters and the run's DBOS status are the record.

Invariants: every action returns the one line the CLI would print, or raises a `FlowerError` with the
one line it would refuse with; nothing here writes anywhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flower.errors import ConfigError, FlowerError
from flower.web.source import Source

if TYPE_CHECKING:
    from flower.human.mailbox import LetterKind

__all__ = ["BY", "answer", "cancel", "say", "steer_run"]

BY = "flower web"
"""Who answered, as the mailbox records it and other answerers are told."""
BROADCAST = "*"


def answer(source: Source, qid: str, text: str, *, decline: bool = False, run: str | None = None) -> str:
    """Answer (or decline) the waiting question `qid` (of `run`, when several runs share the mailbox)."""
    from flower.human.mailbox import pending_questions

    text = text.strip()
    if not text and not decline:
        raise ConfigError("the answer is empty")
    kind: LetterKind = "decline" if decline else "answer"
    with source.mailbox() as box:
        waiting = pending_questions(box.read(None)) if box is not None else []
        chosen = next((q for q in waiting if q.id == qid and (run is None or q.run == run)), None)
        if box is None or chosen is None:
            names = ", ".join(q.id for q in waiting) or "none"
            raise ConfigError(f"{qid} is not waiting for an answer (waiting: {names})")
        first = box.claim(chosen.run, chosen.id, kind, text, by=BY)  # compare-and-set: one answer wins
        if first is not None:
            raise FlowerError(f"{chosen.id} was already settled: {first.body}")
    return f"{'declined' if decline else 'answered'} {chosen.id}: {chosen.question}"


def say(source: Source, run_id: str, text: str) -> str:
    """Mail for the run's inbox, under the run's id when its channel writes letters under it; else to
    every run of the mailbox, as `flower say` does when no run has written (a channel given a run key
    of its own)."""
    text = text.strip()
    if not text:
        raise ConfigError("the message is empty")
    known = _post(source, run_id, "mail", text)
    where = f"run {run_id}" if known else "every run of this mailbox"
    return f"sent to {where}: the run's next inbox call delivers it"


def steer_run(source: Source, run_id: str, kind: LetterKind, text: str) -> str:
    """A steering letter (`handoff` with its focus, `interrupt` with its remark), as `flower handoff` posts one:
    the run's bound channel takes it at the next main-thread tool boundary."""
    text = " ".join(text.split())
    _post(source, run_id, kind, text)
    what = "hand over" if kind == "handoff" else "stop its turn"
    return f"asked run {run_id} to {what} at its next tool boundary" + (f": {text}" if text else "")


def _post(source: Source, run_id: str, kind: LetterKind, text: str) -> bool:
    """Post under the run's id when its channel writes letters under it, else to every run of the mailbox;
    whether the run was known."""
    with source.mailbox(create=True) as box:
        assert box is not None  # created when missing
        known = any(letter.run == run_id for letter in box.read(run_id))
        box.post(run_id if known else BROADCAST, kind, text)
    return known


def cancel(source: Source, run_id: str) -> str:
    from flower.flow.runs import cancel_run

    was = cancel_run(source.run_dir, source.store, run_id)
    return f"cancelled run {run_id} (it was {was.lower()})"
