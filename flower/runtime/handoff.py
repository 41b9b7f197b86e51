"""Generations instead of compaction (S-22..S-24).

The main thread grows monotonically even with every layer on; before the window fills, the same session
writes a handoff document and a fresh session continues from it plus the workbench. Nothing is
summarised away behind the model's back: the handoff is written by the model that knows the work, saved
to `notes/`, and readable by people.

Invariants:
- Only the main thread counts: the context of a main-thread API message is input + cache read + cache
  creation tokens, and each API message is counted once however many SDK messages carry it.
- Threshold = window - 25% of the window unless `headroom` is given (so any window works, 40k as well
  as 1M); a warning min(20k, headroom) earlier; `at` lowers it to a fixed token count, and by default
  the cost-driven threshold of `flower.runtime.economics` lowers it further, per generation (from the
  generation's start and growth), never above the window's or `at`'s.
- The window comes from `HandoffPolicy.window` (the runtime's config fills it from its `window` setting),
  else the model the session reports,
  else the spec's model, else `ANTHROPIC_MODEL`, each by its name, else 1M (the bundled CLI's default
  window); a real context overflow caps it at what overflowed (self-calibration).
- A handoff needs the sections `doing` and `next` (parsed by `flower.util.sections`, so a fenced heading is
  content); a reply without them is retried once, then replaced by a degraded handoff built from what the
  runtime knows.
- Overflow is recognised by the API's error codes first (`context_length_exceeded`, "N tokens > M"), then
  by wording, in a few languages.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flower import texts
from flower.agent.compact import CompactMode, CompactPolicy
from flower.agent.usage import message_context
from flower.errors import ConfigError
from flower.runtime.economics import Prices, cost_threshold, request_cost
from flower.util.confined import Confined
from flower.util.sections import parse_sections

__all__ = [
    "CompactMode",
    "CompactPolicy",
    "ContextMeter",
    "HandoffPolicy",
    "is_context_overflow",
    "overflow_window",
    "parse_handoff",
    "save_handoff",
]

DEFAULT_WINDOW = 1_000_000
_MODEL_WINDOWS = (("haiku", 200_000), ("claude-3", 200_000))
_ONE_M = re.compile(r"(?<![a-z0-9])1m(?![a-z0-9])")
DEFAULT_MAX_GENERATIONS = 64
"""A day of hands-on work needs at most about 48 cost-driven generations of 30 turns (docs/runtime.md,
"Choosing the cap"); 64 leaves room, and the start-over-the-threshold check stops a runaway loop long before."""


def model_window(model: str | None) -> int | None:
    """The window a model name implies, or None when the name says nothing (`[1m]` wins over the family)."""
    name = (model or "").lower()
    if not name:
        return None
    if _ONE_M.search(name):
        return DEFAULT_WINDOW
    return next((size for marker, size in _MODEL_WINDOWS if marker in name), None)
REQUIRED = ("doing", "next")
SECTIONS = ("doing", "decided", "dead ends", "next", "scene")


@dataclass(frozen=True)
class HandoffPolicy:
    """When a run hands over to a fresh session."""

    window: int | None = None
    """Context window in tokens; None follows the model in use, else 1M."""
    headroom: int | None = None
    """Tokens kept free below the window; None means 25% of the window."""
    max_generations: int = DEFAULT_MAX_GENERATIONS
    """More generations than this in one step stop the step; the last handoff is saved to continue from."""
    at: int | None = None
    """A fixed threshold: hand off once the main context reaches this many tokens, even far below the
    window (never later than the window's own threshold). None: no fixed one."""
    auto: bool = True
    """The cost-driven threshold (`flower.runtime.economics`): hand off where carrying the context on would
    cost more than a handoff, from where the generation started and how fast it grows (never later than the
    window's or `at`'s threshold). False: only the window and `at` decide."""
    min_turns: int = 30
    """The shortest generation the cost-driven threshold makes (a shorter one would lose recall)."""

    def __post_init__(self) -> None:
        if self.window is not None and self.window <= 0:
            raise ConfigError(f"HandoffPolicy window must be positive, not {self.window}")
        if self.headroom is not None and self.headroom < 0:
            raise ConfigError(f"HandoffPolicy headroom must not be negative, not {self.headroom}")
        if self.max_generations < 1:
            raise ConfigError("HandoffPolicy max_generations must be at least 1")
        if self.at is not None and self.at <= 0:
            raise ConfigError(f"HandoffPolicy at must be a positive token count, not {self.at}")
        if self.min_turns < 1:
            raise ConfigError(f"HandoffPolicy min_turns must be at least 1, not {self.min_turns}")

    def resolve_window(
        self, model: str | None = None, *, reported: str | None = None, env_model: str | None = None,
        calibrated: int | None = None,
    ) -> int:
        """The window in tokens: explicit, else the `reported` model's (what the session
        says it runs), else the spec's `model`, else `env_model` (ANTHROPIC_MODEL), else 1M; never more
        than a `calibrated` overflow."""
        window = self.window
        if window is None:
            window = next((w for w in map(model_window, (reported, model, env_model)) if w), DEFAULT_WINDOW)
        return min(window, calibrated) if calibrated else window

    def resolve_at(self) -> int | None:
        """The cost-driven threshold, or None."""
        return self.at

    def headroom_for(self, window: int) -> int:
        return self.headroom if self.headroom is not None else window // 4

    def threshold(self, model: str | None = None, **window: Any) -> int:
        size = self.resolve_window(model, **window)
        headroom = self.headroom_for(size)
        if headroom >= size:
            raise ConfigError(f"handoff headroom {headroom:,} leaves nothing of a {size:,}-token window")
        at = self.resolve_at()
        return min(size - headroom, at) if at is not None else size - headroom

    def warning(self, model: str | None = None, **window: Any) -> int:
        size = self.resolve_window(model, **window)
        return max(0, self.threshold(model, **window) - min(20_000, self.headroom_for(size)))


@dataclass
class ContextMeter:
    """Main-thread context per API message, each message counted once."""

    per_message: list[int] = field(default_factory=list)
    """Context of each distinct main-thread API message, in order."""
    warned: bool = False
    """The near-threshold warning was given."""
    generation_start: int = 0
    """Index in `per_message` of the current generation's first message."""
    seeded: int = 0
    """How many of `per_message` a resumed session's stored replies gave (not this step's own messages)."""
    first_request: float = 0.0
    """The input cost of the current generation's first message (input-token equivalents, `economics`)."""
    model: str | None = None
    prices: Prices = field(default_factory=Prices)
    """The prices of `model`, the model of the last reply (`observe` sets both)."""
    announced: int | None = None
    """The cost-driven threshold last announced for this generation."""
    resumed_generation: int = 1
    """The generation a resumed session ran in (its first message names it), from which the step goes on."""
    _seen: set[str] = field(default_factory=set)

    def new_generation(self) -> None:
        """The next message starts a generation: its own start, first request and growth."""
        self.generation_start, self.announced, self.warned = len(self.per_message), None, False

    def cost_threshold(self, min_turns: int) -> int | None:
        """The current generation's cost-driven threshold (`economics.cost_threshold`), or None yet."""
        return cost_threshold(self.per_message[self.generation_start :], self.first_request, self.prices,
                              min_turns=min_turns)

    def observe(self, message_id: str | None, usage: Mapping[str, Any] | None, model: str | None = None) -> bool:
        """Record a main-thread assistant message (of `model`, whose prices the cost model uses); False when it
        was already counted or has no usage."""
        if model and model != self.model:
            self.model, self.prices = model, Prices.of(model)
        size = message_context(usage)
        if not size or (message_id is not None and message_id in self._seen):
            return False
        if message_id is not None:
            self._seen.add(message_id)
        if len(self.per_message) == self.generation_start:
            self.first_request = request_cost(usage or {}, self.prices)
        self.per_message.append(size)
        return True

    @property
    def current(self) -> int:
        return self.per_message[-1] if self.per_message else 0


# The API's codes and shapes first (gateways in front of other models use OpenAI's code), wording last.
_OVERFLOW_CODES = re.compile(r"context_length_exceeded|model_context_window_exceeded|"
                             r"\b\d[\d,]* ?tokens? ?> ?\d[\d,]* ?(maximum|max)\b|"
                             r"\d[\d,]* ?\+ ?\d[\d,]* ?> ?\d[\d,]*", re.IGNORECASE)
_OVERFLOW_WORDS = re.compile(
    r"prompt is too long|context.?(length|window|limit)|maximum context|too many (total )?tokens|"
    r"exceeds? the context|input length and .?max_tokens.? exceed|"
    r"上下文.{0,8}(超|过长|溢出|上限)|(超出|超过).{0,8}上下文|提示词?过长|"  # Chinese gateways
    r"コンテキスト.{0,8}(超|上限)|프롬프트가 너무 깁니다|컨텍스트.{0,8}초과",  # Japanese, Korean
    re.IGNORECASE)
_LIMITS = (re.compile(r"> ?(\d[\d,]*)"), re.compile(r"(?:limit|maximum)[^0-9]{0,24}(\d[\d,]{4,})", re.IGNORECASE))


def is_context_overflow(text: str | None) -> bool:
    """Whether an error text says the context no longer fits: by error code or shape, else by wording."""
    return bool(text and (_OVERFLOW_CODES.search(text) or _OVERFLOW_WORDS.search(text)))


def overflow_window(text: str | None) -> int | None:
    """The window an overflow error names ("1000001 tokens > 1000000 maximum" -> 1000000), if it does."""
    if not is_context_overflow(text):
        return None
    match = next((m for m in (pattern.search(text or "") for pattern in _LIMITS) if m), None)
    if not match:
        return None
    value = int(match.group(1).replace(",", ""))
    return value if value >= 1_000 else None


def parse_handoff(text: str) -> dict[str, str]:
    """The sections of a handoff document, keyed by lower-case heading; {} when a required one is missing.
    A heading line inside a fenced code block is content (the shared `parse_sections`)."""
    sections = dict(parse_sections(text, known=SECTIONS))
    return sections if all(sections.get(k) for k in REQUIRED) else {}


def handoff_name(step: str) -> str:
    """A readable, distinct file stem for a step: letters of any script kept; when the name had to be
    changed (spaces, slashes, nothing left), a short hash of the real name keeps two steps apart."""
    name = unicodedata.normalize("NFC", step)
    slug = re.sub(r"[^\w.-]+", "-", name).strip("-.")[:80] or "step"
    if slug != name:
        slug += "-" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:6]
    return slug


