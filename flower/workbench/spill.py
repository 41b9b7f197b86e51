"""Layer three: spill on the spot (S-15..S-17, B-5).

A PostToolUse hook on the bulky tools moves every over-long string field of a tool's output to
`<workbench>/spill/<sha256-prefix>.txt` and leaves in its place one pointer line plus the field's first
characters. The model keeps a way back (P-5) and the context keeps only the pointer.

Invariants:
- The replacement has the tool's own output structure: same keys, same types, nothing set to None,
  lists untouched (they may hold images). The CLI silently drops a replacement its output schema
  rejects (docs/sdk-notes.md#output-replacement), so anything we do not know is left as it came.
- A spill file holds the WHOLE output. For Bash output the CLI itself persisted past its inline cap, the
  full text is copied from `persistedOutputPath`, and the persisted fields are dropped from the
  replacement so the model sees exactly our pointer (docs/sdk-notes.md#large-bash-output).
- Spill files are written atomically (temp file + `os.replace`), named by content hash (so written
  once), and always under the workbench's spill folder.
- A call that reads a spill file passes untouched (else the read would be spilled again, forever).
- A replacement is never longer than what it replaces.
- Every spill appends one line to `spill/log.jsonl` (hash, tool, field, chars, agent) for the report.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk.types import HookEvent

from flower import texts
from flower.errors import ConfigError, UnsafePathError
from flower.util.confined import Confined, TempFile
from flower.workbench.bench import Workbench, escape, inside
from flower.workbench.stats import simple_commands

__all__ = [
    "BULKY",
    "HEAD_CHARS",
    "Spill",
    "reads_spill",
    "spill_callback",
    "spill_guard",
    "spill_output",
    "spill_pointer",
]

BULKY = "Bash|Read|Grep|Glob|WebFetch|WebSearch"
"""The tools whose outputs can be long. Glob and WebSearch outputs are lists, so they rarely spill."""
HEAD_CHARS = 400
"""How much of a spilled field stays inline after the pointer line."""
LOG_NAME = "log.jsonl"

_TOOLS = frozenset(BULKY.split("|"))
# Strings that identify rather than carry output (a path, a URL, a query) or carry binary data.
_KEEP_KEYS = frozenset({"base64", "filePath", "file_path", "url", "query", "persistedOutputPath", "type"})
# Bash fields describing the CLI's own persisted copy: meaningless once stdout is our pointer.
_PERSISTED_KEYS = ("persistedOutputPath", "persistedOutputSize", "stdoutHoldsOutputEnd")
_HASH_CHARS = 16
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Spill:
    """One output field moved to disk."""

    digest: str
    """sha256 prefix of the content's UTF-8 bytes; also the file name stem."""
    path: Path
    """The spill file."""
    chars: int
    """Length of the whole content in characters."""
    head: str
    """Its first `HEAD_CHARS` characters."""


def spill_pointer(spill: Spill, *, lines_first: bool = False) -> str:
    """The text that replaces a spilled field: the pointer line, a newline, the head.

    With `lines_first` (Read, whose output the CLI shows with line numbers) the head's whole lines come
    first and the pointer last, so the numbers the model sees stay the file's own.
    """
    line = texts.SPILL_POINTER.format(chars=spill.chars, path=escape(str(spill.path)))
    if not lines_first:
        return f"{line}\n{spill.head}"
    cut = spill.head.rfind("\n")
    head = spill.head[: cut + 1] if cut >= 0 else spill.head + "\n"
    return f"{head}{line}"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # JSON may carry lone surrogates; keep them, don't crash


def _spill_text(spill_dir: Confined, text: str, threshold: int, lines_first: bool = False) -> Spill | None:
    """Spill `text`, unless the pointer would not be shorter than the text itself.

    An existing file of the content's name counts only when it is a regular file holding these very bytes
    (a symlink planted at the predictable name is replaced, never trusted or followed)."""
    data = _encode(text)
    digest = hashlib.sha256(data).hexdigest()[:_HASH_CHARS]
    spill = Spill(digest, spill_dir.path / f"{digest}.txt", len(text), text[:HEAD_CHARS])
    if len(text) <= threshold or len(spill_pointer(spill, lines_first=lines_first)) >= len(text):
        return None
    spill_dir.write_once(f"{digest}.txt", data, prefix=".spill.")
    return spill


