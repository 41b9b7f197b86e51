"""`HumanChannel`: a running agent asks the human, and the human talks to it without killing it (L-8).

An in-process SDK MCP server with two tools: `ask(question, options?)` waits for an answer; `inbox()` returns at
once with the mail the human sent. Answers and mail arrive from Python on any thread (`answer`, `decline`,
`send`), from a terminal UI (the same calls), or from another process or machine through the run's mailbox
(`flower answer / say`, `flower.human.mailbox`).

Invariants:
- `ask` never raises (except cancellation) and never blocks past `timeout_s`: every way it ends is a state,
  and the model gets a text for each (the fallbacks tell it to decide itself and record the assumption).
- `max_asks` None = unlimited, 0 = no question at all; `timeout_s` None = wait for ever, <= 0 = at once.
  Invalid and over-budget asks do not use up the budget, and flower's own questions (`framework=True`, e.g. the
  judge's "unreachable: what now?") never count against it.
- A question is settled exactly once: the first of answer / decline / timeout wins, whatever thread it comes from.
- Mail is appended (never overwriting) to `amend_path`, so it outlives the step; the Q&A log at `log_path` is
  append-only and never enters the model's context.
- A UI callback or a log/mailbox failure is recorded in `ui_errors`, never raised into the run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import HookMatcher, McpSdkServerConfig

from flower import texts
from flower.agent.events import Event
from flower.errors import ConfigError
from flower.human.mailbox import (
    SETTLING,
    STEERING,
    Letter,
    LetterKind,
    Mailbox,
    PostgresMailbox,
    open_mailbox,
    pending_questions,
)
from flower.human.records import Ask, AskState, Mail, stamp
from flower.human.tools import main_thread_only, make_server
from flower.util.confined import append_text
from flower.util.oneline import one_line
from flower.walls.approval import Call, Decision, approval_key, parse_verdict

if TYPE_CHECKING:
    from flower.runtime.runtime import Runtime

__all__ = ["Ask", "AskState", "HumanChannel", "Mail", "store_dsn"]

_QID = re.compile(r"q(\d+)")
REREAD = 64


@dataclass
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


class HumanChannel:
    """The human at the other end of a run: questions out, answers and mail in."""

    def __init__(
        self,
        *,
        max_asks: int | None = None,
        timeout_s: float | None = 1800.0,
        log_path: str | Path | None = None,
        amend_path: str | Path | None = None,
        on_event: Callable[[Event], Any] | None = None,
        name: str = "human",
        mailbox: Mailbox | None = None,
        run: str = "",
        poll_s: float = 0.5,
    ) -> None:
        if max_asks is not None and max_asks < 0:
            raise ConfigError(f"max_asks must be None (unlimited) or >= 0, not {max_asks}")
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ConfigError(f"channel name {name!r} must be letters, digits, _ or -")
        self.max_asks = max_asks
        self.timeout_s = timeout_s
        self.log_path = Path(log_path) if log_path is not None else None
        self.amend_path = Path(amend_path) if amend_path is not None else None
        self.on_event = on_event
        self.name = name
        self.poll_s = poll_s
        self.asks: list[Ask] = []
        self.mail: list[Mail] = []
        self.ui_errors: list[str] = []
        self._lock = threading.RLock()
        self._sync_lock = threading.Lock()  # one mailbox reader at a time: a letter is taken once
        self._ids = itertools.count(1)
        self._waiters: dict[str, _Waiter] = {}
        self._server: McpSdkServerConfig | None = None
        self.mailbox: Mailbox | None = None
        self.run = run
        self._cursor = 0
        self._received: set[str] = set()
        self._follow: Runtime | None = None  # a bound runtime whose run id names the run (a workflow may change it)
        self._step_events: Callable[[Event], Any] | None = None
        """The running step's event callback: approval questions are shown there too (`show_approvals`)."""
        self._steer: Runtime | None = None
        """The bound runtime: a steering letter calls its `handoff(goal)` or `interrupt(remark)`."""
        if mailbox is not None:
            self.attach(mailbox, run)

    # --- wiring ---------------------------------------------------------------------------------

    @property
    def ask_tool(self) -> str:
        """The ask tool's full name as the model calls it."""
        return f"mcp__{self.name}__ask"

    @property
    def inbox_tool(self) -> str:
        return f"mcp__{self.name}__inbox"

    @property
    def tool_names(self) -> tuple[str, ...]:
        return (self.ask_tool, self.inbox_tool)

    def mcp_servers(self) -> dict[str, McpSdkServerConfig]:
        """The SDK MCP server, keyed by its name, for `AgentSpec.mcp_servers`."""
        if self._server is None:
            self._server = self._make_server()
        return {self.name: self._server}

    def hooks(self) -> dict[str, list[HookMatcher]]:
        """A PreToolUse hook that denies the ask tool to subagents: asking is a main-thread act, and a worker
        that needs a decision reports it."""
        return {"PreToolUse": [main_thread_only(self.ask_tool)]}

    def tool_env(self) -> dict[str, str]:
        """Environment for the CLI: its MCP tool timeout outlasts our own wait, so a question ends with our
        fallback text, never with the CLI's timeout error."""
        wait = 7 * 24 * 3600.0 if self.timeout_s is None else max(0.0, self.timeout_s)
        return {"MCP_TOOL_TIMEOUT": str(int((wait + 120) * 1000))}

    def attach(self, mailbox: Mailbox, run: str = "") -> HumanChannel:
        """Take answers and mail from `mailbox` for `run`, and publish questions there; question ids continue
        after the ones the run already asked (an earlier process of the same run)."""
        with self._lock:
            self.mailbox, self.run = mailbox, run
            letters = mailbox.read(run)
            numbers = [int(m.group(1)) for letter in letters if letter.kind == "question"
                       if (m := _QID.fullmatch(letter.ref))]
            self._ids = itertools.count(max([*numbers, len(self.asks) + len(self.mail)], default=0) + 1)
            # Questions an earlier process of this run asked and never settled died with it: close them, so
            # `flower asks` and `flower answer` see only the questions someone is waiting on.
            mine = {item.id for item in self.asks}
            for dead in pending_questions([letter for letter in letters if letter.run == run]):
                if dead.id not in mine:
                    mailbox.post(run, "settled", "", ref=dead.id, meta={"state": "abandoned"})
            # This run is now the current one of its mailbox: `flower say RUN_DIR` sends to it.
            mailbox.post(run, "open", "", meta={"pid": os.getpid()})
        return self

    def bind(self, runtime: Runtime) -> HumanChannel:
        """Defaults from a `Runtime`: the Q&A log and the brief (where mail is appended) in its workbench notes,
        and its mailbox (its PostgreSQL store's database, else `human.db` in its run dir) under its run id.
        Settings already given are kept."""
        workbench = getattr(runtime, "workbench", None)
        notes = Path(workbench.notes) if workbench is not None else Path(runtime.run_dir)
        if self.log_path is None:
            self.log_path = notes / f"{self.name}-questions.md"
        if self.amend_path is None:
            self.amend_path = notes / "brief.md"  # the clarify step's brief (flower.human.clarify.BRIEF_FILE)
        if self.mailbox is None:
            dsn, schema = store_dsn(getattr(runtime, "store", None))
            mailbox = PostgresMailbox(dsn, schema=schema) if dsn else open_mailbox(runtime.run_dir)
            if not self.run:
                self._follow = runtime
            self.attach(mailbox, self.run or runtime.run_id)
        return self.steered_by(runtime)

    def steered_by(self, runtime: Runtime) -> HumanChannel:
        """Take the letters that steer a run (`flower handoff`, the web page's interrupt) for `runtime`, at
        each of its main-thread tool boundaries (`Runtime.on_boundary`)."""
        self._steer = runtime
        boundary = getattr(runtime, "on_boundary", None)
        if callable(boundary):
            boundary(self.sync)
        return self

    def _run_key(self) -> str:
        """The run the letters belong to; follows the bound runtime's run id (a workflow that continues an
        earlier run takes that run's id)."""
        follow = self._follow
        if follow is not None and self.mailbox is not None and getattr(follow, "run_id", self.run) != self.run:
            with self._lock:
                before = self.run
                self._cursor, self._received = 0, set()
                self.attach(self.mailbox, str(follow.run_id))
            self._adopt_mail(before)
        return self.run

    def _adopt_mail(self, before: str) -> None:
        """Take the mail sent to the run id this process had before it took an earlier run's (it was the
        current run of the mailbox meanwhile, so `flower say` sent there)."""
        if self.mailbox is None or not before:
            return
        try:
            letters = [letter for letter in self.mailbox.read(before) if letter.run == before]
        except Exception as exc:  # the run goes on without that mail; the failure is on record
            self._record("mailbox", exc)
            return
        taken = {letter.ref for letter in letters if letter.kind == "received"}
        for letter in letters:
            if letter.kind == "mail" and str(letter.id) not in taken | self._received:
                self._deliver(letter)

    # --- the model's side -------------------------------------------------------------------------

    async def ask(self, question: str, options: Sequence[str] | None = None, *, framework: bool = False,
                  approval: dict[str, Any] | None = None) -> Ask:
        """Ask and wait; returns the settled `Ask`. Never raises except on cancellation."""
        self._run_key()
        item = Ask(self._next_id("q"), (question or "").strip(), tuple(o.strip() for o in options or () if o.strip()),
                   framework=framework, approval=approval)
        with self._lock:
            self.asks.append(item)
            state: AskState | None = None
            if not item.question:
                state = "invalid"
            elif not framework and self.max_asks is not None and self._counted() > self.max_asks:
                state = "over_budget"
            elif self.timeout_s is not None and self.timeout_s <= 0:
                state = "timeout"
            if state is None:
                loop = asyncio.get_running_loop()
                waiter = _Waiter(loop, loop.create_future())
                self._waiters[item.id] = waiter
        if state is not None:
            self._settle(item, state, "")
            return item
        self._emit(Event("ask", item.question, payload=self._payload(item)))
        meta: dict[str, Any] = {"options": list(item.options)}
        if approval is not None:
            meta["approval"] = approval
        self._post("question", item.question, ref=item.id, meta=meta)
        try:
            await self._wait(item, waiter)
        except asyncio.CancelledError:  # the turn was interrupted or the step stopped: not a timeout
            self._settle(item, "timeout", texts.ASK_CUT_SHORT)
            raise
        return item

    async def approve(self, call: Call) -> Decision:
        """Ask the human whether `call` may run, and wait (L-15): yes allows it; no, a decline or no answer
        within `timeout_s` denies it. Never counts against `max_asks`.

        Durable: a process of the same session (a resume after a crash, in this run or a later one) finds
        what an earlier one left. An approval it asked and nobody answered is closed and asked again; one the
        human answered but the dead process never took is not asked again: its answer applies to the same
        call issued again (same tool and input). Never raises except on cancellation."""
        self._run_key()
        key = approval_key(call.tool, call.tool_input)
        shown = _shown(call)
        approval = {"tool": call.tool, "rule": call.rule, "agent": call.agent, "key": key, "call": shown,
                    "tool_use_id": call.tool_use_id, "session": call.session}
        question = texts.APPROVAL_QUESTION.format(who=f"{call.agent}'s " if call.agent else "", tool=call.tool,
                                                  call=shown, rule=call.rule)
        earlier = await asyncio.to_thread(self._left_by_the_dead, key, call.session)
        if earlier is None:
            item = await self.ask(question, ("yes", "no"), framework=True, approval=approval)
        else:
            own = earlier.run == self.run
            item = Ask(earlier.ref if own else f"{earlier.ref}@{earlier.run}", question, ("yes", "no"),
                       framework=True, approval=approval)
            with self._lock:
                self.asks.append(item)
            state: AskState = "answered" if earlier.kind == "answer" else "declined"
            if self._settle(item, state, earlier.body):
                self._post_to(earlier.run, "settled", earlier.body, ref=earlier.ref,
                              meta={"state": state, "earlier": True})
        if item.state == "answered":
            allowed, reason = parse_verdict(item.answer)
            return Decision(allowed is True, item.state, reason, item.id)
        return Decision(False, item.state, item.answer, item.id)

    def _left_by_the_dead(self, key: str, session: str) -> Letter | None:
        """The approvals of `session` (of this run, without one) that another process asked: the ones still
        waiting are closed (a session runs in one process at a time, so that one died); returns the human's
        answer (or decline) to the newest one about the call `key` that its process never took, or None."""
        if self.mailbox is None:
            return None
        try:
            letters = self.mailbox.read(None if session else self._run_key())
        except Exception as exc:  # asking again is the safe side
            self._record("mailbox", exc)
            return None
        with self._lock:
            live = {str((item.approval or {}).get("tool_use_id")) for item in self.asks if item.approval}
        found: Letter | None = None
        for question in letters:
            about = question.meta.get("approval") if question.kind == "question" else None
            if not isinstance(about, dict) or str(about.get("tool_use_id")) in live:
                continue
            if (about.get("session") != session) if session else (question.run != self.run):
                continue
            ends = [letter for letter in letters
                    if letter.run == question.run and letter.ref == question.ref and letter.kind in SETTLING]
            if not ends:
                self._post_to(question.run, "settled", "", ref=question.ref, meta={"state": "abandoned"})
                continue
            taken = any(letter.kind == "settled" and letter.meta.get("state") in ("answered", "declined")
                        for letter in ends)
            if about.get("key") == key and ends[0].kind in ("answer", "decline") and not taken:
                found = ends[0]
        return found

    async def _wait(self, item: Ask, waiter: _Waiter) -> None:
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while not waiter.future.done():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self._settle(item, "timeout", "")
                break
            step = left if self.mailbox is None else min(self.poll_s, left if left is not None else self.poll_s)
            await asyncio.wait({waiter.future}, timeout=step)
            if self.mailbox is not None and not waiter.future.done():
                await asyncio.to_thread(self.sync)

    def inbox(self) -> str:
        """Deliver the mail not yet delivered, as the inbox tool's text (also marks it taken)."""
        with self._lock:
            fresh = [m for m in self.mail if not m.taken]
            for m in fresh:
                m.taken = True
        if not fresh:
            return texts.INBOX_EMPTY
        lines = [texts.INBOX_HEAD.format(count=len(fresh))]
        lines += [f"{i}. {m.text}" for i, m in enumerate(fresh, 1)]
        for m in fresh:
            self._emit(Event("mail", m.text, payload={"id": m.id, "phase": "delivered", "source": m.source}))
        saved = self.amend_path is not None and self.amend_path.exists()
        lines.append(texts.INBOX_SAVED.format(path=self.amend_path) if saved else texts.INBOX_NOT_SAVED)
        return "\n".join(lines)

    # --- the human's side (any thread) ----------------------------------------------------------

    def pending(self) -> list[Ask]:
        """Questions waiting for an answer, oldest first."""
        with self._lock:
            return [a for a in self.asks if a.state == "asked"]

    def answer(self, ask_id: str, text: str) -> bool:
        """Answer a waiting question; False when it is no longer waiting (or unknown). Thread-safe."""
        item = self._find(ask_id)
        return item is not None and self._settle(item, "answered", text.strip())

    def decline(self, ask_id: str, reason: str = "") -> bool:
        """Skip a waiting question; the model is told to decide itself. Thread-safe."""
        item = self._find(ask_id)
        return item is not None and self._settle(item, "declined", reason.strip())

    def send(self, text: str, *, source: str = "python") -> Mail | None:
        """Put a message in the inbox (None when empty); it is appended to the brief at once. Thread-safe."""
        text = text.strip()
        if not text:
            return None
        mail = Mail(self._next_id("m"), text, source=source)
        with self._lock:
            self.mail.append(mail)
        self.amend(text)
        self._log(f"## {mail.id} · the human said ({stamp(mail.sent_at)})\n\n{text}\n")
        self._emit(Event("mail", text, payload={"id": mail.id, "phase": "queued", "source": source}))
        return mail

    def pending_mail(self) -> list[Mail]:
        with self._lock:
            return [m for m in self.mail if not m.taken]

    def amend(self, text: str, *, label: str = "during the run") -> bool:
        """Append `text` to `amend_path` (the brief) under a dated heading; never overwrites. False when there is
        no path, nothing to add, or the file cannot be written (recorded in `ui_errors`)."""
        if self.amend_path is None or not text.strip():
            return False
        block = f"\n\n## Added {label} ({stamp(time.time())})\n\n{text.strip()}\n"
        try:
            self.amend_path.parent.mkdir(parents=True, exist_ok=True)
            append_text(self.amend_path, block)  # never through a symlink a repository planted
        except OSError as exc:
            self._record("amend", exc)
            return False
        return True

    @property
    def remaining(self) -> int:
        """Questions the model may still ask; -1 when unlimited."""
        if self.max_asks is None:
            return -1
        with self._lock:
            return max(0, self.max_asks - self._counted())

    def transcript(self) -> str:
        """The questions and answers so far, as a markdown list."""
        with self._lock:
            return "\n".join(f"- Q({a.id}) {a.question}\n  A[{a.state}] {a.answer}" for a in self.asks)

    def sync(self) -> None:
        """Take the answers and mail that arrived through the mailbox. Called while a question waits and on every
        inbox call; a UI may call it too."""
        if self.mailbox is None:
            return
        with self._sync_lock:
            try:
                # Re-read a few letters behind the cursor: in PostgreSQL a letter can commit after one with a
                # higher id was read. Taking a letter twice is harmless (answers settle once, mail is deduped).
                letters = self.mailbox.read(self._run_key(), after=max(0, self._cursor - REREAD))
            except Exception as exc:  # the run goes on without remote answers; the failure is on record
                self._record("mailbox", exc)
                return
            with self._lock:  # a mail letter is followed, not preceded, by its `received` letter
                self._received.update(letter.ref for letter in letters if letter.kind == "received")
            for letter in letters:
                self._take(letter)

    # --- internals ------------------------------------------------------------------------------

    def _take(self, letter: Letter) -> None:
        with self._lock:
            self._cursor = max(self._cursor, letter.id)
        if letter.kind == "received":
            self._received.add(letter.ref)
        elif letter.kind == "answer":
            self.answer(letter.ref, letter.body)
        elif letter.kind == "decline":
            self.decline(letter.ref, letter.body)
        elif letter.kind == "mail" and str(letter.id) not in self._received:
            self._deliver(letter)
        elif letter.kind in STEERING and str(letter.id) not in self._received and self._steer is not None:
            self._received.add(str(letter.id))
            self._post("received", "", ref=str(letter.id))
            getattr(self._steer, letter.kind)(letter.body)  # Runtime.handoff(goal) / Runtime.interrupt(remark)

    def _deliver(self, letter: Letter) -> None:
        """A mail letter into the inbox, marked received in the mailbox (so it is delivered once)."""
        self._received.add(str(letter.id))
        self._post("received", "", ref=str(letter.id))
        self.send(letter.body, source="mailbox")

    def _settle(self, item: Ask, state: AskState, answer: str) -> bool:
        with self._lock:
            if item.settled_at is not None:
                return False
            item.state, item.answer, item.settled_at = state, answer, time.time()
            waiter = self._waiters.pop(item.id, None)
        if waiter is not None and not waiter.loop.is_closed():
            waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
        options = "".join(f"\n- {o}" for o in item.options)
        self._log(f"## {item.id} · asked {stamp(item.asked_at)}\n\n{item.question}\n{options}\n\n"
                  f"**A [{state}, {item.waited_s} s]** {answer}\n")
        self._emit(Event("ask", item.question, payload=self._payload(item)))
        if waiter is not None:  # it was published; close it for `flower asks`
            self._post("settled", answer, ref=item.id, meta={"state": state})
        return True

    def _counted(self) -> int:
        return sum(1 for a in self.asks if not a.framework and a.state not in ("invalid", "over_budget"))

    def _find(self, ask_id: str) -> Ask | None:
        with self._lock:
            return next((a for a in self.asks if a.id == ask_id.strip()), None)

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids)}"

    def _payload(self, item: Ask) -> dict[str, Any]:
        payload = {"id": item.id, "state": item.state, "options": list(item.options), "answer": item.answer,
                   "remaining": self.remaining, "waited_s": item.waited_s, "framework": item.framework}
        if item.approval is not None:
            payload["approval"] = item.approval
        return payload

    def _post(self, kind: LetterKind, body: str, *, ref: str = "", meta: dict[str, Any] | None = None) -> None:
        if self.mailbox is not None:
            self._post_to(self._run_key(), kind, body, ref=ref, meta=meta)

    def _post_to(self, run: str, kind: LetterKind, body: str, *, ref: str = "",
                 meta: dict[str, Any] | None = None) -> None:
        if self.mailbox is None:
            return
        try:
            self.mailbox.post(run, kind, body, ref=ref, meta=meta)
        except Exception as exc:  # a lost letter costs a remote answer, never the run
            self._record("mailbox", exc)

    def _log(self, entry: str) -> None:
        if self.log_path is None:
            return
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            head = "" if os.path.lexists(self.log_path) else \
                "# desc: questions to the human and their answers (append-only)\n\n"
            append_text(self.log_path, head + entry + "\n")
        except OSError as exc:
            self._record("log", exc)

    def show_approvals(self, on_event: Callable[[Event], Any] | None) -> None:
        """Send the `ask` events of approvals (L-15) to `on_event` as well (the running step's: the live view
        of `flower run` shows them, `--events` prints them); None stops it. The `Runtime` running a spec with
        this channel sets it for each step."""
        self._step_events = on_event

    def _emit(self, event: Event) -> None:
        targets = [self.on_event]
        if "approval" in event.payload and self._step_events is not None and self._step_events is not self.on_event:
            targets.append(self._step_events)
        for target in targets:
            if target is None:
                continue
            try:
                target(event)
            except Exception as exc:  # a crashed frontend must not end a three-hour run
                self._record("on_event", exc)

    def _record(self, where: str, exc: BaseException) -> None:
        with self._lock:
            self.ui_errors.append(f"{where}: {one_line(exc)}")

    def _make_server(self) -> McpSdkServerConfig:
        return make_server(self.name, self.ask, self.inbox, self.sync)


def _shown(call: Call) -> str:
    """A call as the human reads it in the question: a Bash command as typed, else its input, cut short."""
    if call.tool == "Bash" and isinstance(call.tool_input.get("command"), str):
        text = str(call.tool_input["command"])
    else:
        text = json.dumps(dict(call.tool_input), ensure_ascii=False, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= 400 else text[:399] + "…"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def store_dsn(store: object) -> tuple[str | None, str]:
    """The PostgreSQL DSN and schema under a (possibly wrapped) session store, or (None, "flower")."""
    for _ in range(6):
        if store is None:
            break
        dsn = store.__dict__.get("dsn") if hasattr(store, "__dict__") else None
        if isinstance(dsn, str):
            return dsn, str(store.__dict__.get("schema", "flower"))
        store = store.__dict__.get("base") if hasattr(store, "__dict__") else None
    return None, "flower"
