"""A step as two small loops: generations, each running attempts until they stop or hand over.

The attempts loop runs one session after another in the same generation (`Session`), hands each
outcome to `decide` and carries out the move: resume after an interrupt, refresh, retry after a failure
(with a backoff and, while the endpoint refuses connections, a probe), or leave. The generations loop
starts a fresh session from each handoff until the step stops.

Invariants:
- Retries count failures only: handoffs and interrupts use none, and a new generation starts the count
  again (`decide`); generations have their own cap (`HandoffPolicy.max_generations`).
- A real overflow caps the window for the rest of the run before the rules read it.
- An endpoint that never answered this run dir and takes no connection fails the step within seconds,
  before the first attempt and before any probe (a typo'd ANTHROPIC_BASE_URL is not an outage).
- A usage limit is waited for in one sleep, announced once (`limit_wait` bounds the step's waiting).
- A new generation's refresh checks start afresh: the waiting was for the retired session's context.
- A retry after an attempt that never began a session (the CLI died before its first frame) sends the
  generation's first message again, so the new session still holds the task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import anyio

from flower import texts
from flower.agent.events import Event, emit
from flower.agent.usage import message_cost
from flower.runtime.decide import Limits, Move, State, decide, saved_note, span
from flower.runtime.economics import request_cost
from flower.runtime.handoff import save_handoff
from flower.runtime.host import Host, Step
from flower.runtime.outcome import Outcome
from flower.runtime.resilience import endpoint_of, endpoint_reachable, probe_target, wait_for_endpoint
from flower.util.confined import Confined

__all__ = ["Ending", "run_step"]


@dataclass(frozen=True)
class Ending:
    """How a step ended: its session, its last session's outcome and the error it reports (None: ok)."""

    session: str | None
    outcome: Outcome
    error: str | None


async def run_step(runtime: Host, step: Step, resume: str | None, fork: bool) -> Ending:
    """The generations loop."""
    # a resumed session goes on in its own generation: the numbering and the cap count on from it
    state, session = State(generation=step.meter.resumed_generation if resume else 1), resume
    unanswered = await _typo(runtime)
    if unanswered is not None:
        return Ending(resume, Outcome("fatal", error=unanswered), unanswered)
    message = runtime._first_message(step.prompt)
    while True:
        move, outcome, session = await _attempts(runtime, step, message, session, fork, state)
        state = move.state
        if move.kind == "stop":
            error = move.error
            if move.handoff:  # past max_generations: the handoff is saved, and named in the error
                path = _save(runtime, step.name, move.handoff)
                step.tally.handoffs.append(str(path))
                error = f"{error}{saved_note(str(path), _max_generations(runtime))}"
            return Ending(session, outcome, error)
        message = _next_generation(runtime, step, move, session, outcome)
        session = None


async def _attempts(runtime: Host, step: Step, message: str, session: str | None, fork: bool,
                    state: State) -> tuple[Move, Outcome, str | None]:
    """The attempts loop of one generation: until a stop or a handoff."""
    tally = step.tally
    forking = fork and tally.attempts == 0
    while True:
        outcome = await runtime._attempt(step, message, session, forking)
        tally.add(outcome)
        if outcome.session_id is not None:
            forking = False  # the fork began: a retry resumes it (till then `session` is still its parent)
        session = outcome.session_id or session
        if outcome.refreshed:
            _refreshed(step, outcome, session)
        if outcome.kind == "overflow":
            runtime._calibrate(outcome.error, step.meter, step.on_event)
        move = decide(outcome, _observed(runtime, step, state), _limits(runtime, step))
        tally.errors.extend(move.notes)
        if move.took_interrupt:
            runtime._steering.note = None
        state = move.state
        if move.kind == "retry":
            error = await _before_retry(runtime, step, outcome, move)
            if error is not None:
                return replace(move, kind="stop", error=error), outcome, session
        elif move.kind == "wait":
            await _wait_for_reset(step, move.until)
        if move.kind in ("resume", "refresh", "retry", "wait") and session is not None and not forking:
            message = move.message
        if move.kind in ("resume", "refresh", "retry", "wait"):
            continue  # no session began (the CLI died before its first frame): the next one starts afresh
        return move, outcome, session


def _observed(runtime: Host, step: Step, state: State) -> State:
    """The state with what the run measured since: main-thread messages, context, a waiting interrupt."""
    return replace(state, messages=len(step.meter.per_message), context=step.meter.current,
                   interrupt=runtime._steering.note)


def _limits(runtime: Host, step: Step) -> Limits:
    handoff, retry = runtime.handoff_policy, runtime.retry
    return Limits(
        prompt=step.prompt, generations=handoff is not None, max_generations=_max_generations(runtime),
        retries=retry is not None, max_attempts=retry.max_attempts if retry is not None else 1,
        window=runtime.window(step.spec) or 0, threshold=runtime.threshold(step.spec) or 0,
        endpoint=endpoint_of(runtime._cli_env()), limit_wait=runtime.limit_wait, now=time.time(),
    )


def _max_generations(runtime: Host) -> int:
    return runtime.handoff_policy.max_generations if runtime.handoff_policy is not None else 0


