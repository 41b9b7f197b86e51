"""The step loop's rules as one pure function: given how a session ended, what the step does next.

`decide(outcome, state, limits)` returns a `Move`: resume the same session (after an interrupt), refresh
(resume it to drop stale results), start a new generation from a handoff, retry after a failure, or stop
(done, or with the error the step reports). It does no I/O: the loops carry the move out (save the
handoff, sleep and probe before a retry, emit the events).

Rules, in the order they apply:
- An interrupt resumes the session with the user's remark, also when it landed on a turn a refresh
  stopped (the remark would be lost otherwise); a refresh alone continues with REFRESH_CONTINUE.
- A handoff, or an overflow while generations are on, starts a new generation. An overflow's handoff is
  the runtime's fallback (degraded), as is one the session could not write; two degraded in a row stop.
  A fresh generation that hands over again at its first message stops (it starts over the threshold),
  and so does one past `max_generations`, with its handoff saved so the user can continue from it.
- A subscription's usage limit that resets within what is left of `limit_wait` for the step is waited
  for (`wait`, no failure counted), then the session resumes; one further out stops the step at once,
  saying when it resets. A reset already past is an ordinary failure.
- An error is retried while retries are on, it is not fatal (an overflow without generations is fatal:
  the same session cannot fit again) and fewer than `max_attempts` attempts failed in a row. Only
  failures count; a new generation starts the count again. A step that ends on an error from the API's
  side names the endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from flower import texts
from flower.runtime.handoff import degraded_handoff
from flower.runtime.outcome import Outcome
from flower.runtime.resilience import Kind, classify, is_final

__all__ = ["Limits", "Move", "MoveKind", "State", "decide", "saved_note", "span"]

MoveKind = Literal["resume", "refresh", "generation", "retry", "wait", "stop"]


@dataclass(frozen=True)
class State:
    """What the step carries from one session to the next."""

    generation: int = 1
    """The generation the session ran in (the first is 1)."""
    messages: int = 0
    """Main-thread API messages the step has seen so far."""
    generation_start: int = 0
    """`messages` when the current generation started."""
    context: int = 0
    """The main-thread context in tokens, as last measured."""
    degraded: int = 0
    """Degraded handoffs in a row."""
    failures: int = 0
    """Failed attempts since the generation started."""
    interrupt: str | None = None
    """The remark of an interrupt waiting for the next resume (empty: none given), or None."""
    waited: float = 0.0
    """Seconds the step has waited for usage limits to reset."""


@dataclass(frozen=True)
class Limits:
    """The settings the rules read, resolved for this step (the window follows the model in use)."""

    prompt: str
    """The step's prompt (the fallback handoff after an overflow quotes it)."""
    generations: bool = True
    """Whether a handoff policy is on."""
    max_generations: int = 0
    retries: bool = True
    """Whether a retry policy is on."""
    max_attempts: int = 1
    window: int = 0
    threshold: int = 0
    endpoint: str = ""
    limit_wait: float = 0.0
    """The longest the step waits for usage limits to reset, in seconds all told (0: never)."""
    now: float = 0.0
    """The clock (epoch seconds) a usage limit's reset is measured from."""


@dataclass(frozen=True)
class Move:
    """The next thing the step does, with the data it needs."""

    kind: MoveKind
    state: State
    """The state after the move."""
    message: str = ""
    """resume, refresh, retry, wait: what the session is resumed with."""
    until: float = 0.0
    """wait: when the usage limit resets (epoch seconds)."""
    handoff: str = ""
    """generation: the document the next generation starts from; stop: a handoff to save and name."""
    degraded: str | None = None
    """generation: why its handoff is the runtime's fallback."""
    error: str | None = None
    """stop: the error the step reports (None: the step is done)."""
    notes: tuple[str, ...] = ()
    """Lines for the step's `errors`."""
    retry: Kind | None = None
    """retry: the failure's kind."""
    took_interrupt: bool = False
    """The move delivers the waiting interrupt (the runtime clears it)."""


