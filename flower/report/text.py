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

__all__ = ["fit", "format_elapsed", "format_tokens", "sanitize"]

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
