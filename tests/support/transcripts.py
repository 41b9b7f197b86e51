"""Transcripts for tests: the real ones in ../shared/data, and a builder for synthetic ones.

`TRANSCRIPTS` is the folder of 60 real Claude Code transcripts (versions 1.0 to 2.1; see its README.md),
found through `FLOWER_TRANSCRIPTS`, else beside the repository (`<repo>/../shared/data/transcripts`), else
at `/work/shared/data/transcripts`. This is the one place that knows where they are; the benches import it. `real_transcripts()` lists them
for parametrisation, or an empty list when the folder is absent (tests then skip with a reason).

`Transcript` writes entries in the exact shapes the CLI 2.1.332 writes (docs/sdk-notes.md#denials,
#session-stores, #errors-and-interrupts, #compaction, #transcript-order): one entry per
assistant content block sharing `message.id`, each tool result its own user entry with `toolUseResult`
and `sourceToolAssistantUUID`, `toolDenialKind` markers, the interrupt harness row, `<synthetic>` messages,
compaction boundaries. Every method returns the entry it appended, and by default chains it to the
previous one (`parent=` overrides, as parallel results written in completion order need).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _locate() -> Path:
    configured = os.environ.get("FLOWER_TRANSCRIPTS")
    if configured:
        return Path(configured).resolve()
    candidates = [REPO.parent / "shared" / "data" / "transcripts", Path("/work/shared/data/transcripts")]
    return next((c.resolve() for c in candidates if c.is_dir()), candidates[0].resolve())


TRANSCRIPTS = _locate()

Entry = dict[str, Any]

REJECTED_TEXT = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you "
    "how to proceed."
)
INTERRUPT_ROW = "[Request interrupted by user for tool use]"


def real_transcripts() -> list[Path]:
    if not TRANSCRIPTS.is_dir():
        return []
    return sorted(TRANSCRIPTS.rglob("*.jsonl"))


def transcript_id(path: Path) -> str:
    return str(path.relative_to(TRANSCRIPTS))


class Transcript:
    """A synthetic transcript, built entry by entry like the CLI writes it."""

    def __init__(
        self, *, session_id: str = "5e551011-0000-4000-8000-000000000000", agent_id: str | None = None
    ):
        self.entries: list[Entry] = []
        self.session_id = session_id
        self.agent_id = agent_id
        self._uuids = itertools.count(1)
        self._messages = itertools.count(1)
        self._calls: dict[str, str] = {}  # tool_use id -> uuid of the assistant entry holding it

    # -- plumbing ----------------------------------------------------------------------------------
    def uuid(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._uuids):012d}"

    @property
    def last(self) -> str | None:
        for entry in reversed(self.entries):
            if "uuid" in entry:
                return str(entry["uuid"])
        return None

    def add(self, entry: Entry, parent: str | None | bool = True) -> Entry:
        if "uuid" in entry:
            entry.setdefault("parentUuid", self.last if parent is True else (parent or None))
            entry.setdefault("isSidechain", self.agent_id is not None)
            if self.agent_id is not None:
                entry.setdefault("agentId", self.agent_id)
            entry.update(
                userType="external",
                entrypoint="sdk-py",
                cwd="/work/ws",
                sessionId=self.session_id,
                version="2.1.332",
                gitBranch="HEAD",
            )
            entry.setdefault("timestamp", "2026-12-02T10:11:16.560Z")
        self.entries.append(entry)
        return entry

    # -- user side ---------------------------------------------------------------------------------
    def prompt(self, text: str, **extra: Any) -> Entry:
        return self.add(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "uuid": self.uuid(),
                "promptId": "p-1",
                **extra,
            }
        )

    def result(
        self,
        call: str,
        content: Any,
        *,
        is_error: bool = False,
        parent: str | None | bool = True,
        tool_use_result: Any = None,
        **extra: Any,
    ) -> Entry:
        block = {"tool_use_id": call, "type": "tool_result", "content": content, "is_error": is_error}
        entry: Entry = {
            "type": "user",
            "message": {"role": "user", "content": [block]},
            "uuid": self.uuid(),
            "promptId": "p-1",
        }
        entry["toolUseResult"] = (
            tool_use_result
            if tool_use_result is not None
            else (
                {
                    "stdout": content,
                    "stderr": "",
                    "interrupted": False,
                    "isImage": False,
                    "noOutputExpected": False,
                }
                if isinstance(content, str) and not is_error
                else f"Error: {content}"
            )
        )
        entry["sourceToolAssistantUUID"] = self._calls.get(call)
        entry.update(extra)
        return self.add(entry, parent)

    def denial(self, call: str, reason: str = "PreToolUse:Bash hook error: DENY", **kw: Any) -> Entry:
        """A hook / can_use_tool / dontAsk denial (docs/sdk-notes.md#denials): marker `permission-rule`."""
        return self.result(
            call,
            reason,
            is_error=True,
            toolDenialKind="permission-rule",
            permissionDecision={
                "decision": "reject",
                "source": "hook",
                "reasonType": "hook",
                "reasonCode": "hook:PreToolUse",
            },
            **kw,
        )

    def rejected(self, call: str, *, marker: bool = True, **kw: Any) -> Entry:
        """An interrupted (or user-rejected) call's result (docs/sdk-notes.md#errors-and-interrupts)."""
        extra = {"toolDenialKind": "user-rejected"} if marker else {}
        return self.result(
            call, REJECTED_TEXT, is_error=True, tool_use_result="User rejected tool use", **extra, **kw
        )

    def interrupt_row(self, **kw: Any) -> Entry:
        return self.add(
            {
                "type": "user",
                "message": {"role": "user", "content": [{"type": "text", "text": INTERRUPT_ROW}]},
                "rowSource": "harness",
                "uuid": self.uuid(),
                **kw,
            }
        )

    def meta(self, text: str) -> Entry:
        return self.add(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "isMeta": True,
                "uuid": self.uuid(),
            }
        )

    # -- assistant side ----------------------------------------------------------------------------
    def assistant(
        self,
        *blocks: dict[str, Any],
        msg_id: str | None = None,
        model: str = "claude-opus-5-5",
        parent: str | None | bool = True,
        **extra: Any,
    ) -> list[Entry]:
        """One API message: one entry per block, chained, all with the same `message.id`."""
        msg_id = msg_id or f"msg_fake_{next(self._messages):04d}"
        written = []
        for number, block in enumerate(blocks):
            message = {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [block],
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            entry = self.add(
                {
                    "message": message,
                    "requestId": "req_fake_1",
                    "type": "assistant",
                    "uuid": self.uuid(),
                    **extra,
                },
                parent if number == 0 else True,
            )
            if block.get("type") == "tool_use":
                self._calls[block["id"]] = entry["uuid"]
            written.append(entry)
        return written

    def api_error(self, text: str = "API Error: 500 Internal server error (fake).") -> Entry:
        message = {
            "id": f"synth-{next(self._messages)}",
            "model": "<synthetic>",
            "role": "assistant",
            "type": "message",
            "stop_reason": "stop_sequence",
            "content": [{"type": "text", "text": text}],
        }
        return self.add(
            {
                "type": "assistant",
                "message": message,
                "uuid": self.uuid(),
                "error": "server_error",
                "isApiErrorMessage": True,
                "apiErrorStatus": 500,
                "madeBy": "model",
            }
        )

    def no_response(self) -> Entry:
        message = {
            "id": f"synth-{next(self._messages)}",
            "model": "<synthetic>",
            "role": "assistant",
            "type": "message",
            "stop_reason": "stop_sequence",
            "content": [{"type": "text", "text": "No response requested."}],
        }
        return self.add(
            {
                "type": "assistant",
                "message": message,
                "uuid": self.uuid(),
                "isApiErrorMessage": False,
                "madeBy": "other",
            }
        )

    # -- system side -------------------------------------------------------------------------------
    def compact(self, summary: str) -> tuple[Entry, Entry]:
        leaf = self.last
        boundary = self.add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "uuid": self.uuid(),
                "logicalParentUuid": leaf,
                "level": "info",
                "compactMetadata": {"trigger": "auto", "preTokens": 95006},
            },
            parent=None,
        )
        text = (
            "This session is being continued from a previous conversation that ran out of context.\n\n"
            + summary
        )
        summary_entry = self.add(
            {
                "type": "user",
                "message": {"role": "user", "content": text},
                "isVisibleInTranscriptOnly": True,
                "isCompactSummary": True,
                "uuid": self.uuid(),
            }
        )
        return boundary, summary_entry

    def last_prompt(self, text: str = "go") -> Entry:
        return self.add(
            {"type": "last-prompt", "lastPrompt": text, "leafUuid": self.last, "sessionId": self.session_id}
        )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str = "hmm") -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(call: str, name: str = "Bash", **input: Any) -> dict[str, Any]:
    if name == "Bash" and "command" not in input:
        input["command"] = "git status"
    return {"type": "tool_use", "id": call, "name": name, "input": input}


def bash(call: str, command: str) -> dict[str, Any]:
    return tool_use(call, "Bash", command=command, description="run")


def image_block() -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


def chain_ok(entries: list[Entry]) -> bool:
    present = {e["uuid"] for e in entries if "uuid" in e}
    return all(e.get("parentUuid") is None or e["parentUuid"] in present for e in entries)


def by_uuid(entries: list[Entry], uuid: str) -> Entry:
    return next(e for e in entries if e.get("uuid") == uuid)


def block_of(entry: Entry) -> dict[str, Any]:
    content = entry["message"]["content"]
    assert isinstance(content, list) and len(content) == 1, content
    return dict(content[0])
