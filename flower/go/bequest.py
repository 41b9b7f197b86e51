"""The bequest: a short note for whoever opens the project next, in CLAUDE.md and AGENTS.md (L-14).

Five sections, pointers rather than contents (the block is loaded into every later session's cache
prefix): what this is, acceptance met / not met, generated files and their sources, dead ends, where the
workbench is. "What" and "workbench" are required; when the finishing session's text lacks them, a
mechanical fallback says so and still points at the workbench.

The block is managed between two HTML comment markers; everything else in the file is the user's and is
never deleted:
- file absent: created holding the block only;
- no markers: the block is appended after the untouched user text;
- exactly one begin marker before exactly one end marker: only the text between them is replaced, so
  writing the same body again leaves the file byte-identical;
- any other marker shape (orphan, repeated, misordered): a fresh block is appended, unless the file
  already ends with exactly that block.
A symlinked target is refused: a hostile repository could point CLAUDE.md anywhere.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flower.errors import ConfigError

__all__ = ["BEGIN", "END", "SECTIONS", "Bequest", "merge_block", "write_block", "write_bequest"]

BEGIN = "<!-- flower:bequest:begin -->"
END = "<!-- flower:bequest:end -->"
FILES = ("CLAUDE.md", "AGENTS.md")

#: (key, heading) in the order they are written.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("what", "What this is"),
    ("acceptance", "Acceptance"),
    ("generated", "Generated files"),
    ("dead_ends", "Dead ends"),
    ("workbench", "Workbench"),
)
REQUIRED = ("what", "workbench")

HEADER = (
    "Written by flower at the end of a run. You have no memory of that run: read the workbench first. "
    "Generated files are rebuilt from their sources: edit the sources, not the outputs."
)


@dataclass(frozen=True)
class Bequest:
    """The five sections; `degraded` when the finishing session's text could not be used as is."""

    what: str
    workbench: str
    acceptance: str = ""
    generated: str = ""
    dead_ends: str = ""
    degraded: str = ""

    @classmethod
    def from_sections(cls, sections: Mapping[str, str], *, request: str, workbench_hint: str) -> Bequest:
        """Build from parsed sections; missing required ones give the mechanical fallback."""
        found = {key: (sections.get(key) or "").strip() for key, _ in SECTIONS}
        missing = [key for key in REQUIRED if not found[key]]
        if not missing:
            return cls(**found)
        return cls.fallback(request=request, workbench_hint=workbench_hint,
                            why="the finishing session's note lacked: " + ", ".join(missing), known=found)

    @classmethod
    def fallback(cls, *, request: str, workbench_hint: str, why: str,
                 known: Mapping[str, str] | None = None) -> Bequest:
        known = known or {}
        return cls(
            what=known.get("what") or f"The result of a flower run for the request: {request.strip()}",
            workbench=known.get("workbench") or workbench_hint,
            acceptance=known.get("acceptance", ""),
            generated=known.get("generated", ""),
            dead_ends=known.get("dead_ends", ""),
            degraded=f"This note was not written by the model ({why}); it holds only what flower knew.",
        )

    def body(self) -> str:
        """The markdown between the markers (no markers), ending with a newline."""
        parts = [HEADER]
        if self.degraded:
            parts.append(f"> degraded: {self.degraded}")
        for key, heading in SECTIONS:
            text = getattr(self, key).strip()
            if text:
                parts.append(f"### {heading}\n{text}")
        return "\n\n".join(parts) + "\n"


def _marker_lines(lines: list[str], marker: str) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip() == marker]


def _block(body: str, newline: str) -> str:
    kept = [line for line in body.replace("\r\n", "\n").split("\n") if line.strip() not in (BEGIN, END)]
    inner = "\n".join(kept).rstrip("\n").replace("\n", newline)
    return f"{BEGIN}{newline}{inner}{newline}{END}{newline}"


def merge_block(existing: str | None, body: str) -> str:
    """The file's new text: `existing` (None = no file) with the managed block set to `body`. Pure."""
    if existing is None or existing == "":
        return _block(body, "\n")
    lines = existing.splitlines(keepends=True)
    begins, ends = _marker_lines(lines, BEGIN), _marker_lines(lines, END)
    if len(begins) == 1 and len(ends) == 1 and begins[0] < ends[0]:
        # The line ending our own begin marker was written with: the block keeps it.
        newline = "\r\n" if lines[begins[0]].endswith("\r\n") else "\n"
        block = _block(body, newline)
        end_line = lines[ends[0]]
        tail_newline = end_line[len(end_line.rstrip("\r\n")):]
        head = "".join(lines[: begins[0]])
        tail = "".join(lines[ends[0] + 1:])
        return head + block[: len(block) - len(newline)] + tail_newline + tail
    if any(existing.endswith(_block(body, newline)) for newline in ("\n", "\r\n")):
        return existing
    newline = "\r\n" if "\r\n" in existing else "\n"
    ending = existing[-2:]
    separator = "" if ending in ("\n\n",) or existing.endswith("\r\n\r\n") else (
        newline if existing.endswith("\n") else newline * 2)
    return existing + separator + _block(body, newline)


def write_block(path: Path, body: str) -> bool:
    """Set the managed block of `path` to `body`; True when the file changed.

    Raises ConfigError (one line) when `path` is a symlink or not a regular file. The file is replaced
    atomically, keeping its mode; bytes that are not UTF-8 in the user's text survive unchanged.
    """
    if path.is_symlink():
        raise ConfigError(f"{path} is a symlink: flower writes its bequest only into a regular file")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} is not a regular file: cannot write the bequest block into it")
    existing = path.read_bytes().decode("utf-8", "surrogateescape") if path.exists() else None
    text = merge_block(existing, body)
    if text == existing:
        return False
    mode = path.stat().st_mode & 0o7777 if existing is not None else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def write_bequest(workspace: Path, bequest: Bequest) -> list[Path]:
    """Write the same body into CLAUDE.md and AGENTS.md at the workspace root; the files that changed."""
    body = bequest.body()
    return [workspace / name for name in FILES if write_block(workspace / name, body)]
