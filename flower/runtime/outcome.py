"""How one CLI session ended, as a frozen record: the only thing the step loop's rules read from it.

Invariants:
- One kind per session, by precedence: an interrupt the user asked for, then a refresh the runtime
  stopped the turn for, then a handoff the session wrote, then a context overflow, then an error retrying
  cannot help (`fatal`), then any other error (`failed`), else `done`.
- An interrupted session that was also stopped for a refresh still counts as a refresh (`refreshed`):
  the resume then carries the user's remark instead of the refresh's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flower.runtime.handoff import is_context_overflow

__all__ = ["Outcome", "OutcomeKind", "outcome_kind"]

OutcomeKind = Literal["done", "handoff", "refresh", "interrupted", "overflow", "failed", "fatal"]


def outcome_kind(*, interrupted: bool, stale: int | None, handoff: str | None, error: str | None,
                 fatal: bool) -> OutcomeKind:
    """The one kind a session's facts add up to (the precedence above)."""
    if interrupted:
        return "interrupted"
    if stale is not None and error is None:
        return "refresh"
    if handoff is not None:
        return "handoff"
    if error is not None:
        if is_context_overflow(error):
            return "overflow"
        return "fatal" if fatal else "failed"
    return "done"


@dataclass(frozen=True)
class Outcome:
    """What one CLI session (one attempt) came back with."""

    kind: OutcomeKind
    session_id: str | None = None
    """The session the CLI ran (a fork's new id, a new session's first id, else the resumed one)."""
    text: str = ""
    """The final reply's text."""
    error: str | None = None
    """The one-line error that ended the session, if any."""
    status: int | None = None
    """The API's HTTP status for that error, when the CLI reported one."""
    handoff: str | None = None
    """The handoff document the session wrote (or the runtime's fallback when it could not)."""
    degraded: str | None = None
    """Why the handoff is the runtime's fallback, not the session's own document."""
    stale: int | None = None
    """The runtime ended the turn for a refresh that drops about this many stale tokens."""
    output: Any = None
    """The structured output the CLI accepted (plain JSON), when the step has an output type."""
    settled: bool = False
    """The CLI sent its result message (a step without one is not ok)."""
    cost: float = 0.0
    turns: int = 0
    worker_errors: tuple[str, ...] = ()
    """Workers cut off by a transient API failure (their dispatcher was told to dispatch them again)."""
    resets_at: float | None = None
    """The error is a subscription's usage limit, which resets at this time (epoch seconds)."""
    handoff_usage: Mapping[str, int] = field(default_factory=dict)
    """Tokens of the handoff round, as its result messages reported them (`USAGE_KEYS`)."""

    @property
    def refreshed(self) -> bool:
        """The runtime stopped this session for a refresh and nothing failed."""
        return self.stale is not None and self.error is None
