"""`flower logs`: a run's conversation as a person reads it, from the stored transcripts.

`conversation(data)` turns a `RunData` into flat `LogItem`s, in order: each session's header, the user's
prompt (without the workbench listing the runtime put in front of it), the main thread's prose, each tool
call as one line with what became of it (chars, error, denial, spill file), each dispatch with the worker's
name, brief and reply (and, nested one level, the worker's own tool calls), the handoff between
generations, and the final answer. `render_logs` prints them for a terminal; `logs_json` gives plain data.

Invariants:
- Only reads; every text shown on a terminal is sanitized and cut to the width unless `full`.
- A subagent's transcript is matched to its dispatch by the `agentId` the CLI records in the Agent call's
  result; a dispatch whose transcript is missing still shows its brief and the reply from that result.
- A denial is the CLI's structural marker `toolDenialKind` (docs/sdk-notes.md#denials), not the reason's
  wording.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.text import Text

from flower import texts
from flower.agent.eventinfo import denial_reason, spill_of
from flower.report.entries import blocks_of, is_reply, message_of
from flower.report.rundata import RunData, strip_listing
from flower.report.text import fit, sanitize

__all__ = ["LogItem", "conversation", "item_lines", "logs_json", "render_logs"]

Entry = Mapping[str, Any]
_RELAY = re.compile(re.escape(texts.WORKBENCH_RELAY).replace(r"\{root\}", ".*?"))
_HANDOFF_HEAD = texts.HANDOFF_CONTINUE.split("{", 1)[0]
_INPUT_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description", "prompt")


@dataclass
class LogItem:
    """One line (or paragraph) of the conversation."""

    kind: str
    """session, prompt, text, tool, dispatch, reply, handoff, resume, final."""
    who: str
    """"you", "main", or the worker's type."""
    text: str
    time: str | None = None
    """The entry's timestamp (ISO, UTC)."""
    depth: int = 0
    """1 for a worker's own lines."""
    tool: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def _summary(name: str, data: Any) -> str:
    if isinstance(data, Mapping):
        for key in _INPUT_KEYS:
            if isinstance(data.get(key), str):
                return str(data[key]).strip().split("\n")[0]
    return ""


def _handback(text: str) -> str:
    """The worker's report inside the CLI's hand-back frame (indented), without the trailing ids."""
    body = text.split("The report follows:\n", 1)[1] if "The report follows:\n" in text else text
    lines = []
    for line in body.splitlines():
        if line.startswith(("agentId: ", "<usage>")):
            break
        lines.append(line[2:] if line.startswith("  ") else line)
    return "\n".join(lines).strip()


def _last_text(entries: Sequence[Entry]) -> str:
    last = ""
    for entry in entries:
        if is_reply(entry):
            said = "".join(str(b.get("text", "")) for b in blocks_of(entry)
                           if isinstance(b, Mapping) and b.get("type") == "text")
            last = said or last
    return last.strip()


