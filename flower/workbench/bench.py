"""Layer two: the workbench, a folder of reusable work that outlives every session (S-10..S-13, B-3, B-4).

A `Workbench` owns `scripts/` (re-runnable checks, first line `# desc: ...`), `artifacts/` (long outputs),
`notes/` (one decision per file), `spill/` (layer three) and a generated `INDEX.md`. Its reuse
statistics (S-14) live in `flower.workbench.stats`.

Invariants:
- One `Workbench` object is the single source of the location; nothing else computes a default path
  (the earlier implementation had two defaults, so a brief could point at one folder while the index
  scanned another).
- "Inside the workbench" is always decided on resolved real paths, never by substring.
- INDEX.md is written atomically and only when its text changes, so watchers and caches see no churn.
- INDEX.md and the prompt listing show at most `max_index_entries` files per section and say how many
  more exist (S-11): a workbench of thousands of files must not cost thousands of lines to read.
- The prompt block splits into a stable part (location + rules, for the system prompt, identical across
  steps and generations) and a changing listing (for the step's first user message) (B-3).
- File names and descriptions are escaped: no newline or control character from disk reaches a prompt.
- Workers isolated in git worktrees (L-13) get a workbench outside the checkout (`outside_checkout`): the CLI
  refuses an isolated agent's Write and Edit anywhere in the shared checkout (it checks the resolved path
  before any hook runs), and allows them outside it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk.types import HookEvent

from flower import texts
from flower.errors import ConfigError, UnsafePathError
from flower.util.confined import Confined, resolve_inside

__all__ = [
    "Entry",
    "Placement",
    "Section",
    "Workbench",
    "index_guard",
    "outside_checkout",
    "relay_guard",
    "relay_input",
    "strip_listing",
    "workbench_hooks",
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


def outside_checkout(workspace: str | os.PathLike[str]) -> Path:
    """The workbench root of a workspace whose workers are isolated in git worktrees: one folder per
    workspace under the user's state folder (`$XDG_STATE_HOME`, default `~/.local/state`), outside every
    checkout, so an isolated worker's Write and Edit reach it."""
    real = os.path.realpath(workspace)
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    name = re.sub(r"[^\w.-]+", "_", Path(real).name) or "workspace"
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return Path(state) / "flower" / "workbenches" / f"{name}-{digest}"


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
        if root is None:
            # A committed `.flower` symlink must not carry the workbench (spill copies of tool output
            # included) out of the workspace; one inside it is followed once, here, and never again.
            parts = resolve_inside(self.workspace, dirname)
            self._base = Confined(self.workspace, parts)
        else:
            self._base = Confined(os.path.realpath(root))  # declared by the caller: its own anchor
        self.root = self._base.path
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
        """Create the folders (idempotent), and `.ignore` / `.gitignore` files naming spill/ unless the
        workbench already has its own: ripgrep (the Grep tool) then leaves spill copies out of searches
        over the workspace (a spill file named as the path is still searched), and git does not pick up
        copies of tool outputs, which may hold secrets from logs. Returns self."""
        for section in (*SECTIONS, "spill"):
            self.folder(section).make()
        for marker in (".ignore", ".gitignore"):
            if not self._base.lexists(marker):
                self._base.write_atomic(marker, b"spill/\n", prefix=f".{marker}.")
        return self

    def folder(self, *parts: str) -> Confined:
        """A folder of the workbench (e.g. `folder("spill")`), opened without following any symlink below
        the workspace (or below an external root): every write into the workbench goes through one."""
        return self._base.child(*parts)

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
                    info = full.lstat()
                    size = info.st_size
                    # a symlink is listed, never read: its target may lie outside the workspace
                    head = _read_head(full) if stat.S_ISREG(info.st_mode) else ""
                except OSError:
                    continue  # vanished or unreadable between listing and reading: not indexable
                rel = escape(full.relative_to(self.root).as_posix())
                found.append(Entry(rel, describe(head), size))
        return sorted(found, key=lambda e: e.path)

    # --- INDEX.md -------------------------------------------------------------------------------

    def index_text(self) -> str:
        """The text of INDEX.md: at most `max_index_entries` files per section, then how many more (S-11)."""
        parts = [texts.WORKBENCH_INDEX_HEAD, ""]
        for name in SECTIONS:
            parts.extend(self._section_lines(name, self.entries(name)))
            parts.append("")
        return "\n".join(parts)

    def refresh(self) -> bool:
        """Regenerate INDEX.md; write it (atomically) only if its text changed. True when written."""
        self.ensure()
        text = self.index_text()
        data = text.encode("utf-8")
        if self._base.read_bytes(self.index_path.name) == data:
            return False
        self._base.write_atomic(self.index_path.name, data, prefix=f".{self.index_path.name}.")
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
            lines.extend(self._section_lines(name, self.entries(name)))
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

    def _section_lines(self, name: Section, found: list[Entry]) -> list[str]:
        """A section's header, its first `max_index_entries` entries, and how many are left out."""
        lines = [texts.WORKBENCH_LISTING_SECTION.format(name=name, count=len(found))]
        shown = found[: self.max_index_entries]
        for e in shown:
            template = texts.WORKBENCH_LISTING_ENTRY if e.description else texts.WORKBENCH_LISTING_ENTRY_NODESC
            lines.append(template.format(path=e.path, desc=e.description, size=human_size(e.size)))
        if not found:
            lines.append(texts.WORKBENCH_LISTING_EMPTY)
        elif len(found) > len(shown):
            lines.append(texts.WORKBENCH_LISTING_MORE.format(count=len(found) - len(shown), name=name))
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

    async def _index_guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        tool_input = input_data.get("tool_input") or {}
        path = tool_input.get("file_path") if isinstance(tool_input, Mapping) else None
        if isinstance(path, str) and workbench.contains(path, input_data.get("cwd")):
            try:
                workbench.refresh()
            except (OSError, UnsafePathError):
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

    async def _relay_guard(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
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


def strip_listing(text: str) -> str:
    """A first user message without the workbench listing the runtime put in front of it (B-3)."""
    head = texts.WORKBENCH_LISTING_HEAD.split("{", 1)[0]
    if text.startswith(head) and "\n\n" in text:
        return text.split("\n\n", 1)[1]
    return text