def save_handoff(notes: Path | Confined, step: str, text: str) -> Path:
    """Write `notes/handoff-<step>.md`, archiving an earlier one under notes/handoffs/.

    Given a `Confined` folder (the workbench's notes), no symlink below its anchor is followed; a plain
    `Path` is its own anchor."""
    if not isinstance(notes, Confined):
        notes.mkdir(parents=True, exist_ok=True)
        notes = Confined(os.path.realpath(notes))
    slug = handoff_name(step)
    name = f"handoff-{slug}.md"
    with notes.open() as fd:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
    if info is not None:
        stamp = datetime.fromtimestamp(info.st_mtime, timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        notes.replace(name, notes.child("handoffs"), f"handoff-{slug}-{stamp}.md")
    notes.write_atomic(name, (text if text.endswith("\n") else text + "\n").encode("utf-8"), prefix=f".{name}.")
    return notes.path / name


def degraded_handoff(prompt: str, last_text: str, reason: str) -> str:
    """A handoff the runtime writes itself when the session cannot (its context overflowed)."""
    return texts.HANDOFF_DEGRADED.format(reason=reason, prompt=prompt.strip(),
                                         last=last_text.strip() or "(nothing)")


_GENERATION_SAID = re.compile(r"(?m)^" + re.escape(texts.HANDOFF_CONTINUE.split("{generation}", 1)[0]) + r"(\d+)\)")
"""The continuation's opening, at the start of a line (the workbench's listing may come before it)."""


def generation_of(entries: Any) -> int:
    """The generation a stored session ran in: the number its first prompt names (a generation after the
    first starts with `texts.HANDOFF_CONTINUE`), else 1."""
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("type") != "user":
            continue
        content = (entry.get("message") or {}).get("content")
        texts_ = [content] if isinstance(content, str) else [
            str(b.get("text", "")) for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        # the continuation starts a line of its message: a prompt that quotes it inside a line does not count
        for said in texts_:
            found = _GENERATION_SAID.search(said)
            if found:
                return int(found.group(1))
        return 1
    return 1
