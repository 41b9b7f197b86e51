"""Text for a terminal: sanitizing what a transcript holds, and short forms of numbers and durations.

Shared by the live view (`flower.cli.live`) and the readers' renderings (`flower.report.terminal`,
`flower.report.html`), so it lives below both.

Invariants:
- `sanitize` removes escape sequences (CSI, OSC, DCS/APC/PM/SOS, 8-bit forms, lone ESC), control
  characters and bidi overrides, so tool output can never move the cursor, retitle the window or hide text.
- `fit` counts display cells (wide characters count two) and never returns more than `width` cells.
"""

from __future__ import annotations

import re

from rich.cells import cell_len

__all__ = ["fit", "format_elapsed", "format_tokens", "sanitize", "wrap"]

_ESCAPES = re.compile(
    r"""
      \x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?     # OSC ... BEL / ST (or cut off)
    | \x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?          # DCS, SOS, PM, APC ... ST (Sixel rides in DCS)
    | \x1b\[[0-?]*[ -/]*[@-~]?                        # CSI
    | \x1b[ -/]*[0-~]?                                # two-char and nF escapes, lone ESC
    | \x9b[0-?]*[ -/]*[@-~]?                          # 8-bit CSI
    | [\x90\x98\x9d\x9e\x9f][^\x07\x9c]*(?:\x07|\x9c)?  # 8-bit DCS, SOS, OSC, PM, APC strings
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def sanitize(text: str, *, keep_newlines: bool = False) -> str:
    """`text` safe to print on a terminal: no escape sequence, no control character, no bidi override."""
    text = _ESCAPES.sub("", text).replace("\t", " ").replace("\r\n", "\n").replace("\r", "\n")
    if not keep_newlines:
        text = text.replace("\n", " ")
    return _CONTROLS.sub("", text)


def format_tokens(value: int | None) -> str:
    if value is None:
        return "?"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M".replace(".0M", "M")
    if value >= 1_000:
        return f"{value / 1_000:.1f}K".replace(".0K", "K")
    return str(value)


def format_elapsed(seconds: float) -> str:
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def fit(text: str, width: int) -> str:
    """`text` cut to `width` display cells, ending in "..." when cut."""
    if cell_len(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        size = cell_len(ch)
        if used + size > max(0, width - 3):
            break
        out.append(ch)
        used += size
    return "".join(out) + "..."


_NO_LINE_START = set("。，、；：！？」』）】》〉.,;:!?)]}%…·")


def _units(text: str) -> list[tuple[str, bool]]:
    """`text` as (unit, space_before) pairs: Latin words, single wide characters; closing punctuation
    glued to what precedes it, so that no line starts with it."""
    units: list[tuple[str, bool]] = []
    space = False
    for ch in text:
        if ch.isspace():
            space = True
            continue
        wide = cell_len(ch) > 1
        if units and not space and (ch in _NO_LINE_START or (not wide and cell_len(units[-1][0][-1]) == 1)):
            units[-1] = (units[-1][0] + ch, units[-1][1])
        else:
            units.append((ch, space))
        space = False
    return units


def wrap(text: str, width: int, *, first: str = "", hang: str = "  ") -> list[str]:
    """`text` (one paragraph, sanitized) word-wrapped to `width` display cells.

    Latin words break only at spaces, each wide (CJK) character is a break point, closing punctuation never
    starts a line, a word longer than a line is cut by cells. The first line starts with `first`, the
    following ones with `hang`. Every line fits in `width` cells (for `width` > the prefixes).
    """
    lines: list[str] = []
    line, prefix = first, first
    for unit, space in _units(text):
        while True:
            gap = " " if space and line != prefix else ""
            if cell_len(line) + cell_len(gap) + cell_len(unit) <= width:
                line += gap + unit
                break
            if line != prefix:  # break here and retry the unit on a fresh line
                lines.append(line)
                line = prefix = hang
                space = False
                continue
            room = max(1, width - cell_len(line))  # a unit longer than a whole line: cut it by cells
            head, used = "", 0
            for ch in unit:
                if used + cell_len(ch) > room and head:
                    break
                head += ch
                used += cell_len(ch)
            lines.append(line + head)
            line = prefix = hang
            unit, space = unit[len(head):], False
            if not unit:
                break
    if line != prefix or not lines:
        lines.append(line)
    return lines
