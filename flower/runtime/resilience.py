"""Resilience: classify failures, back off with jitter, wait for the endpoint, then resume (L-4).

Invariants:
- `classify` checks final signs first: a turn or budget cap and an exhausted quota are fatal whatever the
  status (retrying cannot help and would exceed the cap). Then fatal signs (a 400 that is not an overload
  stays fatal even if its text says "timeout"): fatal = 400/401/403/404, authentication, invalid request;
  transient = connection and DNS errors (ENOTFOUND, EAI_AGAIN), 429/500/502/503/504/529, overloaded,
  timeouts; anything else is unknown (retried like transient but counted separately, so a bug does not
  loop for ever: `RetryPolicy.max_attempts` bounds both).
- The delays grow from `base` doubling up to `cap`, with full jitter; tests pass a tiny base.
- A subscription's usage limit is not a failure to back off from: it names when it resets (the CLI's
  `rate_limit_event` with `status: rejected` carries `resetsAt`; its text reads "You've hit your 5-hour
  limit · resets 11:38pm (UTC)"), and the step waits for that (`usage_limit_reset` reads the text when no
  event came).
- While the endpoint refuses TCP connections, `wait_for_endpoint` probes it instead of burning attempts,
  for at most `RetryPolicy.probe_timeout` seconds, and reports once when it goes away and once when it is
  back. The endpoint is `ANTHROPIC_BASE_URL`, else the default API host (`endpoint_of`); behind a proxy
  the CLI would use for it (HTTPS_PROXY / HTTP_PROXY, minus NO_PROXY), the proxy is what is probed
  (`probe_target`), since the endpoint itself may be unreachable directly while the CLI works fine.
"""

from __future__ import annotations

import random
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
from claude_agent_sdk.types import HookCallback, HookContext, HookInput, HookJSONOutput

from flower import texts
from flower.errors import ConfigError

__all__ = ["DEFAULT_ENDPOINT", "Kind", "RetryPolicy", "WORKER_CUT_OFF", "classify", "endpoint_of",
           "endpoint_reachable", "is_final", "probe_target", "redispatch_hook", "usage_limit_reset",
           "wait_for_endpoint", "worker_cut_off"]

DEFAULT_ENDPOINT = "https://api.anthropic.com"
"""Where the CLI sends requests when ANTHROPIC_BASE_URL is unset."""

Kind = Literal["fatal", "transient", "unknown"]

_FATAL_STATUS = {400, 401, 403, 404, 413}
_TRANSIENT_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
# Caps and quotas: final whatever the status (a quota 429 is not a rate limit that passes).
_FINAL = re.compile(r"maximum number of turns|error_max_turns|max_turns|error_max_budget|maximum budget|budget|"
                    r"quota|credit balance|billing", re.IGNORECASE)
# \b before "not found": ENOTFOUND (a DNS outage) is transient, "model not found" is fatal.
_FATAL = re.compile(r"authenticat|invalid.?request|invalid api key|permission|\bnot.?found|"
                    r"unauthori[sz]ed|forbidden|no conversation found", re.IGNORECASE)
_TRANSIENT = re.compile(r"overloaded|connection|ECONNRESET|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|"
                        r"EHOSTUNREACH|ENETUNREACH|ENETDOWN|EPIPE|getaddrinfo|socket|hang up|fetch failed|"
                        r"can.?t reach|cannot reach|timed? ?out|timeout|"
                        r"rate.?limit|server.?error|temporar|network|unavailable|api_error", re.IGNORECASE)
_STATUS = re.compile(r"\b(4\d\d|5\d\d)\b")


# The bundled CLI's usage-limit line (2.1.332): `You've hit your <limit>[ · resets <when>]`, <when> being
# `8pm`, `11:38pm (UTC)` or, more than a day out, `Dec 5, 8pm (UTC)` (a year when it is not this one).
_LIMIT = re.compile(r"You.ve hit your [^\n·]*limit\b[^\n·]*· resets (?:(?P<mon>[A-Z][a-z]{2}) (?P<day>\d{1,2}), "
                    r"(?:(?P<year>\d{4}),? )?)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?(?P<half>am|pm)"
                    r"(?: \((?P<zone>[^)]+)\))?", re.IGNORECASE)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def usage_limit_reset(text: str | None, now: float | None = None) -> float | None:
    """When the usage limit a CLI error line names resets (epoch seconds), or None: not that line, or a
    time it does not read. A time of day alone is its next occurrence after `now`."""
    match = _LIMIT.search(text or "")
    if match is None:
        return None
    zone = _zone(match["zone"])
    current = datetime.fromtimestamp(time.time() if now is None else now, zone)
    hour = int(match["hour"]) % 12 + (12 if match["half"].lower() == "pm" else 0)
    try:
        when = current.replace(hour=hour, minute=int(match["minute"] or 0), second=0, microsecond=0)
        if match["mon"]:
            month = _MONTHS.index(match["mon"].lower()) + 1
            when = when.replace(year=int(match["year"] or current.year), month=month, day=int(match["day"]))
        elif when <= current:
            when += timedelta(days=1)
    except ValueError:  # an unknown month or a day it lacks
        return None
    return when.timestamp()


