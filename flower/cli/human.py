"""`flower asks / answer / say`: steer a running agent from another terminal or machine (L-8).

    flower asks RUN                  the questions waiting for an answer
    flower answer RUN [QID] TEXT     answer one (the oldest waiting when QID is left out); an approval of a
                                     tool call takes yes or no, then an optional reason (L-15)
    flower say RUN TEXT              put a message in the run's inbox (and so in its brief)

RUN is a run dir (its `human.db` mailbox, every run in it), or with `--store postgresql://...` the run id of
a run whose store is that database. The commands only append letters to the mailbox (`flower.human.mailbox`);
the run's channel picks them up while a question waits and on every inbox call.

Of several `flower answer` to one question exactly one says "answered"; the others say who was first and exit
1 (the mailbox's compare-and-set). `flower say` to a run dir goes to the run that is current there: the one
whose channel attached last (a `flower go --new` run, not the failed one before it).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import time
from pathlib import Path

import click

from flower.cli import options
from flower.errors import ConfigError, FlowerError
from flower.human.mailbox import (
    MAILBOX_FILE,
    RUN_KINDS,
    Letter,
    LetterKind,
    Mailbox,
    PendingQuestion,
    is_postgres_dsn,
    open_mailbox,
    pending_questions,
)
from flower.walls.approval import parse_verdict

__all__ = ["answer", "asks", "handoff", "say"]

BROADCAST = "*"
_QID = re.compile(r"q\d+")

store_option = options.store(metavar="DSN", help="The run's PostgreSQL store (postgresql://...); RUN is then "
                             "its run id.")
schema_option = click.option("--schema", default="flower", show_default=True, metavar="NAME",
                             help="PostgreSQL schema of the store.")


def _open(run: str, store: str | None, schema: str) -> tuple[Mailbox, str | None]:
    """The mailbox and the run key to read (None: every run of a run dir)."""
    if store and is_postgres_dsn(store):
        return open_mailbox(".", store, schema=schema), run
    folder = Path(run)
    if not folder.is_dir():
        raise ConfigError(f"{run} is not a run dir; for a run in PostgreSQL pass its run id with --store DSN")
    if not (folder / MAILBOX_FILE).exists():
        raise ConfigError(f"{run} has no human channel mailbox ({MAILBOX_FILE}): no run there used a HumanChannel")
    return open_mailbox(folder), None


def _text(words: tuple[str, ...] | list[str], what: str) -> str:
    """The words as one text; bytes that are not UTF-8 (a shell on another locale) are refused in one line."""
    text = " ".join(words).strip()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start:exc.end].encode("utf-8", "surrogateescape")
        raise ConfigError(f"the {what} is not valid UTF-8 (bytes {bad!r} at character {exc.start}); "
                          "give it as UTF-8 text") from None
    return text


def _latest_run(mailbox: Mailbox) -> str:
    """The run of a run dir that last wrote to its mailbox (it attached its channel, asked, settled or
    received), else everyone: a later run (after `flower go --new`) must not get the old run's mail as new."""
    runs = [letter.run for letter in mailbox.read(None) if letter.kind in RUN_KINDS and letter.run != BROADCAST]
    return runs[-1] if runs else BROADCAST


def _post_to_run(run: str, store: str | None, schema: str, kind: LetterKind, text: str) -> None:
    """A letter for the run RUN names: its run id under `--store`, else the run that is current in the run dir."""
    mailbox, key = _open(run, store, schema)
    try:
        mailbox.post(key if key is not None else _latest_run(mailbox), kind, text)
    finally:
        mailbox.close()


