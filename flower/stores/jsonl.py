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
* Each line is decoded on its own: one invalid UTF-8 byte (or a multibyte character torn by a crash at the
  end of the file) costs at most that line, never the file. Such a line is reported; with `salvage=True` its
  bad bytes become U+FFFD and a line that then parses is kept. A byte-order mark before the first line is
  dropped (it would otherwise make the first entry invalid JSON).
* A line that is valid JSON but not an object (`42`, `"text"`, `[1]`) is reported and dropped: a transcript
  entry is always an object. An object without a string `type` is reported but kept (the CLI ignores
  entries it does not know; dropping it could break a `parentUuid` chain).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JsonlRead", "LineError", "decode_line", "parse_jsonl", "read_jsonl"]

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

    An unreadable file (missing, a directory) raises `OSError` as usual: that is not a per-line problem.
    Bytes that are not UTF-8 are a per-line problem (see the module docstring).
    """
    with open(path, "rb") as handle:
        return parse_jsonl(handle, name=str(path), salvage=salvage)


def parse_jsonl(lines: Any, *, name: str = "<transcript>", salvage: bool = True) -> JsonlRead:
    """Parse an iterable of lines (an open file, `text.splitlines()`, bytes lines of a binary file) the same
    way as `read_jsonl`."""
    entries: list[dict[str, Any]] = []
    errors: list[LineError] = []
    for number, line in enumerate(lines, start=1):
        text, problem = decode_line(line, first=number == 1)
        text = text.strip()
        if not text:
            continue
        if problem is not None:
            if not salvage:
                errors.append(LineError(name, number, f"{problem}; line skipped"))
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                errors.append(LineError(name, number, f"{problem}; line skipped"))
                continue
            if isinstance(value, dict):
                entries.append(value)
                errors.append(LineError(name, number, f"{problem}; replaced by U+FFFD, kept", kept=1))
            else:
                errors.append(LineError(name, number, f"{problem}; a JSON {_kind(value)}, line skipped"))
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


def decode_line(line: str | bytes, *, first: bool = False) -> tuple[str, str | None]:
    """One line as text, and what was wrong with its bytes (None when they were clean UTF-8).

    A byte-order mark is dropped from the first line; bad bytes become U+FFFD and are named in the problem.
    """
    if isinstance(line, str):
        return (line.removeprefix("\ufeff") if first else line), None
    if first:
        line = line.removeprefix(b"\xef\xbb\xbf")
    try:
        return line.decode("utf-8"), None
    except UnicodeDecodeError as error:
        bad = line[error.start : error.end].hex(" ")
        torn = error.end >= len(line.rstrip(b"\r\n"))
        what = "a multibyte character torn at the end" if torn and error.reason == "unexpected end of data" else (
            "invalid UTF-8"
        )
        return line.decode("utf-8", "replace"), f"{what} (bytes {bad} at byte {error.start + 1})"