class _Builder:
    def __init__(self, data: RunData) -> None:
        self.data = data
        self.items: list[LogItem] = []
        self.calls: dict[str, LogItem] = {}

    def session_header(self, session: str) -> None:
        rows = [r for r in self.data.steps if session == r.get("session_id") or session in (r.get("retired") or [])]
        row = rows[0] if rows else None
        retired = list(row.get("retired") or []) if row else []
        generation = retired.index(session) + 1 if session in retired else len(retired) + 1
        detail: dict[str, Any] = {"session_id": session, "generation": generation}
        if rows:
            detail["steps"] = list(dict.fromkeys(str(r.get("step")) for r in rows))
        self.items.append(LogItem("session", "", session, detail=detail))

    def walk(self, entries: Sequence[Entry], who: str, depth: int, *, main: bool) -> None:
        seen_prompt = False
        for entry in entries:
            kind, when = entry.get("type"), entry.get("timestamp")
            time = when if isinstance(when, str) else None
            message = message_of(entry)
            if message is None or kind not in ("user", "assistant"):
                continue
            if kind == "user" and isinstance(message.get("content"), str):
                if entry.get("isMeta") or entry.get("isCompactSummary"):
                    continue
                self.user_text(str(message["content"]), time, depth, main=main, first=not seen_prompt)
                seen_prompt = True
                continue
            if kind == "assistant" and not is_reply(entry):
                continue
            for block in blocks_of(entry):
                if isinstance(block, Mapping):
                    self.block(entry, block, who, depth, time, main=main)

    def user_text(self, text: str, time: str | None, depth: int, *, main: bool, first: bool) -> None:
        if not main:  # a worker's first user message is its brief, already shown with the dispatch
            return
        if text.startswith(texts.HANDOFF_REQUEST[:40]) or text.startswith(texts.HANDOFF_RETRY[:40]):
            self.items.append(LogItem("handoff", "runtime", "context nearly full: the session writes its handoff",
                                      time))
            return
        body = strip_listing(text)
        if body.startswith(_HANDOFF_HEAD):
            match = re.search(r"generation (\d+)", body)
            path = re.search(r"also saved at (.+?)\):", body)
            self.items.append(LogItem("handoff", "runtime", "a new generation continues from the handoff", time,
                                      detail={"generation": int(match.group(1)) if match else None,
                                              "path": path.group(1) if path else None}))
            return
        if body.startswith((texts.RESUME_AFTER_ERROR[:40], texts.RESUME_AFTER_INTERRUPT[:40])):
            self.items.append(LogItem("resume", "runtime", body.split(".")[0], time))
            return
        self.items.append(LogItem("prompt", "you", body.strip(), time))

    def block(self, entry: Entry, block: Mapping[str, Any], who: str, depth: int, time: str | None,
              *, main: bool) -> None:
        kind = block.get("type")
        if kind == "text" and str(block.get("text") or "").strip():
            self.items.append(LogItem("text", who, str(block["text"]).strip(), time, depth))
        elif kind == "tool_use":
            name, data, call = str(block.get("name") or "?"), block.get("input"), str(block.get("id") or "")
            if name in ("Agent", "Task") and isinstance(data, Mapping):
                worker = str(data.get("subagent_type") or "general-purpose")
                brief = _RELAY.sub("", str(data.get("prompt") or "")).strip()
                item = LogItem("dispatch", who, str(data.get("description") or ""), time, depth, name,
                               {"worker": worker, "brief": brief, "id": call})
            else:
                item = LogItem("tool", who, _summary(name, data), time, depth, name, {"id": call})
            self.items.append(item)
            self.calls[call] = item
        elif kind == "tool_result":
            called = self.calls.get(str(block.get("tool_use_id") or ""))
            if called is not None:
                self.result(called, entry, block)

    def result(self, item: LogItem, entry: Entry, block: Mapping[str, Any]) -> None:
        text = _text_of(block.get("content"))
        error = bool(block.get("is_error"))
        if item.kind == "dispatch":
            self.reply(item, entry, text)
            return
        item.detail["chars"] = len(text)
        if error:
            item.detail["error"] = text.strip().split("\n")[0][:300]
        if entry.get("toolDenialKind") in ("permission-rule", "user-rejected"):
            item.detail["denied"] = denial_reason(text) or text.strip()
        spill = spill_of(text)
        if spill is not None:
            item.detail["spill"] = {"chars": spill[0], "path": spill[1]}

    def reply(self, item: LogItem, entry: Entry, text: str) -> None:
        result = entry.get("toolUseResult")
        agent_id = str(result.get("agentId") or "") if isinstance(result, Mapping) else ""
        worker = str(item.detail.get("worker"))
        label = next((k for k in self.data.subagents if agent_id and (k == agent_id or k.endswith("/" + agent_id))),
                     None)
        if label is not None:
            self.walk(self.data.subagents[label], worker, item.depth + 1, main=False)
        transcript = self.data.subagents.get(label) if label else None
        reply = (_last_text(transcript) if transcript else "") or _handback(text)
        # The worker's last words are its reply: shown once, as the reply.
        if self.items and self.items[-1].kind == "text" and self.items[-1].text == reply:
            self.items.pop()
        when = entry.get("timestamp")
        self.items.append(LogItem("reply", worker, reply, when if isinstance(when, str) else item.time,
                                  item.depth, detail={"agent_id": agent_id or None, "id": item.detail.get("id")}))


def conversation(data: RunData) -> list[LogItem]:
    """The run's conversation, in order."""
    builder = _Builder(data)
    for session, entries in data.main.items():
        builder.session_header(session)
        builder.walk(entries, "main", 0, main=True)
    items = builder.items
    for item in reversed(items):
        if item.kind == "handoff":
            break  # the session's last words were its handoff, not an answer
        if item.kind == "text" and item.depth == 0:
            item.kind = "final"
            break
    return items


def logs_json(items: Sequence[LogItem]) -> str:
    return json.dumps([asdict(item) for item in items], indent=1, ensure_ascii=False, default=str)


# --- rendering ----------------------------------------------------------------------------------------

_MAX_LINES = 4


