"""Layer two: the workbench, a folder of reusable work that outlives every session (S-10..S-14, B-3, B-4).

A `Workbench` owns `scripts/` (re-runnable checks, first line `# desc: ...`), `artifacts/` (long outputs),
`notes/` (one decision per file), `spill/` (layer three) and a generated `INDEX.md`.

Invariants:
- One `Workbench` object is the single source of the location; nothing else computes a default path
  (INVENTORY F-87: two defaults let a brief point at one folder while the index scans another).
- "Inside the workbench" is always decided on resolved real paths, never by substring.
- INDEX.md is written atomically and only when its text changes, so watchers and caches see no churn.
- The prompt block splits into a stable part (location + rules, for the system prompt, identical across
  steps and generations) and a changing listing (for the step's first user message) (B-3).
- File names and descriptions are escaped: no newline or control character from disk reaches a prompt.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import tempfile
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import HookMatcher
from claude_agent_sdk.types import HookContext, HookEvent, HookJSONOutput

from flower.core import texts
from flower.errors import ConfigError

__all__ = [
    "Entry",
    "Placement",
    "ScriptUse",
    "Section",
    "Workbench",
    "WorkbenchStats",
    "index_guard",
    "relay_guard",
    "relay_input",
    "workbench_hooks",
    "workbench_stats",
]

Section = Literal["scripts", "artifacts", "notes"]
Placement = Literal["user", "system"]
SECTIONS: tuple[Section, ...] = ("scripts", "artifacts", "notes")

_DESC_LINES = 8  # a `# desc:` line is looked for only near the top (after a shebang, an encoding line)
_DESC_MAX = 100
_HEAD_BYTES = 4096
_DESC_RE = re.compile(r"^\s*(?:#+|//+|--+)\s*desc\s*[:\uff1a]\s*(.*?)\s*$", re.IGNORECASE)
_COMMENT_RE = re.compile(r"^\s*(?:#+|//+|--+|/\*+|\*+)\s*(.*?)\s*(?:\*/)?\s*$")
_DOCSTRING_RE = re.compile(r"^\s*[rRbBuU]?(?:\"\"\"|''')\s*(.*?)\s*(?:\"\"\"|''')?\s*$")


@dataclass(frozen=True)
class Entry:
    """One file of a workbench section, as the index shows it."""

    path: str
    """Path relative to the workbench root, with `/` separators (e.g. `scripts/check.py`)."""
    description: str
    """One line from the file's `# desc:` line, first comment or docstring; "" when none. Escaped."""
    size: int
    """Size in bytes."""


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str], cwd: str | None = None) -> bool:
    """True when `path` (relative ones taken from `cwd`) resolves to `root` or below it.

    Both sides go through `os.path.realpath`, so symlinks and `..` cannot fake or hide membership.
    """
    p = os.fspath(path)
    if not p:
        return False
    if not os.path.isabs(p):
        p = os.path.join(cwd if cwd is not None else os.getcwd(), p)
    real, base = os.path.realpath(p), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def escape(text: str) -> str:
    """Make `text` safe for one prompt line: control, format and separator characters become escapes."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def describe(head: str) -> str:
    """The one-line description of a file from its first lines (S-10).

    A `# desc:` line (also `//`, `--` markers, ASCII or full-width colon) in the first lines wins; else the
    first comment line that is not a shebang or editor directive, else the first docstring line.
    """
    lines = head.splitlines()[:_DESC_LINES]
    for line in lines:
        m = _DESC_RE.match(line)
        if m and m.group(1):
            return _clip(m.group(1))
    in_docstring = False
    for line in lines:
        s = line.strip()
        if not s or s.startswith("#!") or "-*-" in s or s.startswith(("# vim:", "// @ts-", "/// <")):
            continue
        m = _DOCSTRING_RE.match(line) or _COMMENT_RE.match(line)
        text = m.group(1) if m else s if in_docstring else ""
        if len(text) > 3 and not set(text) <= set("#/-*=~ "):
            return _clip(text)
        in_docstring = bool(_DOCSTRING_RE.match(line))  # an opener alone: its text is on the next line
    return ""


def _clip(text: str) -> str:
    text = escape(text.strip())
    return text if len(text) <= _DESC_MAX else text[: _DESC_MAX - 1] + "\N{HORIZONTAL ELLIPSIS}"


def human_size(size: int) -> str:
    """Bytes in a short decimal form: `812 B`, `4.1 KB`, `2.3 MB`."""
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


def write_atomic(path: Path, text: str) -> None:
    """Write through a temp file in the same folder and `os.replace`: readers see old or new, never half."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Workbench:
    """The workbench folder of one run: where it is, what it holds, and how prompts mention it."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        dirname: str = ".flower",
        max_index_entries: int = 40,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        if max_index_entries < 1:
            raise ConfigError(f"max_index_entries must be at least 1, got {max_index_entries}")
        if root is None and (not dirname or os.path.isabs(dirname) or ".." in Path(dirname).parts):
            raise ConfigError(f"workbench dirname must be a relative name inside the workspace: {dirname!r}")
        self.workspace = Path(os.path.realpath(workspace))
        self.root = Path(os.path.realpath(root)) if root is not None else self.workspace / dirname
        self.max_index_entries = max_index_entries

    def __repr__(self) -> str:
        return f"Workbench(root={str(self.root)!r})"

    @property
    def external(self) -> bool:
        """True when the workbench lies outside the workspace (then agents need its absolute path)."""
        return not inside(self.root, self.workspace)

    @property
    def scripts(self) -> Path:
        return self.root / "scripts"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def notes(self) -> Path:
        return self.root / "notes"

    @property
    def spill(self) -> Path:
        return self.root / "spill"

    @property
    def index_path(self) -> Path:
        return self.root / "INDEX.md"

    def ensure(self) -> Workbench:
        """Create the folders (idempotent). Returns self."""
        for d in (self.scripts, self.artifacts, self.notes, self.spill):
            d.mkdir(parents=True, exist_ok=True)
        return self

    def contains(self, path: str | os.PathLike[str], cwd: str | None = None) -> bool:
        return inside(path, self.root, cwd)

    def section_of(self, path: str | os.PathLike[str], cwd: str | None = None) -> Section | None:
        """Which section a path resolves into, or None."""
        for name in SECTIONS:
            if inside(path, self.root / name, cwd):
                return name
        return None

    def entries(self, section: Section) -> list[Entry]:
        """Every file of a section, recursively, sorted by path; dotfiles and dot-folders skipped."""
        base = self.root / section
        found: list[Entry] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                full = Path(dirpath) / name
                try:
                    size = full.stat().st_size
                    head = _read_head(full)
                except OSError:
                    continue  # vanished or unreadable between listing and reading: not indexable
                rel = escape(full.relative_to(self.root).as_posix())
                found.append(Entry(rel, describe(head), size))
        return sorted(found, key=lambda e: e.path)

    # --- INDEX.md -------------------------------------------------------------------------------

    def index_text(self) -> str:
        """The full index: every entry of every section (INDEX.md is read on demand, so no cap)."""
        parts = [texts.WORKBENCH_INDEX_HEAD, ""]
        for name in SECTIONS:
            parts.extend(self._section_lines(name, self.entries(name), cap=None))
            parts.append("")
        return "\n".join(parts)

    def refresh(self) -> bool:
        """Regenerate INDEX.md; write it (atomically) only if its text changed. True when written."""
        self.ensure()
        text = self.index_text()
        try:
            if self.index_path.read_text(encoding="utf-8") == text:
                return False
        except (OSError, UnicodeDecodeError):
            pass
        write_atomic(self.index_path, text)
        return True

    # --- prompt blocks (S-12, B-3) ------------------------------------------------------------

    def prompt_block(self) -> str:
        """The stable part: location and the three rules. Identical for the whole life of the run."""
        external = texts.WORKBENCH_EXTERNAL if self.external else ""
        return texts.WORKBENCH_RULES.format(root=escape(str(self.root)), external=external)

    def listing_block(self) -> str:
        """The changing part: what each section holds, at most `max_index_entries` lines per section."""
        lines = [texts.WORKBENCH_LISTING_HEAD.format(root=escape(str(self.root)))]
        for name in SECTIONS:
            lines.extend(self._section_lines(name, self.entries(name), cap=self.max_index_entries))
        return "\n".join(lines)

    def system_append(self, placement: Placement = "user") -> str:
        """What goes into the system prompt's `append`. "user" (cache-stable): rules only; "system"
        (the seed's placement): rules and listing, so every new file invalidates the cached prefix."""
        _check_placement(placement)
        if placement == "system":
            return self.prompt_block() + "\n\n" + self.listing_block()
        return self.prompt_block()

    def first_message_prefix(self, placement: Placement = "user") -> str:
        """What to put before the step's first user message: the listing with "user", nothing with "system"."""
        _check_placement(placement)
        return self.listing_block() if placement == "user" else ""

    def first_message(self, prompt: str, placement: Placement = "user") -> str:
        """The step's first user message with the listing in front of it (when the placement wants it)."""
        prefix = self.first_message_prefix(placement)
        return f"{prefix}\n\n{prompt}" if prefix else prompt

    def relay_line(self) -> str:
        """The one line appended to every Agent prompt (B-4)."""
        return texts.WORKBENCH_RELAY.format(root=escape(str(self.root)))

    def _section_lines(self, name: Section, found: list[Entry], cap: int | None) -> list[str]:
        lines = [texts.WORKBENCH_LISTING_SECTION.format(name=name, count=len(found))]
        shown = found if cap is None else found[:cap]
        for e in shown:
            template = texts.WORKBENCH_LISTING_ENTRY if e.description else texts.WORKBENCH_LISTING_ENTRY_NODESC
            lines.append(template.format(path=e.path, desc=e.description, size=human_size(e.size)))
        if not found:
            lines.append(texts.WORKBENCH_LISTING_EMPTY)
        elif len(found) > len(shown):
            lines.append(texts.WORKBENCH_LISTING_MORE.format(count=len(found) - len(shown)))
        return lines


def _check_placement(placement: str) -> None:
    if placement not in ("user", "system"):
        raise ConfigError(f"workbench placement must be 'user' or 'system', got {placement!r}")


def _read_head(path: Path) -> str:
    with open(path, "rb") as f:
        raw = f.read(_HEAD_BYTES)
    if b"\x00" in raw:
        return ""  # binary: no description
    return raw.decode("utf-8", errors="replace")


# --- hooks ------------------------------------------------------------------------------------


def index_guard(workbench: Workbench) -> Any:
    """PostToolUse callback for Write|Edit: refresh INDEX.md when the written path resolves inside the
    workbench (S-11). Never changes the tool result; always returns {}."""

    async def _index_guard(input_data: Any, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        tool_input = input_data.get("tool_input") or {}
        path = tool_input.get("file_path") if isinstance(tool_input, Mapping) else None
        if isinstance(path, str) and workbench.contains(path, input_data.get("cwd")):
            try:
                workbench.refresh()
            except OSError:
                pass  # an index that lags one write is harmless; a failing hook is not
        return {}

    return _index_guard


def relay_input(workbench: Workbench, tool_input: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Agent tool input with the relay line appended to its prompt, or None when nothing to do.

    Pure, so a runtime can chain it with other Agent input rewrites in ONE hook: the CLI lets each
    hook's `updatedInput` replace the whole input, so two rewriting hooks on Agent would race.
    """
    prompt = tool_input.get("prompt")
    if not isinstance(prompt, str) or tool_input.get("subagent_type") == "fork":
        return None  # a fork copies the parent's system prompt, which already names the workbench
    line = workbench.relay_line()
    if line in prompt:
        return None
    return {**tool_input, "prompt": f"{prompt.rstrip()}\n\n{line}"}


def relay_guard(workbench: Workbench) -> Any:
    """PreToolUse callback for Agent: append the workbench line to the subagent's prompt (B-4).

    Returns `updatedInput` WITHOUT a `permissionDecision`: in CLI 2.1.332 that is applied as a plain
    input rewrite and the call still goes through the normal permission flow (an "allow" would also
    auto-approve it and bypass the caller's own rules).
    """

    async def _relay_guard(input_data: Any, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        tool_input = input_data.get("tool_input")
        updated = relay_input(workbench, tool_input) if isinstance(tool_input, Mapping) else None
        if updated is None:
            return {}
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": updated}}

    return _relay_guard


def workbench_hooks(workbench: Workbench, *, relay: bool = True) -> dict[HookEvent, list[HookMatcher]]:
    """Ready-made matchers: index refresh on Write|Edit and, with `relay`, the Agent prompt relay."""
    hooks: dict[HookEvent, list[HookMatcher]] = {
        "PostToolUse": [HookMatcher(matcher="Write|Edit", hooks=[index_guard(workbench)])],
    }
    if relay:
        hooks["PreToolUse"] = [HookMatcher(matcher="Agent", hooks=[relay_guard(workbench)])]
    return hooks


# --- statistics (S-14) ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptUse:
    """How one script was used during a run."""

    path: str
    """Path relative to the workbench root (`scripts/check.py`)."""
    writes: int
    """Write/Edit calls on it."""
    runs: int
    """Bash commands that ran it."""


@dataclass(frozen=True)
class WorkbenchStats:
    """Workbench reuse of one run, from its transcripts (main and subagents) and the disk."""

    scripts_written: int
    """Distinct scripts created or changed with Write/Edit."""
    script_writes: int
    """Write/Edit calls on scripts/."""
    scripts_executed: int
    """Distinct scripts run at least once."""
    script_runs: int
    """Bash commands that ran a script (a command running two scripts counts for both)."""
    scripts_rerun: int
    """Distinct scripts run more than once: the reuse the workbench exists for."""
    scripts: int
    """Files in scripts/ now."""
    artifacts: int
    """Files in artifacts/ now."""
    notes: int
    """Files in notes/ now."""
    per_script: tuple[ScriptUse, ...]
    """Every script written or run, sorted by path."""


_INTERPRETER_RE = re.compile(
    r"^(?:python[0-9.]*|pypy[0-9.]*|bash|sh|zsh|dash|ksh|node|deno|bun|tsx|ts-node|ruby|perl|php|"
    r"Rscript|lua|julia|pwsh|pytest|uv|poetry|pipenv|npx)$"
)
_WRAPPERS = frozenset({"env", "time", "nice", "nohup", "sudo", "exec", "command", "timeout", "stdbuf"})
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATOR_RE = re.compile(r"^[();<>|&]+$")


def workbench_stats(workbench: Workbench, entries: Any) -> WorkbenchStats:
    """Count script writes and runs in transcript `entries` (dicts as stored; a list may also hold
    whole lists, e.g. the main transcript and each subagent's) and the files on disk.

    Tool calls are deduplicated by their `tool_use` id, since one API message can be stored as several
    entries. A script "runs" when a Bash command executes its path directly or hands it (path or
    basename) to an interpreter; merely naming it (`cat`, `chmod`, redirections) does not count.
    """
    on_disk = {name: workbench.entries(name) for name in SECTIONS}
    known = {e.path for e in on_disk["scripts"]}
    writes: dict[str, int] = {}
    commands: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for entry in _flatten(entries):
        cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
        for block in _tool_uses(entry):
            if block.get("id") in seen:
                continue
            seen.add(str(block.get("id")))
            name, tool_input = block.get("name"), block.get("input") or {}
            if name in ("Write", "Edit") and isinstance(tool_input.get("file_path"), str):
                rel = _script_rel(workbench, tool_input["file_path"], cwd)
                if rel is not None:
                    writes[rel] = writes.get(rel, 0) + 1
            elif name == "Bash" and isinstance(tool_input.get("command"), str):
                commands.append((tool_input["command"], cwd))
    known |= set(writes)
    runs: dict[str, int] = {}
    for command, cwd in commands:
        for rel in _scripts_run(workbench, command, cwd, known):
            runs[rel] = runs.get(rel, 0) + 1
    per_script = tuple(
        ScriptUse(p, writes.get(p, 0), runs.get(p, 0)) for p in sorted(set(writes) | set(runs))
    )
    return WorkbenchStats(
        scripts_written=len(writes),
        script_writes=sum(writes.values()),
        scripts_executed=len(runs),
        script_runs=sum(runs.values()),
        scripts_rerun=sum(1 for n in runs.values() if n > 1),
        scripts=len(on_disk["scripts"]),
        artifacts=len(on_disk["artifacts"]),
        notes=len(on_disk["notes"]),
        per_script=per_script,
    )


def _flatten(entries: Any) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for item in entries:
        if isinstance(item, Mapping):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.extend(x for x in item if isinstance(x, Mapping))
    return out


def _tool_uses(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = entry.get("message")
    if entry.get("type") != "assistant" or not isinstance(message, Mapping):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]


def _script_rel(workbench: Workbench, path: str, cwd: str | None) -> str | None:
    """`scripts/x.py` for a path that resolves to a file (or future file) inside scripts/, else None."""
    if not inside(path, workbench.scripts, cwd) or os.path.isdir(_absolute(path, cwd)):
        return None
    real = os.path.realpath(_absolute(path, cwd))
    rel = os.path.relpath(real, os.path.realpath(workbench.root))
    return escape(Path(rel).as_posix())


def _absolute(path: str, cwd: str | None) -> str:
    return path if os.path.isabs(path) else os.path.join(cwd or os.getcwd(), path)


def _scripts_run(workbench: Workbench, command: str, cwd: str | None, known: set[str]) -> set[str]:
    by_name: dict[str, str] = {}
    for rel in sorted(known):
        by_name.setdefault(rel.rsplit("/", 1)[-1], rel)
    found: set[str] = set()
    for words in _simple_commands(command):
        target = _executed_word(words)
        if target is None:
            continue
        rel = _script_rel(workbench, os.path.expanduser(target), cwd) if "/" in target else by_name.get(target)
        if rel is not None and (rel in known or "/" in target):
            found.add(rel)
    return found


def _simple_commands(command: str) -> list[list[str]]:
    """Split a shell command into simple commands' words, dropping operators and redirection targets.
    A heuristic for counting only (the glance guard uses a real parser); unparsable lines are skipped."""
    result: list[list[str]] = []
    for line in command.splitlines():
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            continue
        words: list[str] = []
        skip_next = False
        for tok in tokens:
            if _OPERATOR_RE.match(tok):
                if "<" in tok or ">" in tok:
                    skip_next = True  # the next word is a redirection target, not an argument
                else:
                    result.append(words)
                    words = []
                continue
            if skip_next:
                skip_next = False
                continue
            words.append(tok)
        result.append(words)
    return [w for w in result if w]


def _executed_word(words: list[str]) -> str | None:
    """The word a simple command executes as a script: its program when path-like, else the first
    non-option argument of an interpreter."""
    i = 0
    while i < len(words) and (_ASSIGN_RE.match(words[i]) or words[i] in _WRAPPERS or words[i].startswith("-")):
        i += 1
        if words[i - 1] == "timeout" and i < len(words) and words[i][:1].isdigit():
            i += 1  # timeout's duration
    if i >= len(words):
        return None
    program = words[i]
    if "/" in program and not _INTERPRETER_RE.match(os.path.basename(program)):
        return program
    if not _INTERPRETER_RE.match(os.path.basename(program)):
        return None
    rest = iter(words[i + 1 :])
    for word in rest:
        if word == "-m" and _INTERPRETER_RE.match(next(rest, "")):
            continue  # `python -m pytest FILE` runs FILE
        if word in ("-m", "-c", "-e", "--eval"):
            return None  # another module or inline code, not a file
        if word.startswith("-") or word == "run" or _INTERPRETER_RE.match(os.path.basename(word)):
            continue
        return word
    return None