def _refreshed(step: Step, outcome: Outcome, session: str | None) -> None:
    step.tally.refreshes += 1
    context = step.meter.current
    step.tally.pending = {"kind": "refresh", "before": context, "stale": outcome.stale}
    emit(step.on_event, Event("system", f"refresh: session resumed to drop about {outcome.stale:,} stale tokens "
                                        f"of {context:,}",
                              payload={"subtype": "refresh", "session_id": session, "stale": outcome.stale,
                                       "context": context}))


def _next_generation(runtime: Host, step: Step, move: Move, session: str | None, outcome: Outcome) -> str:
    """Retire the session, save its handoff, say so with what the handoff round cost (the new generation's
    first request is priced by a `cache_cost` event when it is answered); the new generation's first message."""
    tally, generation = step.tally, move.state.generation
    path = _save(runtime, step.name, move.handoff)
    if runtime.workbench is not None:
        runtime.workbench.refresh()
    tally.handoffs.append(str(path))
    if session:
        tally.retired.append(session)
    turn = outcome.handoff_usage
    emit(step.on_event, Event("handoff", move.handoff, payload={
        "generation": generation, "path": str(path), "retired": session, "degraded": bool(move.degraded),
        "reason": move.degraded, "context": step.meter.current, "turn": dict(turn),
        "cache_write": turn.get("cache_creation_input_tokens", 0),
        "priced": round(request_cost(turn, step.meter.prices) + step.meter.prices.output * turn.get("output_tokens", 0)),
        "usd": round(message_cost(step.meter.model, turn), 6)}))
    step.tally.pending = {"kind": "handoff", "before": step.meter.current, "generation": generation,
                          "retired": session}
    tally.next_refresh = 0  # the waiting was for the retired session's context, not this one's
    step.meter.new_generation()
    body = texts.HANDOFF_CONTINUE.format(generation=generation, path=path, handoff=move.handoff.strip())
    return runtime._first_message(body)


def _save(runtime: Host, step: str, doc: str) -> Path:
    notes = runtime.workbench.folder("notes") if runtime.workbench is not None else Confined(runtime.run_dir, ("notes",))
    return save_handoff(notes, step, doc)


async def _typo(runtime: Host) -> str | None:
    """The error for an endpoint that never answered this run dir and does not accept a connection within
    seconds (refused, or a host that never answers): a typo to fix, not an outage to wait for."""
    if runtime._ever_answered():
        return None
    env = runtime._cli_env()
    endpoint, target = endpoint_of(env), probe_target(env)
    if await anyio.to_thread.run_sync(endpoint_reachable, target, _TYPO_PROBE):
        return None
    via = f" (through the proxy {target})" if target != endpoint else ""
    return (f"endpoint {endpoint} does not accept connections{via} and has never answered this run: "
            "check ANTHROPIC_BASE_URL")


_TYPO_PROBE = 3.0
"""Seconds a connection to an endpoint that never answered may take before the step fails."""


async def _wait_for_reset(step: Step, until: float) -> None:
    """Say once that the step waits for the usage limit, and until when; then sleep past the reset."""
    seconds = max(0.0, until - time.time())
    at = datetime.fromtimestamp(until).astimezone().strftime("%H:%M %Z")
    emit(step.on_event, Event("system", f"usage limit reached: waiting {span(seconds)} for it to reset at {at}",
                              payload={"subtype": "limit_wait", "until": until, "seconds": round(seconds, 1)}))
    await anyio.sleep(seconds + _RESET_MARGIN)


_RESET_MARGIN = 1.0
"""Seconds past the announced reset before resuming (the reset is given in whole seconds)."""


async def _before_retry(runtime: Host, step: Step, outcome: Outcome, move: Move) -> str | None:
    """Back off, then wait for a down endpoint; the error that ends the step instead, if it stays down."""
    retry, env = runtime.retry, runtime._cli_env()
    assert retry is not None
    endpoint, failures = endpoint_of(env), move.state.failures
    delay = retry.delay(failures)
    number, most = failures + 1, retry.max_attempts
    step.tally.retries.append({"attempt": number, "of": most, "kind": move.retry, "error": outcome.error,
                               "delay": round(delay, 3), "endpoint": endpoint})
    emit(step.on_event, Event("retry", outcome.error or "", payload={
        "kind": move.retry, "delay": delay, "attempt": number, "max_attempts": most, "endpoint": endpoint}))
    await anyio.sleep(delay)
    unanswered = await _typo(runtime)
    if unanswered is not None:
        return f"{unanswered}; last error: {outcome.error}"
    timeout, target = retry.probe_timeout, probe_target(env)

    def report(state: str, seconds: float) -> None:
        via = f" (through the proxy {target})" if target != endpoint else ""
        words = {"down": f"endpoint {endpoint} is unreachable{via}: probing it for up to {timeout:.0f}s",
                 "back": f"endpoint {endpoint} is back after {seconds:.0f}s",
                 "gone": f"endpoint {endpoint} still unreachable after {seconds:.0f}s: giving up"}
        emit(step.on_event, Event("system", words[state], payload={
            "subtype": f"endpoint_{state}", "endpoint": endpoint, "seconds": round(seconds, 1)}))

    if await wait_for_endpoint(target, timeout=timeout, interval=retry.probe_interval, report=report):
        return None
    return f"endpoint {endpoint} did not accept connections for {timeout:.0f}s; last error: {outcome.error}"
