"""Refreshes: a live session resumed through the rewriting store, to drop what went stale (P-1, P-4, S-19).

The rewrites of layer four (expired glance and Read results, pruned denials, dropped API errors, trimmed
results) happen on `load()`, so a live session carries every stale snapshot until it is resumed; in a long
autonomous step that is one user turn of hundreds of rounds, and the snapshots pile up. A refresh ends the
turn at a tool boundary (the handoff's own stop hook) and resumes the SAME session: nothing the model wrote
is summarised, the history is the stored one as `load()` rewrites it, and the next message says so.

The price is the prompt cache: the resumed prefix differs where the first stale result was, so it is written
to the cache again (1.25x the input price) instead of read (0.1x). A refresh therefore waits until it pays:
at least `min_tokens`, and at least `share` of the live context, must go. That follows the API's own
context editing (`clear_tool_uses` with its `clear_at_least`), done on the client where the store keeps
the original.

Invariants:
- What a refresh would drop is measured by the store's own rewrite of the stored entries, minus what the
  live session already had dropped when it was resumed: never by a second, hand-kept estimate.
- The stored rows are never changed (P-3); a refresh is a resume, so every red line of S-20 holds.
- A check costs one load and rewrite of the transcript; after a check that says "not yet", the next one waits
  until the context has grown by what was missing (the stale part cannot grow faster than the context).
"""

from __future__ import annotations

from dataclasses import dataclass

from flower.errors import ConfigError

__all__ = ["CHARS_PER_TOKEN", "RefreshPolicy"]

CHARS_PER_TOKEN = 4
"""Characters per token when turning the characters a rewrite removes into tokens (the usual estimate)."""


@dataclass(frozen=True)
class RefreshPolicy:
    """When a live main-thread session is resumed to drop its stale results."""

    min_tokens: int = 10_000
    """Never refresh for less than this many tokens dropped."""
    share: float = 0.3
    """Nor for less than this share of the live context."""

    def __post_init__(self) -> None:
        if self.min_tokens < 1:
            raise ConfigError(f"RefreshPolicy min_tokens must be at least 1, not {self.min_tokens}")
        if not 0 < self.share < 1:
            raise ConfigError(f"RefreshPolicy share must be between 0 and 1, not {self.share}")

    def needed(self, context: int) -> int:
        """Tokens a refresh must drop at this context to pay for the cache it breaks."""
        return max(self.min_tokens, int(self.share * context))

    def worth(self, context: int, stale: int) -> bool:
        return stale >= self.needed(context)

    def next_check(self, context: int, stale: int) -> int:
        """The context at which a check can first say yes, after one at `context` found `stale` tokens."""
        return context + max(self.needed(context) - stale, self.min_tokens // 10)