def _clock(time: str | None) -> str:
    return time[11:19] if time and len(time) >= 19 else "        "


def _paragraph(text: str, full: bool) -> list[str]:
    lines = [line for line in sanitize(text, keep_newlines=True).splitlines() if line.strip()]
    if full or len(lines) <= _MAX_LINES:
        return lines
    return [*lines[:_MAX_LINES], f"... ({len(lines) - _MAX_LINES} more lines; --full shows them)"]


def _outcome(item: LogItem) -> tuple[str, str]:
    d = item.detail
    if "denied" in d:
        return f" -> denied: {d['denied']}", "red"
    if "spill" in d:
        return f" -> spilled {d['spill']['chars']:,} chars to {d['spill']['path']}", "yellow"
    if "error" in d:
        return f" -> error: {d['error']}", "red"
    if "chars" in d:
        return f" -> {d['chars']:,} chars", ""
    return " -> (no result)", "dim"


def _lines(item: LogItem, full: bool, width: int = 10_000) -> list[tuple[str, str]]:
    """(text, style) lines of one item, without the time column (`width` cells for it)."""
    pad = "    " * item.depth
    if item.kind == "session":
        d = item.detail
        parts = [f"session {item.text}", f"generation {d.get('generation')}"]
        if d.get("steps"):
            parts.append(("steps " if len(d["steps"]) > 1 else "step ") + ", ".join(d["steps"]))
        return [("== " + " | ".join(parts), "bold")]
    if item.kind == "prompt":
        return [(f"you: {line}" if i == 0 else f"     {line}", "bold green")
                for i, line in enumerate(_paragraph(item.text, full))]
    if item.kind in ("text", "final"):
        head = "answer" if item.kind == "final" else item.who
        return [(f"{pad}{head}: {line}" if i == 0 else f"{pad}{' ' * (len(head) + 2)}{line}", "bold" if
                 item.kind == "final" else "") for i, line in enumerate(_paragraph(item.text, full))]
    if item.kind == "tool":
        outcome, style = _outcome(item)
        head = f"{pad}* {item.tool} "
        room = width - len(head) - min(len(outcome), width // 2)
        what = sanitize(item.text) if full else fit(sanitize(item.text), max(10, room))
        return [(f"{head}{what}{sanitize(outcome)}", style or ("dim" if item.depth else "cyan"))]
    if item.kind == "dispatch":
        worker = item.detail.get("worker")
        out = [(f"{pad}> {worker}: {sanitize(item.text)}", "magenta")]
        brief_lines = _paragraph(str(item.detail.get("brief") or ""), full)
        out += [(f"{pad}    brief: {line}" if i == 0 else f"{pad}           {line}", "dim")
                for i, line in enumerate(brief_lines)]
        return out
    if item.kind == "reply":
        return [(f"{pad}< {item.who}: {line}" if i == 0 else f"{pad}  {' ' * (len(item.who) + 2)}{line}", "green")
                for i, line in enumerate(_paragraph(item.text, full) or ["(no reply)"])]
    if item.kind == "handoff":
        d = item.detail
        where = f" (generation {d['generation']}, from {d['path']})" if d.get("generation") else ""
        return [(f"# {item.text}{where}", "yellow")]
    return [(f"~ {item.text}", "yellow")]


def item_lines(item: LogItem, *, full: bool = False) -> list[tuple[str, str]]:
    """The (text, rich style) lines `flower logs` prints for one item, without the time column: what
    `flower web` shows of a session, line for line."""
    return _lines(item, full)


def render_logs(console: Console, items: Sequence[LogItem], *, full: bool = False, last: int | None = None) -> None:
    """Print the conversation (the last `last` items, with their session's header)."""
    shown = list(items)
    if last is not None and last < len(shown):
        cut = len(shown) - last
        header = next((i for i in reversed(shown[:cut]) if i.kind == "session"), None)
        shown = ([header] if header is not None and header not in shown[cut:] else []) + shown[cut:]
        console.print(Text(f"... {cut} earlier items (-n shows more)", style="dim"), no_wrap=True)
    width = max(40, console.width)
    for item in shown:
        for i, (line, style) in enumerate(_lines(item, full, width - 9)):
            stamp = _clock(item.time) if i == 0 and item.kind != "session" else "        "
            text = line if item.kind == "session" else f"{stamp} {line}"
            if not full:
                text = fit(text, width)
            console.print(Text(text, style=style), no_wrap=not full, overflow="crop" if not full else "fold",
                          soft_wrap=full, markup=False, highlight=False)