def _spill_file(spill_dir: Confined, source: str) -> Spill:
    """Copy a file byte for byte into the spill folder, streaming (it can be large)."""
    sha = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    chars, size, head = 0, 0, ""
    with spill_dir.open() as fd:
        tmp = TempFile(fd, ".spill.")
        try:
            with open(source, "rb") as src:
                while chunk := src.read(_CHUNK):
                    sha.update(chunk)
                    tmp.write(chunk)
                    size += len(chunk)
                    text = decoder.decode(chunk)
                    chars += len(text)
                    if len(head) < HEAD_CHARS:
                        head += text[: HEAD_CHARS - len(head)]
            tail = decoder.decode(b"", final=True)
            chars += len(tail)
            head = (head + tail)[:HEAD_CHARS]
            digest = sha.hexdigest()[:_HASH_CHARS]
            tmp.finish(f"{digest}.txt", size, sha.hexdigest())
        except BaseException:
            tmp.discard()  # no `.tmp` is ever left behind
            raise
    return Spill(digest, spill_dir.path / f"{digest}.txt", chars, head)


def _log(spill_dir: Confined, spill: Spill, tool: str, field: str, agent: str, tool_use_id: str | None) -> None:
    record = {"hash": spill.digest, "tool": tool, "field": field, "chars": spill.chars, "agent": agent}
    if tool_use_id:
        record["tool_use_id"] = tool_use_id
    # One short O_APPEND write per line: concurrent hooks (parallel subagents) never interleave. A symlink
    # at the log's name is refused, never followed.
    spill_dir.append(LOG_NAME, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))


def reads_spill(workbench: Workbench, tool: str, tool_input: Mapping[str, Any], cwd: str | None) -> bool:
    """True when the call itself targets a spill file or the spill folder (S-16), by resolved path."""
    spill_dir = workbench.spill
    if tool == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return False
        words = (w for ws in simple_commands(command) for w in ws)
        return any(("/" in w or w.endswith(".txt")) and inside(w, spill_dir, cwd) for w in words)
    key = "file_path" if tool == "Read" else "path"
    target = tool_input.get(key)
    return isinstance(target, str) and inside(target, spill_dir, cwd)


@dataclass(frozen=True)
class _Mover:
    """Spills fields of one tool call and logs each spill."""

    spill_dir: Confined
    tool: str
    threshold: int
    agent: str
    tool_use_id: str | None

    def text(self, field: str, text: str) -> str | None:
        return self._done(field, _spill_text(self.spill_dir, text, self.threshold, self.tool == "Read"))

    def file(self, field: str, source: str) -> str | None:
        spill = _spill_file(self.spill_dir, source)
        worth = self.threshold < spill.chars > len(spill_pointer(spill))
        return self._done(field, spill if worth else None)

    def _done(self, field: str, spill: Spill | None) -> str | None:
        if spill is None:
            return None
        _log(self.spill_dir, spill, self.tool, field, self.agent, self.tool_use_id)
        return spill_pointer(spill, lines_first=self.tool == "Read")


def spill_output(
    workbench: Workbench,
    tool: str,
    tool_input: Mapping[str, Any],
    tool_response: Any,
    *,
    threshold: int,
    agent: str = "main",
    cwd: str | None = None,
    tool_use_id: str | None = None,
) -> dict[str, Any] | None:
    """The replacement for `tool_response` with every string field longer than `threshold` spilled,
    or None when nothing changes. Writes the spill files and log lines as a side effect."""
    if tool not in _TOOLS or not isinstance(tool_response, dict):
        return None
    if tool == "Read" and tool_response.get("type") != "text":
        return None  # images, PDFs, notebooks: base64 and lists the schema needs verbatim
    if tool == "Bash" and tool_response.get("isImage") is True:
        return None
    persisted = tool_response.get("persistedOutputPath") if tool == "Bash" else None
    if not isinstance(persisted, str) and not _has_long(tool_response, threshold):
        return None  # the common case, decided before any path resolution or disk access
    if reads_spill(workbench, tool, tool_input, cwd):
        return None
    mover = _Mover(workbench.folder("spill"), tool, threshold, agent, tool_use_id)
    if not isinstance(persisted, str) or not isinstance(tool_response.get("stdout"), str):
        return _walk(tool_response, threshold, mover.text, skip=())
    return _replace_persisted(tool_response, persisted, mover)