def decide(outcome: Outcome, state: State, limits: Limits) -> Move:
    """The next move after a session ended with `outcome` (the rules in the module docstring)."""
    if outcome.kind == "interrupted" or (outcome.kind == "refresh" and state.interrupt is not None):
        note = state.interrupt or ""
        message = texts.RESUME_AFTER_INTERRUPT.format(message=f"\n\n{note}" if note else "")
        return Move("resume", replace(state, interrupt=None), message=message, took_interrupt=True)
    if outcome.kind == "refresh":
        return Move("refresh", state, message=texts.REFRESH_CONTINUE)
    if outcome.kind == "handoff" or (outcome.kind == "overflow" and limits.generations):
        return _handoff(outcome, state, limits)
    if outcome.kind == "done":
        return Move("stop", state)
    return _failure(outcome, state, limits)


def _handoff(outcome: Outcome, state: State, limits: Limits) -> Move:
    overflow = outcome.kind == "overflow"
    notes: tuple[str, ...] = ()
    if overflow:
        reason = outcome.error or "context overflow"
        degraded: str | None = reason
        doc = degraded_handoff(limits.prompt, outcome.text, reason)
    else:
        degraded, doc = outcome.degraded, outcome.handoff or ""
        if degraded:
            notes = (f"handoff degraded: {degraded}",)
    state = replace(state, degraded=state.degraded + 1 if degraded else 0)
    if state.degraded >= 2:
        return _stop(state, limits, "two degraded handoffs in a row", notes)
    fresh = state.messages - state.generation_start
    if state.generation > 1 and not overflow and fresh <= 1:
        return _stop(state, limits, f"a fresh session starts at {state.context:,} tokens, over the threshold "
                                    "(raise the window or lower the headroom)", notes)
    if state.generation + 1 > limits.max_generations:
        return replace(_stop(state, limits, f"more than {limits.max_generations} generations", notes), handoff=doc)
    state = replace(state, generation=state.generation + 1, failures=0, generation_start=state.messages)
    return Move("generation", state, handoff=doc, degraded=degraded, notes=notes)


def _stop(state: State, limits: Limits, why: str, notes: tuple[str, ...]) -> Move:
    error = (f"stopped: {why}; window {limits.window:,} tokens, handoff threshold {limits.threshold:,} tokens")
    return Move("stop", state, error=error, notes=notes)


def saved_note(path: str, max_generations: int) -> str:
    """What a stop past `max_generations` adds to its error once its handoff is saved at `path`."""
    return (f"; the last handoff is saved at {path}: continue from it with a new step whose prompt is that "
            f"document (flower run SPEC < {path}), or raise HandoffPolicy(max_generations=)")


def _failure(outcome: Outcome, state: State, limits: Limits) -> Move:
    error = outcome.error or ""
    if outcome.resets_at is not None and outcome.resets_at > limits.now and limits.retries:
        return _usage_limit(outcome.resets_at, error, state, limits)
    fatal = outcome.kind in ("fatal", "overflow")  # without generations the same session cannot fit again
    kind: Kind = "fatal" if fatal else classify(error, outcome.status)
    state = replace(state, failures=state.failures + 1)
    if not limits.retries or kind == "fatal" or state.failures >= limits.max_attempts:
        api_side = outcome.status is not None or "API Error" in error or kind != "fatal"
        if api_side and not is_final(error) and limits.endpoint not in error:
            error = f"{error} (endpoint {limits.endpoint})"
        return Move("stop", state, error=error)
    return Move("retry", state, message=texts.RESUME_AFTER_ERROR, retry=kind)


def _usage_limit(resets_at: float, error: str, state: State, limits: Limits) -> Move:
    """Wait for the reset while the step's waiting stays within `limit_wait`; else stop, saying when."""
    wait = resets_at - limits.now
    if state.waited + wait <= limits.limit_wait:
        return Move("wait", replace(state, waited=state.waited + wait), message=texts.RESUME_AFTER_LIMIT,
                    until=resets_at, retry="transient")
    left = max(0.0, limits.limit_wait - state.waited)
    return Move("stop", replace(state, failures=state.failures + 1),
                error=f"{error} (in {span(wait)}): longer than this step may still wait for a usage limit, "
                      f"{span(left)} (limit_wait, FLOWER_LIMIT_WAIT)")


def span(seconds: float) -> str:
    """A duration for people: `45s`, `12 min`, `2 h`, `3 h 20 min`."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")