def _who() -> str:
    """Who answers, as the other answerers are told: user@host and the process."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name in a bare container
        user = f"uid {os.getuid()}" if hasattr(os, "getuid") else "someone"
    return f"{user}@{socket.gethostname()} (pid {os.getpid()})"


def _taken(qid: str, first: Letter) -> str:
    """One line: the letter that settled `qid` before this answer."""
    by = str(first.meta.get("by") or "someone")
    if first.kind == "answer":
        return f"{qid} was already answered by {by}: {first.body}"
    if first.kind == "decline":
        return f"{qid} was already declined by {by}"
    state = str(first.meta.get("state") or "settled")
    return f"{qid} was already {state} by the run itself" + (f": {first.body}" if first.body else "")


def _pending(mailbox: Mailbox, run: str | None) -> list[PendingQuestion]:
    return pending_questions(mailbox.read(run))


def _age(at: float) -> str:
    seconds = max(0, int(time.time() - at))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@click.command(short_help="List the questions a run is waiting on.")
@click.argument("run")
@store_option
@schema_option
@options.json_output(help="Print JSON instead of lines.")
def asks(run: str, store: str | None, schema: str, as_json: bool) -> None:
    """List the questions a run is waiting on (RUN: run dir, or run id with --store)."""
    mailbox, key = _open(run, store, schema)
    try:
        waiting = _pending(mailbox, key)
    finally:
        mailbox.close()
    if as_json:
        click.echo(json.dumps([{"run": q.run, "id": q.id, "question": q.question, "options": list(q.options),
                                "asked_at": q.asked_at, "approval": q.approval} for q in waiting],
                              ensure_ascii=False, indent=1))
        return
    if not waiting:
        click.echo("no question is waiting")
    for q in waiting:
        options = f"  [{' | '.join(q.options)}]" if q.options else ""
        run_name = f"  {q.run}" if q.run else ""
        what = "approval" if q.approval is not None else "asked"
        click.echo(f"{q.id}{run_name}  {what} {_age(q.asked_at)} ago  {q.question}{options}")


@click.command(short_help="Answer a question a run is waiting on.")
@click.argument("run")
@click.argument("words", nargs=-1, required=True, metavar="[QID] TEXT")
@click.option("--decline", is_flag=True, help="Skip the question instead; TEXT (optional) is the reason.")
@store_option
@schema_option
def answer(run: str, words: tuple[str, ...], decline: bool, store: str | None, schema: str) -> None:
    """Answer a waiting question (the oldest, unless QID like q3 is given). An approval of a tool call takes
    yes or no, then an optional reason."""
    qid = words[0] if _QID.fullmatch(words[0]) and (len(words) > 1 or decline) else None
    text = _text(words[1:] if qid else words, "answer")
    if not text and not decline:
        raise ConfigError("the answer is empty")
    mailbox, key = _open(run, store, schema)
    try:
        waiting = _pending(mailbox, key)
        if not waiting:
            raise ConfigError(f"no question is waiting in {run}")
        chosen = next((q for q in waiting if q.id == qid), None) if qid else waiting[0]
        if chosen is None:
            raise ConfigError(f"{qid} is not waiting for an answer (waiting: {', '.join(q.id for q in waiting)})")
        done = "declined" if decline else "answered"
        if chosen.approval is not None and not decline:
            allowed, _ = parse_verdict(text)
            if allowed is None:
                raise ConfigError(f"{chosen.id} asks to approve a call: answer yes or no, then an optional reason")
            done = "approved" if allowed else "denied"
        elif chosen.approval is not None:
            done = "denied"
        first = mailbox.claim(chosen.run, chosen.id, "decline" if decline else "answer", text, by=_who())
        if first is not None:
            raise FlowerError(_taken(chosen.id, first))
    finally:
        mailbox.close()
    click.echo(f"{done} {chosen.id}: {chosen.question}")


@click.command(short_help="Send a message to a running agent.")
@click.argument("run")
@click.argument("words", nargs=-1, required=True, metavar="TEXT")
@store_option
@schema_option
def say(run: str, words: tuple[str, ...], store: str | None, schema: str) -> None:
    """Send a message to a running agent: its next inbox call delivers it, and it is added to the brief."""
    text = _text(words, "message")
    if not text:
        raise ConfigError("the message is empty")
    _post_to_run(run, store, schema, "mail", text)
    click.echo(f"sent to {run}: the run's next inbox call delivers it")


@click.command(short_help="Ask a running agent to hand over to a fresh session.")
@click.argument("run")
@click.option("--goal", default="", metavar="TEXT", help="The focus the handoff document is written for.")
@store_option
@schema_option
def handoff(run: str, goal: str, store: str | None, schema: str) -> None:
    """Ask a running agent to hand over to a new generation at its next main-thread tool boundary, with GOAL
    as the focus of the handoff document (as Claude Code's `/compact <focus>`). The run takes it through its
    human channel's mailbox, so it works for a run on another machine of a fleet (`--store`)."""
    text = _text((goal,), "goal")
    _post_to_run(run, store, schema, "handoff", text)
    click.echo(f"asked {run} to hand over at its next tool boundary" + (f", for: {text}" if text else ""))
