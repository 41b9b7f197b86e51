"""`CompactPolicy`: how the CLI's own auto-compaction is configured (S-23, docs/sdk-notes.md#compaction).

The SDK has no compaction option; the CLI reads environment variables. `auto` leaves the CLI alone
(it compacts at window - 33k), `no_summary` turns auto-compaction off (`DISABLE_AUTO_COMPACT=1`; flower's
generations take over), `off` turns every compaction off, /compact included (`DISABLE_COMPACT=1`).
`window` caps the CLI's auto-compact window (`CLAUDE_CODE_AUTO_COMPACT_WINDOW`, at least 100k).
Invalid values fail at construction, not inside a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from flower.errors import ConfigError

__all__ = ["CompactMode", "CompactPolicy"]

CompactMode = Literal["auto", "no_summary", "off"]
_MIN_WINDOW = 100_000


@dataclass(frozen=True)
class CompactPolicy:
    """The CLI's compaction switches for one spec."""

    mode: CompactMode = "auto"
    """`auto` (the CLI compacts), `no_summary` (auto-compaction off), `off` (all compaction off)."""
    window: int | None = None
    """Caps the CLI's auto-compact window in tokens (>= 100,000); None keeps the model's window."""

    def __post_init__(self) -> None:
        if self.mode not in get_args(CompactMode):
            raise ConfigError(f"CompactPolicy mode must be one of auto, no_summary, off, not {self.mode!r}")
        if self.window is not None and self.window < _MIN_WINDOW:
            raise ConfigError(f"CompactPolicy window must be at least {_MIN_WINDOW:,} tokens, not {self.window:,}")

    def env(self) -> dict[str, str]:
        """The environment variables that make the CLI behave this way."""
        env: dict[str, str] = {}
        if self.mode == "no_summary":
            env["DISABLE_AUTO_COMPACT"] = "1"
        elif self.mode == "off":
            env["DISABLE_COMPACT"] = "1"
        if self.window is not None:
            env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(self.window)
        return env
