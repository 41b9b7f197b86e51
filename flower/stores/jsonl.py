"""Reading a Claude Code transcript file (`.jsonl`) into entries, one error per bad line.

A transcript is one JSON object per line. Real files are not always that: a crash can glue two objects
onto one line (the newline of the first was never written), people hand-edit fixtures, editors add blank
lines. Reading never stops at a bad line: every other line still loads, and each bad one gives a
`LineError` that prints as `file:line: reason`.

Invariants:
* Entries come back in file order; blank lines are ignored silently.
* A line holding several JSON objects back to back is reported, and its objects are kept (`salvage=True`,
  the default) — they are whole entries, only the separator is missing. With `salvage=False` the line is
  dropped like any other bad line.
* A line that is valid JSON but not an object (`42`, `"text"`, `[1]`) is reported and dropped: a transcript
  entry is always an object. An object without a string `type` is reported but kept (the CLI ignores
  entries it does not know; dropping it could break a `parentUuid` chain).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JsonlRead", "LineError", "parse_jsonl", "read_jsonl"]

_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class LineError:
    """One line of a transcript file that is not a clean transcript entry."""

    path: str
    line: int
    """1-based line number."""
    reason: str
    kept: int = 0
    """How many entries were still taken from this line (glued objects, an object without `type`)."""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class JsonlRead:
    entries: list[dict[str, Any]]
    errors: tuple[LineError, ...]


def read_jsonl(path: str | Path, *, salvage: bool = True) -> JsonlRead:
    """Read a transcript file; see the module docstring for what happens to bad lines.

    An unreadable file (missing, a directory, not UTF-8) raises `OSError`/`UnicodeDecodeError` as usual:
    that is not a per-line problem.
    """
    with open(path, encoding="utf-8") as handle:
        return parse_jsonl(handle, name=str(path), salvage=salvage)


def parse_jsonl(lines: Any, *, name: str = "<transcript>", salvage: bool = True) -> JsonlRead:
    """Parse an iterable of lines (an open file, `text.splitlines()`) the same way as `read_jsonl`."""
    entries: list[dict[str, Any]] = []
    errors: list[LineError] = []
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text:
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            values, reason = _glued(text, error)
            if values is None or not salvage:
                errors.append(LineError(name, number, reason))
                continue
            kept = [v for v in values if isinstance(v, dict)]
            entries.extend(kept)
            errors.append(LineError(name, number, reason, kept=len(kept)))
            continue
        if not isinstance(value, dict):
            errors.append(LineError(name, number, f"a JSON {_kind(value)}, not an object; line skipped"))
        else:
            entries.append(value)
            if not isinstance(value.get("type"), str):
                errors.append(LineError(name, number, "an object without a string 'type'; kept", kept=1))
    return JsonlRead(entries, tuple(errors))


def _glued(text: str, error: json.JSONDecodeError) -> tuple[list[Any] | None, str]:
    """Split a line made of JSON values written back to back; None when it is simply not JSON."""
    values: list[Any] = []
    position = 0
    try:
        while position < len(text):
            value, position = _decoder.raw_decode(text, position)
            values.append(value)
            while position < len(text) and text[position].isspace():
                position += 1
    except json.JSONDecodeError:
        return None, f"invalid JSON: {error.msg} (column {error.colno})"
    kinds = ", ".join(_kind(v) for v in values)
    return values, f"{len(values)} JSON values glued on one line (a missing newline): {kinds}"


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        kind = value.get("type")
        return f"object of type {kind!r}" if isinstance(kind, str) else "object"
    return {str: "string", list: "array", bool: "boolean", type(None): "null"}.get(type(value), "number")
