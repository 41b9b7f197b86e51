"""Resilience: classify failures, back off with jitter, wait for the endpoint, then resume (L-4).

Invariants:
- `classify` checks fatal signs first (a 400 that is not an overload stays fatal even if its text says
  "timeout"): fatal = 400/401/403/404, authentication, invalid request, budget; transient = connection
  errors, 429/500/502/503/504/529, overloaded, timeouts; anything else is unknown (retried like transient
  but counted separately, so a bug does not loop for ever: `RetryPolicy.max_attempts` bounds both).
- The delays grow from `base` doubling up to `cap`, with full jitter; tests pass a tiny base.
- While the endpoint refuses TCP connections, `wait_for_endpoint` probes it instead of burning attempts.
"""

from __future__ import annotations

import random
import re
import socket
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio

from flower.core import texts

__all__ = [
    "WORKER_CUT_OFF",
    "Kind",
    "RetryPolicy",
    "classify",
    "endpoint_reachable",
    "redispatch_hook",
    "wait_for_endpoint",
    "worker_cut_off",
]

Kind = Literal["fatal", "transient", "unknown"]

_FATAL_STATUS = {400, 401, 403, 404, 413}
_TRANSIENT_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
_FATAL = re.compile(r"authenticat|invalid.?request|invalid api key|permission|budget|not.?found|"
                    r"credit balance|unauthori[sz]ed|forbidden|no conversation found", re.IGNORECASE)
_TRANSIENT = re.compile(r"overloaded|connection|ECONNRESET|ECONNREFUSED|socket|timed? ?out|timeout|"
                        r"rate.?limit|server.?error|temporar|network|unavailable|api_error", re.IGNORECASE)
_STATUS = re.compile(r"\b(4\d\d|5\d\d)\b")


def classify(error: BaseException | str | None, status: int | None = None) -> Kind:
    """fatal, transient or unknown, from an HTTP status when known, else from the error's text."""
    text = str(error or "")
    if status is None:
        match = _STATUS.search(text)
        status = int(match.group(1)) if match else None
    if status in _FATAL_STATUS and not re.search("overloaded", text, re.IGNORECASE):
        return "fatal"
    if status is None and _FATAL.search(text):
        return "fatal"
    if status in _TRANSIENT_STATUS or _TRANSIENT.search(text):
        return "transient"
    return "unknown"


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying after transient failures."""

    max_attempts: int = 6
    """Attempts of one step in all (the first included)."""
    base: float = 4.0
    """First delay in seconds; doubles each retry."""
    cap: float = 120.0
    """Longest delay in seconds."""
    probe_timeout: float = 600.0
    """How long to wait for the endpoint to accept connections again, in seconds."""

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds before retry number `retry` (1-based): full jitter over the doubling ceiling."""
        ceiling = min(self.cap, self.base * (2 ** max(0, retry - 1)))
        return (rng or random).uniform(ceiling / 2, ceiling)


def endpoint_reachable(base_url: str | None, timeout: float = 2.0) -> bool:
    """Whether a TCP connection to the base URL's host and port opens (True when there is no URL)."""
    if not base_url:
        return True
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


async def wait_for_endpoint(base_url: str | None, *, timeout: float, interval: float = 0.5) -> bool:
    """Probe until the endpoint accepts connections or `timeout` passes; True when it is back."""
    deadline = time.monotonic() + timeout
    while True:
        if await anyio.to_thread.run_sync(endpoint_reachable, base_url):
            return True
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(interval)


# --- workers cut off by a transient API failure (issue #16 item 16) -----------------------------------------

WORKER_CUT_OFF = "Agent terminated early"
"""How the bundled CLI (2.1.332) begins the failed Agent tool result of a subagent whose API calls failed past
its own retries: `Agent terminated early due to an API error: API Error: 529 Overloaded ...` (is_error;
also `PostToolUseFailure.error` and the `task_updated`/`task_notification` messages; docs/sdk-notes.md)."""


_CUT_OFF = re.compile(r'(?:Error: |Agent "[^"\n]*" failed: )?' + re.escape(WORKER_CUT_OFF))


def worker_cut_off(text: object) -> bool:
    """Whether a tool result, hook `error` or task-notification summary says a worker was cut off by an API
    failure (a background worker's summary reads `Agent "<description>" failed: Agent terminated early ...`)."""
    if isinstance(text, list):  # content blocks
        text = "".join(b.get("text", "") for b in text if isinstance(b, dict))
    return isinstance(text, str) and _CUT_OFF.match(text.lstrip()) is not None


def redispatch_hook() -> Any:
    """PostToolUseFailure callback for Agent: when a worker was cut off by an API failure, tell the thread
    that dispatched it (coordinator or lead) that the work is not done and to dispatch it again."""

    async def _redispatch(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
        error = input_data.get("error")
        if not worker_cut_off(error):
            return {}
        reason = " ".join(str(error).split())[:300]
        return {"hookSpecificOutput": {"hookEventName": "PostToolUseFailure",
                                       "additionalContext": texts.WORKER_REDISPATCH.format(error=reason)}}

    return _redispatch