def _replace_persisted(response: dict[str, Any], persisted: str, mover: _Mover) -> dict[str, Any] | None:
    """Bash past the CLI's inline cap: stdout is only a preview, the whole output is in `persisted`
    (docs/sdk-notes.md#large-bash-output). Copy it whole and drop the persisted fields, so the model sees only
    our pointer."""
    replaced = _walk(response, mover.threshold, mover.text, skip=("stdout",))
    base = dict(replaced if replaced is not None else response)
    size = response.get("persistedOutputSize")
    if isinstance(size, int) and size <= mover.threshold:
        return replaced  # bytes >= chars: the whole output fits under the threshold
    try:
        pointer = mover.file("stdout", persisted)
    except OSError:
        # The CLI's copy is unreadable: spill the preview we have and keep the CLI's own fields,
        # so its pointer to the full output still reaches the model.
        pointer = mover.text("stdout", response["stdout"])
        return replaced if pointer is None else {**base, "stdout": pointer}
    if pointer is None:
        return replaced
    out = {k: v for k, v in base.items() if k not in _PERSISTED_KEYS}
    out["stdout"] = pointer
    return out


def _walk(
    value: dict[str, Any], threshold: int, move: Callable[[str, str], str | None], skip: tuple[str, ...]
) -> dict[str, Any] | None:
    """A copy of `value` with long strings moved (recursing into dicts, never into lists), or None."""
    out: dict[str, Any] = {}
    changed = False
    for key, item in value.items():
        new = item
        if key in _KEEP_KEYS or key in skip:
            pass
        elif isinstance(item, str) and len(item) > threshold:
            new = move(key, item) or item
        elif isinstance(item, dict):
            new = _walk(item, threshold, move, skip=()) or item
        changed = changed or new is not item
        out[key] = new
    return out if changed else None


def spill_callback(workbench: Workbench, threshold: int = 4000, main_only: bool = False) -> Any:
    """The PostToolUse callback behind `spill_guard` (for composing with other hooks by hand)."""
    if threshold < 1:
        raise ConfigError(f"spill threshold must be positive, got {threshold}")

    async def _spill_guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        agent_id = input_data.get("agent_id")
        if main_only and agent_id:
            return {}
        tool_input = input_data.get("tool_input")
        try:
            replaced = spill_output(
                workbench,
                str(input_data.get("tool_name")),
                tool_input if isinstance(tool_input, Mapping) else {},
                input_data.get("tool_response"),
                threshold=threshold,
                agent=str(agent_id or "main"),
                cwd=input_data.get("cwd"),
                tool_use_id=tool_use_id,
            )
        except (OSError, UnsafePathError):
            # disk trouble, or a symlink where the spill folder or log should be: the model gets the
            # original output rather than a broken pointer, and nothing is written outside
            return {}
        if replaced is None:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": replaced}}

    return _spill_guard


def spill_guard(
    workbench: Workbench, threshold: int | None = 4000, main_only: bool = False
) -> dict[HookEvent, list[HookMatcher]]:
    """PostToolUse on the bulky tools, for the main thread and (unless `main_only`) subagents (S-15).

    `threshold=None` or `0` installs nothing (S-17): the result is `{}`.
    """
    if threshold is None or threshold == 0:
        return {}
    return {"PostToolUse": [HookMatcher(matcher=BULKY, hooks=[spill_callback(workbench, threshold, main_only)])]}


def _has_long(value: dict[str, Any], threshold: int) -> bool:
    return any(
        isinstance(v, str) and len(v) > threshold or isinstance(v, dict) and _has_long(v, threshold)
        for k, v in value.items()
        if k not in _KEEP_KEYS
    )
