"""The rewrite's stages as one ordered registry of named plan functions (like history processors).

Each stage reads the untouched transcript and records the edits it wants in the shared `Plan`; the
rewrite runs the active stages in this order, then applies the plan in one pass. The order is the
rewrite's contract: expiry, trim, denials, then the residue a disconnect leaves (API errors, interrupted
results, orphan calls). The manifest records the names of a run's active stages and `flower preview`
shows them, so what a resume does is read from this one list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flower.stores._plan import Plan
from flower.stores._transcript import Entry, TranscriptIndex
from flower.stores.prune import plan_api_errors, plan_denials, plan_interrupts, plan_orphans
from flower.stores.trim import EphemeralPolicy, TrimPolicy, plan_expiry, plan_trim

__all__ = ["STAGES", "RewriteOptions", "Stage", "Transcript", "active_stages", "stage_names"]


@dataclass(frozen=True)
class RewriteOptions:
    """A rewrite's settings, resolved (None: that stage is off)."""

    ephemeral: EphemeralPolicy | None = None
    trim: TrimPolicy | None = None
    keep_denials: int | None = 1
    """How many of the newest permission-rule denials stay; None keeps them all."""
    workspace: Path | None = None
    """Where trimmed results are spilled (`<workspace>/.flower/spill/`)."""


@dataclass(frozen=True)
class Transcript:
    """The untouched input every stage reads."""

    entries: list[Entry]
    index: TranscriptIndex
    interrupted: set[tuple[int, int]]
    """(entry, block) of the results of interrupted calls: the interrupt stage owns them."""


@dataclass(frozen=True)
class Stage:
    """One named rewrite stage."""

    name: str
    plan: Callable[[Transcript, Plan, RewriteOptions], None]
    """Records the stage's edits (never changes the input)."""
    active: Callable[[RewriteOptions], bool]
    about: str
    """What the stage does, in one line."""


def _expiry(t: Transcript, plan: Plan, options: RewriteOptions) -> None:
    assert options.ephemeral is not None
    plan_expiry(t.entries, t.index, plan, options.ephemeral, t.interrupted)


def _trim(t: Transcript, plan: Plan, options: RewriteOptions) -> None:
    assert options.trim is not None and options.workspace is not None
    plan_trim(t.entries, t.index, plan, options.trim, options.workspace, t.interrupted)


def _denials(t: Transcript, plan: Plan, options: RewriteOptions) -> None:
    assert options.keep_denials is not None
    plan_denials(t.entries, t.index, plan, options.keep_denials)


def _always(options: RewriteOptions) -> bool:
    return True


STAGES: tuple[Stage, ...] = (
    Stage("expiry", _expiry, lambda o: o.ephemeral is not None, "stale glance and Read results become one line"),
    Stage("trim", _trim, lambda o: o.trim is not None, "large results move to the spill folder, a pointer stays"),
    Stage("denials", _denials, lambda o: o.keep_denials is not None,
          "all but the newest denials go, each call with its result"),
    Stage("api errors", lambda t, plan, o: plan_api_errors(t.entries, plan), _always,
          "the CLI's synthetic API-error messages go"),
    Stage("interrupts", lambda t, plan, o: plan_interrupts(t.entries, plan, t.interrupted), _always,
          "an interrupted call's result gets a neutral note"),
    Stage("orphans", lambda t, plan, o: plan_orphans(t.entries, t.index, plan), _always,
          "a call without a result gets one"),
)


def active_stages(options: RewriteOptions) -> tuple[Stage, ...]:
    """The stages a rewrite with `options` runs, in order."""
    return tuple(stage for stage in STAGES if stage.active(options))


def stage_names(options: RewriteOptions) -> list[str]:
    return [stage.name for stage in active_stages(options)]
