"""Live progress of a run in the terminal (B-12).

`LiveView.update(event)` consumes `flower.agent.events.Event`s (pass it as `on_event`). On a terminal it
keeps ONE status area updating in place (rich `Live`): the main thread's context against the handoff
threshold, the subagents still running, spills, cost and elapsed time; what happens scrolls above it as
short lines. When stdout is not a terminal it appends plain lines only (a status line after each main-thread
reply), with no escape sequence at all.

Invariants:
- Every piece of model or tool text is sanitized before it reaches the terminal (`sanitize`): escape
  sequences (CSI, OSC, DCS/APC/PM/SOS, 8-bit forms, lone ESC), control characters and bidi overrides are
  removed, so tool output can never move the cursor, retitle the window or hide text. Text is printed as
  plain `rich.text.Text`, never parsed as markup.
- Only the main thread's context counts (S-24); it comes from the event payload (`context`, or `usage`).
- A subagent is active from its Agent call on the main thread until that call's result arrives.
- A spill is counted from the pointer line `texts.SPILL_POINTER` in a tool result, wherever it sits.
- Icons are ASCII; lines are cut to the terminal width by display cells (wide characters count two).
- Main-thread prose is cut to `MAX_TEXT_LINES`, with a line saying how many more, except the answer: prose
  that a result (or an error, or the end of the view) follows is printed whole, neither cut nor indented.
- `update` never raises: a UI fault must not kill the run (the runtime also shields it, `events.emit`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from flower.agent.eventinfo import spill_pattern, usage_of
from flower.agent.events import Event
from flower.agent.output import OUTPUT_TOOL
from flower.agent.usage import message_context, message_cost
from flower.report.text import fit, format_elapsed, format_tokens, sanitize
from flower.walls.approval import parse_verdict

__all__ = ["LiveView", "spill_pattern"]

log = logging.getLogger(__name__)


_SPILL = spill_pattern()


def _bar(fraction: float, width: int = 20) -> str:
    filled = min(width, max(0, round(fraction * width)))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _call_summary(tool: str | None, payload: Mapping[str, Any]) -> str:
    data = payload.get("input")
    if not isinstance(data, Mapping):
        return ""
    if tool == OUTPUT_TOOL:  # the step's typed output: the value itself is what a person wants to see
        return json.dumps(data, ensure_ascii=False, separators=(", ", ": "))
    for key in ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt"):
        if isinstance(data.get(key), str):
            return str(data[key])
    return ""


class _Status:
    def __init__(self, view: LiveView) -> None:
        self.view = view

    def __rich__(self) -> Text:
        return Text(self.view.status_line(), style="bold", no_wrap=True, overflow="crop")


def answer_target(runtime: Any) -> str:
    """What `flower answer` takes to reach `runtime`'s run: its run dir (where its `human.db` mailbox is), or
    `--store DSN RUN_ID` when its store is PostgreSQL (the DSN is not shown: it may hold a password)."""
    from flower.human.channel import store_dsn

    if store_dsn(getattr(runtime, "store", None))[0]:
        return f"--store DSN {runtime.run_id}"
    return str(runtime.run_dir)


class LiveView:
    """A terminal progress view fed by runtime events; use as a context manager around the run."""

    MAX_TEXT_LINES = 6
    """Lines of main-thread prose shown per reply; the rest is elided."""

    def __init__(
        self,
        *,
        threshold: int | None = None,
        console: Console | None = None,
        file: IO[str] | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        answer_to: str = "RUN",
    ) -> None:
        self.answer_to = answer_to
        """What an approval's hint puts after `flower answer`: the run's `answer_target`."""
        self.console = console or Console(file=file, highlight=False, soft_wrap=False)
        self.interactive = self.console.is_terminal if live is None else live
        self.threshold = threshold
        self.context: int | None = None
        """The main thread's context at its last API message; None until an event reports one."""
        self.subagents: dict[str, str] = {}
        self.spills = 0
        self.spilled_chars = 0
        self.cost = 0.0
        self.pending = 0.0
        """Cost of the API messages seen since the last result, priced as the CLI prices them (B-12)."""
        self.worker_costs: dict[str, float] = {}
        """Estimated cost by worker type (from each subagent API message's usage)."""
        self._priced: set[str] = set()
        self._workers: dict[str, str] = {}
        self.turns = 0
        self.step = ""
        self._clock = clock
        self.started = clock()
        self._step_base = 0.0
        self._tools: dict[str, str] = {}
        self._session_costs: dict[str, float] = {}
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._held: str | None = None
        """The latest main-thread prose, held until the next event tells whether it was the answer."""

    # --- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> LiveView:  # noqa: PYI034 - Self needs Python 3.11
        if self.interactive:
            self._live = Live(
                _Status(self),
                console=self.console,
                refresh_per_second=4,
                transient=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._flush(whole=True)
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None

    # --- output -------------------------------------------------------------------------------------

    @property
    def width(self) -> int:
        # A log file has no width; still cut a 30,000-char command to something readable.
        return max(40, min(self.console.width, 160)) if self.interactive else 200

    def say(self, text: str, style: str = "") -> None:
        """Print one line above the status area (sanitized, cut to the width)."""
        line = fit(sanitize(text), self.width)
        if self.interactive:
            self.console.print(
                Text(line, style=style, no_wrap=True, overflow="crop"), markup=False, highlight=False
            )
        else:
            self.console.file.write(line + "\n")
            self.console.file.flush()

    def status_line(self) -> str:
        # Called from rich's refresh thread too: no lock here (it would deadlock against console.print in
        # update); the state it reads is replaced, never mutated in place.
        limit = format_tokens(self.threshold) if self.threshold else "no handoff"
        used = self.context
        share = f" {_bar(used / self.threshold)} {used / self.threshold:.0%}" if self.threshold and used else ""
        running = self.subagents
        agents = (
            f"{len(running)} active ({', '.join(sorted(running.values()))})" if running else "none active"
        )
        return fit(
            f"context {format_tokens(used)} / {limit}{share} | subagents {agents} | "
            f"spills {self.spills} | ${self.cost + self.pending:.4f} | "
            f"{format_elapsed(self._clock() - self.started)}",
            self.width,
        )

    # --- events -------------------------------------------------------------------------------------

    def update(self, event: Event) -> None:
        """Consume one runtime event (the `on_event` callback)."""
        try:
            with self._lock:
                self._update(event)
        except Exception:  # a display fault must never stop a run
            log.debug("live view could not show a %s event", event.kind, exc_info=True)

    def _update(self, event: Event) -> None:
        if event.kind != "text" or not event.on_main:
            self._flush(whole=event.kind in ("result", "error") and event.on_main)
        handler = getattr(self, f"_on_{event.kind}", None)
        if event.on_main:
            self._observe_context(event.payload)
        self._price(event)
        if handler is not None:
            handler(event)

    def _observe_context(self, payload: Mapping[str, Any]) -> None:
        value = payload.get("context")
        if not isinstance(value, int):
            value = message_context(payload.get("usage"))
        if isinstance(value, int) and value > 0:
            self.context = value

    def _price(self, event: Event) -> None:
        """Add the cost of an API message the first time one of its events arrives."""
        message_id = event.payload.get("message_id")
        if not isinstance(message_id, str) or message_id in self._priced or "usage" not in event.payload:
            return
        self._priced.add(message_id)
        model = event.payload.get("model")
        cost = message_cost(model if isinstance(model, str) else None, usage_of(event.payload))
        self.pending += cost
        agent = str(event.payload.get("agent", "main"))
        if agent != "main":
            worker = self._workers.get(agent, "subagent")
            self.worker_costs = {**self.worker_costs, worker: self.worker_costs.get(worker, 0.0) + cost}

    def _on_step(self, event: Event) -> None:
        phase = event.payload.get("phase")
        if phase == "start":
            self._session_costs = {}
            self.step = event.text
            self._step_base = self.cost
            resume = event.payload.get("resume")
            self.say(f"= step {event.text}" + (f" (resuming {resume})" if resume else ""), "bold")
        elif phase == "end":
            cost = event.payload.get("cost_usd")
            if isinstance(cost, (int, float)):
                self.cost = self._step_base + float(cost)
                self.pending = 0.0
            self._status_if_plain()

    def _on_tool_call(self, event: Event) -> None:
        call_id = str(event.payload.get("id") or "")
        self._tools[call_id] = event.tool or "?"
        summary = _call_summary(event.tool, event.payload)
        if event.on_main and event.tool in ("Agent", "Task"):
            raw = event.payload.get("input")
            data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
            label = sanitize(
                f"{data.get('subagent_type') or 'subagent'}: {data.get('description') or ''}"
            ).strip()
            self.subagents = {**self.subagents, call_id: fit(label, 40)}
            self._workers[call_id] = sanitize(str(data.get("subagent_type") or "subagent"))
            self.say(f"> dispatch {label}", "magenta")
        elif event.on_main:
            self.say(f"* {event.tool} {summary}", "cyan")
        else:
            worker = self._workers.get(str(event.payload.get("agent")), "")
            self.say(f"  | {worker + ' ' if worker else ''}* {event.tool} {summary}", "dim")

    def _on_tool_result(self, event: Event) -> None:
        call_id = str(event.payload.get("id") or "")
        gutter = "" if event.on_main else "  | "
        match = _SPILL.search(event.text or "")
        if match:
            self.spills += 1
            chars = match.group("chars") if "chars" in match.groupdict() else ""
            self.spilled_chars += int(chars.replace(",", "") or 0)
            self.say(f"{gutter}~ spilled {chars} chars to {match.groupdict().get('path', '')}", "yellow")
        if call_id in self.subagents:
            label = self.subagents[call_id]
            self.subagents = {k: v for k, v in self.subagents.items() if k != call_id}
            worker = self._workers.get(call_id, "")
            spent = f", ${self.worker_costs[worker]:.4f} so far for {worker}" if worker in self.worker_costs else ""
            self.say(f"+ {label} returned ({len(event.text or ''):,} chars{spent})", "green")
        elif event.payload.get("is_error"):
            first = (event.text or "").strip().splitlines()[0] if (event.text or "").strip() else ""
            self.say(f"{gutter}x {self._tools.get(call_id, 'tool')} failed: {first}", "red")

    def _on_text(self, event: Event) -> None:
        if not event.on_main:
            return  # subagent prose stays in its transcript, as in the coordinator's context
        self._flush(whole=False)
        self._held = sanitize(event.text, keep_newlines=True)

    def _flush(self, *, whole: bool) -> None:
        """Print the main-thread prose held back: whole when it turned out to be the answer (a result or an
        error followed it, or the view closed), else cut to `MAX_TEXT_LINES` with a line saying so."""
        text, self._held = self._held, None
        if text is None:
            return
        if whole:
            self._answer(text)
        else:
            lines = [line for line in text.splitlines() if line.strip()]
            for line in lines[: self.MAX_TEXT_LINES]:
                self.say(f"  {line}")
            if len(lines) > self.MAX_TEXT_LINES:
                self.say(f"  ... ({len(lines) - self.MAX_TEXT_LINES} more lines; the final answer is printed whole)",
                         "dim")
        self._status_if_plain()

    def _answer(self, text: str) -> None:
        """The answer, every line of it, neither cut nor indented: it is what the run is for."""
        if self.interactive:
            self.console.print(Text(text.strip("\n")), markup=False, highlight=False)
        else:
            self.console.file.write(text.strip("\n") + "\n")
            self.console.file.flush()

    def _on_thinking(self, event: Event) -> None:
        if event.on_main and event.text.strip():
            self.say(f"~ {event.text.strip().splitlines()[0]}", "dim cyan")

    def _on_result(self, event: Event) -> None:
        turns = event.payload.get("turns")
        cost = event.payload.get("cost_usd")
        self.turns += turns if isinstance(turns, int) else 0
        if isinstance(cost, (int, float)):
            # The CLI's cost is its process's running total: add what it grew by. A new process (a step, a
            # retry, a generation) starts a new total; the step's end sets the exact figure anyway.
            session = str(event.payload.get("session_id") or "")
            self.cost += max(0.0, float(cost) - self._session_costs.get(session, 0.0))
            self._session_costs[session] = float(cost)
            self.pending = 0.0  # the CLI's own figure replaces the per-message estimate

    def _on_error(self, event: Event) -> None:
        # An attempt the runtime stopped itself ends in an empty error result; the CLI reports one failure
        # twice (its synthetic message, then the result): show it once.
        # "[ede_diagnostic] ..." is the CLI's note on an attempt the runtime interrupted, not an error.
        if not event.text.strip() or event.text.startswith("[ede_diagnostic]") \
                or event.text == getattr(self, "_last_error", None):
            return
        self._last_error = event.text
        self.say(f"x error: {event.text}", "red")

    def _on_retry(self, event: Event) -> None:
        """One line per retry, the runtime's or the CLI's own: attempt n/N, the wait and the endpoint."""
        data = event.payload
        if "kind" in data:  # the runtime's retry: the next attempt is a new CLI process with a new total
            self._session_costs = {}
        kind = data.get("kind") or data.get("error_status") or ""
        delay = data.get("delay")
        if not isinstance(delay, (int, float)) and isinstance(data.get("retry_delay_ms"), (int, float)):
            delay = data["retry_delay_ms"] / 1000
        number, most = data.get("attempt"), data.get("max_attempts") or data.get("max_retries")
        count = f" {number}/{most}" if number is not None and most is not None else ""
        wait = f" in {delay:.1f}s" if isinstance(delay, (int, float)) else ""
        where = f" to {data['endpoint']}" if data.get("endpoint") else ""
        self.say(f"~ retry{count}{f' ({kind})' if kind else ''}{wait}{where}: {event.text}", "yellow")

    def _on_system(self, event: Event) -> None:
        """Endpoint down/back, the window of the model in use, a model other than the spec's, a switch to the
        fallback model, a refresh, the cost-driven threshold of a generation, a handoff a person asked for, an
        orphaned CLI ended."""
        subtype = event.payload.get("subtype")
        if subtype in ("window", "threshold") and isinstance(event.payload.get("threshold"), int):
            self.threshold = event.payload["threshold"]
        if subtype in ("endpoint_down", "endpoint_back", "endpoint_gone", "window", "model_mismatch",
                       "context_warning", "model_fallback", "orphan"):
            self.say(f"! {event.text}", "green" if subtype == "endpoint_back" else "yellow")
        elif subtype in ("refresh", "threshold", "handoff_asked"):
            self.say(f"# {event.text}", "cyan")

    def _on_handoff(self, event: Event) -> None:
        generation, path = event.payload.get("generation"), event.payload.get("path")
        reason = event.payload.get("reason")
        degraded = f" (degraded: {reason})" if event.payload.get("degraded") and reason else (
            " (degraded)" if event.payload.get("degraded") else "")
        self.say(f"# handoff{degraded}: generation {generation} continues from {path}", "yellow")
        self.context = None  # a fresh session: unknown until its first reply
        self._session_costs = {}
        self.subagents = {}

    def _on_ask(self, event: Event) -> None:
        """An approval of a tool call (L-15): asked, and how it ended."""
        about, qid = event.payload.get("approval"), event.payload.get("id", "")
        if not isinstance(about, Mapping):
            return
        state, answer = event.payload.get("state"), str(event.payload.get("answer") or "")
        who = f"{about.get('agent')}'s " if about.get("agent") else ""
        if state == "asked":
            self.say(f"? {qid} approve {who}{about.get('tool')}: {about.get('call')}", "yellow")
            self.say(f"  flower answer {self.answer_to} {qid} yes|no [reason]   (rule {about.get('rule')})", "yellow")
        elif state == "answered" and parse_verdict(answer)[0] is True:
            self.say(f"+ {qid} approved" + (f": {parse_verdict(answer)[1]}" if parse_verdict(answer)[1] else ""),
                     "green")
        elif state == "timeout":
            self.say(f"x {qid} denied: {answer or 'nobody answered in time'}", "red")
        elif state in ("answered", "declined"):
            reason = parse_verdict(answer)[1] if state == "answered" else answer
            self.say(f"x {qid} denied" + (f": {reason}" if reason else ""), "red")

    def _on_interrupt(self, event: Event) -> None:
        self.say(f"! interrupted{': ' + event.text if event.text else ''}", "yellow")

    def _status_if_plain(self) -> None:
        if not self.interactive:
            self.say("- " + self.status_line())