def _zone(name: str | None) -> Any:
    """The time zone the CLI named (None: this machine's local time, which the CLI used too)."""
    if not name:
        return None
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(name)
    except (ValueError, LookupError, OSError):
        return None


def is_final(error: BaseException | str | None) -> bool:
    """A turn or budget cap, or an exhausted quota: the step ends, and no endpoint is to blame."""
    return bool(_FINAL.search(str(error or "")))


def classify(error: BaseException | str | None, status: int | None = None) -> Kind:
    """fatal, transient or unknown, from an HTTP status when known, else from the error's text."""
    text = str(error or "")
    if is_final(text):
        return "fatal"
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
    """Failed attempts in a row that end a step (the first included); handoffs and interrupts are not
    failures, and a new generation starts the count again."""
    base: float = 4.0
    """First delay in seconds; doubles each retry."""
    cap: float = 120.0
    """Longest delay in seconds."""
    probe_timeout: float = 600.0
    """The probe's cap: how long to wait for the endpoint to accept connections again, in seconds."""
    probe_interval: float = 2.0
    """Seconds between two probes of a down endpoint."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"RetryPolicy max_attempts must be at least 1, not {self.max_attempts}")
        for name in ("base", "cap", "probe_timeout", "probe_interval"):
            if getattr(self, name) < 0:
                raise ConfigError(f"RetryPolicy {name} must not be negative, not {getattr(self, name)}")

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds before retry number `retry` (1-based): full jitter over the doubling ceiling."""
        ceiling = min(self.cap, self.base * (2 ** max(0, retry - 1)))
        return (rng or random).uniform(ceiling / 2, ceiling)


def endpoint_of(env: Mapping[str, str]) -> str:
    """The endpoint the CLI talks to: ANTHROPIC_BASE_URL, else the default API host."""
    return (env.get("ANTHROPIC_BASE_URL") or "").strip() or DEFAULT_ENDPOINT


def probe_target(env: Mapping[str, str]) -> str:
    """What to probe for the endpoint: the proxy the CLI would go through for it, else the endpoint."""
    endpoint = endpoint_of(env)
    parts = urlsplit(endpoint)
    names = ("HTTPS_PROXY", "https_proxy") if parts.scheme == "https" else ("HTTP_PROXY", "http_proxy")
    proxy = next((env[n] for n in names if env.get(n)), "")
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if proxy and not _bypassed(parts.hostname or "", no_proxy):
        return proxy if "//" in proxy else f"http://{proxy}"
    return endpoint


def _bypassed(host: str, no_proxy: str) -> bool:
    """NO_PROXY as curl and Node read it: `*`, a host, or a domain suffix (with or without a leading dot)."""
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        if entry == "*" or (name and (host.lower() == name.lstrip(".") or host.lower().endswith("." + name.lstrip(".")))):
            return True
    return False


def endpoint_reachable(base_url: str | None, timeout: float = 2.0) -> bool:
    """Whether a TCP connection to the base URL's host and port opens (no URL: the default API host)."""
    parts = urlsplit(base_url or DEFAULT_ENDPOINT)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


async def wait_for_endpoint(
    base_url: str | None, *, timeout: float, interval: float = 0.5,
    report: Callable[[str, float], None] | None = None,
) -> bool:
    """Probe until the endpoint accepts connections or `timeout` passes; True when it is back.

    `report("down", 0.0)` is called once when the first probe fails and `report("back", seconds)` once when
    the endpoint answers again (nothing when it was never down); `report("gone", seconds)` when it stays down.
    """
    started = time.monotonic()
    down = False
    while True:
        if await anyio.to_thread.run_sync(endpoint_reachable, base_url):
            if down and report is not None:
                report("back", time.monotonic() - started)
            return True
        if not down:
            down = True
            if report is not None:
                report("down", 0.0)
        if time.monotonic() - started >= timeout:
            if report is not None:
                report("gone", time.monotonic() - started)
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


def redispatch_hook() -> HookCallback:
    """PostToolUseFailure callback for Agent: when a worker was cut off by an API failure, tell the thread
    that dispatched it (coordinator or lead) that the work is not done and to dispatch it again."""

    async def _redispatch(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        error = input_data.get("error")
        if not worker_cut_off(error):
            return {}
        reason = " ".join(str(error).split())[:300]
        return {"hookSpecificOutput": {"hookEventName": "PostToolUseFailure",
                                       "additionalContext": texts.WORKER_REDISPATCH.format(error=reason)}}

    return _redispatch
