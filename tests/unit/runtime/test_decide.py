"""The step loop's rules, one row each: how a session's outcome decides the step's next move.

Every stop, retry, handoff and refresh rule the runtime's e2e tests exercise through the real CLI
(test_generations_e2e, test_refresh_e2e, test_runtime_e2e, test_store_errors_e2e, ...) has a row here,
so a rule can be read and checked without a CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import pytest

from flower import texts
from flower.runtime.decide import Limits, Move, State, decide, saved_note
from flower.runtime.handoff import degraded_handoff
from flower.runtime.outcome import Outcome, outcome_kind
from flower.runtime.resilience import usage_limit_reset

ENDPOINT = "http://127.0.0.1:9"
LIMITS = Limits(prompt="Fix the importer.", generations=True, max_generations=3, retries=True, max_attempts=3,
                window=200_000, threshold=150_000, endpoint=ENDPOINT)
NOW = 1_800_000_000.0
WAITS = replace(LIMITS, limit_wait=3600, now=NOW)
LIMIT = "You've hit your 5-hour limit · resets 11:38pm (UTC)"
DOC = "## Doing\nthe parser\n## Next\n1. the tests"
OVERFLOW = "API Error: 400 prompt is too long: 210000 tokens > 200000 maximum"


def diagnostic(why: str, limits: Limits = LIMITS) -> str:
    return f"stopped: {why}; window {limits.window:,} tokens, handoff threshold {limits.threshold:,} tokens"


@dataclass(frozen=True)
class Row:
    rule: str
    outcome: Outcome
    expect: dict[str, Any]
    """Move fields (and `state.<field>`) the move must have."""
    state: State = State(generation=1, messages=6, generation_start=0, context=151_000)
    limits: Limits = LIMITS
    contains: dict[str, str] = field(default_factory=dict)
    """Move fields that must contain a text."""


ROWS = [
    Row("a session that ends by itself ends the step, ok", Outcome("done", text="done", settled=True),
        {"kind": "stop", "error": None, "state.failures": 0}),
    Row("an interrupt resumes the session with the user's remark", Outcome("interrupted"),
        {"kind": "resume", "took_interrupt": True, "state.interrupt": None,
         "message": texts.RESUME_AFTER_INTERRUPT.format(message="\n\nlook at the parser first")},
        state=State(interrupt="look at the parser first")),
    Row("an interrupt without a remark resumes with the interrupt text alone", Outcome("interrupted"),
        {"kind": "resume", "message": texts.RESUME_AFTER_INTERRUPT.format(message="")}, state=State(interrupt="")),
    Row("an interrupt uses no retry", Outcome("interrupted", error="CLIConnectionError: gone"),
        {"kind": "resume", "state.failures": 2}, state=State(interrupt="", failures=2)),
    Row("a refresh continues the same session with REFRESH_CONTINUE", Outcome("refresh", stale=5_000),
        {"kind": "refresh", "message": texts.REFRESH_CONTINUE, "took_interrupt": False}),
    Row("an interrupt that lands on a refresh turn keeps the user's remark", Outcome("refresh", stale=5_000),
        {"kind": "resume", "took_interrupt": True, "state.interrupt": None,
         "message": texts.RESUME_AFTER_INTERRUPT.format(message="\n\nlook at the parser first")},
        state=State(interrupt="look at the parser first")),
    Row("a handoff starts a new generation from the session's document", Outcome("handoff", handoff=DOC),
        {"kind": "generation", "handoff": DOC, "degraded": None, "notes": (), "state.generation": 2,
         "state.generation_start": 6, "state.degraded": 0}),
    Row("a new generation starts the failure count again", Outcome("handoff", handoff=DOC),
        {"kind": "generation", "state.failures": 0}, state=State(messages=6, failures=2)),
    Row("a handoff the session could not write is degraded and noted in errors",
        Outcome("handoff", handoff=DOC, degraded="the handoff was incomplete"),
        {"kind": "generation", "degraded": "the handoff was incomplete", "state.degraded": 1,
         "notes": ("handoff degraded: the handoff was incomplete",)}),
    Row("two degraded handoffs in a row stop", Outcome("handoff", handoff=DOC, degraded="the handoff round failed"),
        {"kind": "stop", "error": diagnostic("two degraded handoffs in a row"),
         "notes": ("handoff degraded: the handoff round failed",)},
        state=State(generation=2, messages=9, generation_start=5, degraded=1)),
    Row("a handoff of the session's own resets the degraded count", Outcome("handoff", handoff=DOC),
        {"kind": "generation", "state.degraded": 0}, state=State(generation=2, messages=9, generation_start=5,
                                                                 degraded=1)),
    Row("a fresh generation that starts over the threshold stops", Outcome("handoff", handoff=DOC),
        {"kind": "stop", "error": diagnostic("a fresh session starts at 151,000 tokens, over the threshold (raise "
                                             "the window or lower the headroom)")},
        state=State(generation=2, messages=6, generation_start=5, context=151_000)),
    Row("the first generation may hand over at its first message", Outcome("handoff", handoff=DOC),
        {"kind": "generation", "state.generation": 2}, state=State(generation=1, messages=1, generation_start=0)),
    Row("more than max_generations stops with the handoff to save and name", Outcome("handoff", handoff=DOC),
        {"kind": "stop", "handoff": DOC, "error": diagnostic("more than 3 generations")},
        state=State(generation=3, messages=20, generation_start=10)),
    Row("an overflow with generations hands over degraded, from the prompt and the last text",
        Outcome("overflow", text="half way", error=OVERFLOW, status=400),
        {"kind": "generation", "degraded": OVERFLOW, "state.degraded": 1, "notes": (),
         "handoff": degraded_handoff(LIMITS.prompt, "half way", OVERFLOW)}),
    Row("an overflow on a fresh generation still hands over (it is not a start over the threshold)",
        Outcome("overflow", error=OVERFLOW), {"kind": "generation", "state.generation": 3},
        state=State(generation=2, messages=6, generation_start=5)),
    Row("an overflow right after a degraded handoff stops", Outcome("overflow", error=OVERFLOW),
        {"kind": "stop", "error": diagnostic("two degraded handoffs in a row")},
        state=State(generation=2, messages=9, generation_start=5, degraded=1)),
    Row("an overflow without generations is fatal: no retry", Outcome("overflow", error=OVERFLOW, status=400),
        {"kind": "stop", "error": f"{OVERFLOW} (endpoint {ENDPOINT})", "state.failures": 1},
        limits=replace(LIMITS, generations=False)),
    Row("a transient failure is retried in the same session with RESUME_AFTER_ERROR",
        Outcome("failed", error="API Error: 529 overloaded", status=529),
        {"kind": "retry", "retry": "transient", "message": texts.RESUME_AFTER_ERROR, "state.failures": 1}),
    Row("an unknown failure is retried too (bounded by max_attempts)", Outcome("failed", error="something odd"),
        {"kind": "retry", "retry": "unknown", "state.failures": 2}, state=State(failures=1)),
    Row("retries count failures: the max_attempts-th failure in a row stops, naming the endpoint",
        Outcome("failed", error="API Error: 529 overloaded", status=529),
        {"kind": "stop", "error": f"API Error: 529 overloaded (endpoint {ENDPOINT})", "state.failures": 3},
        state=State(failures=2)),
    Row("an error retrying cannot help is never retried", Outcome("fatal", error="StoredDataError: row 3 unreadable"),
        {"kind": "stop", "error": "StoredDataError: row 3 unreadable"}),
    Row("a 401 is fatal by its status and names the endpoint", Outcome("failed", error="API Error: 401", status=401),
        {"kind": "stop", "error": f"API Error: 401 (endpoint {ENDPOINT})"}),
    Row("an error that already names the endpoint is not named twice",
        Outcome("fatal", error=f"API Error: 401 authentication_failed: {ENDPOINT} refused the credentials",
                status=401),
        {"kind": "stop", "error": f"API Error: 401 authentication_failed: {ENDPOINT} refused the credentials"}),
    Row("a turn or budget cap ends the step without blaming the endpoint",
        Outcome("failed", error="error_max_turns: Reached maximum number of turns (3)"),
        {"kind": "stop", "error": "error_max_turns: Reached maximum number of turns (3)"}),
    Row("without retries the first failure stops", Outcome("failed", error="API Error: 503", status=503),
        {"kind": "stop", "error": f"API Error: 503 (endpoint {ENDPOINT})"}, limits=replace(LIMITS, retries=False)),
    Row("a usage limit that resets within limit_wait is waited for, no failure counted",
        Outcome("failed", error=LIMIT, status=429, resets_at=NOW + 600),
        {"kind": "wait", "until": NOW + 600, "message": texts.RESUME_AFTER_LIMIT, "state.failures": 1,
         "state.waited": 700}, state=State(failures=1, waited=100), limits=WAITS),
    Row("a usage limit past what is left of limit_wait stops at once, saying when it resets",
        Outcome("failed", error=LIMIT, status=429, resets_at=NOW + 7200),
        {"kind": "stop", "state.failures": 1}, limits=WAITS,
        contains={"error": f"{LIMIT} (in 2 h): longer than this step may still wait for a usage limit, "
                           "1 h (limit_wait, FLOWER_LIMIT_WAIT)"}),
    Row("a usage limit whose reset is past is an ordinary failure",
        Outcome("failed", error=LIMIT, status=429, resets_at=NOW - 5),
        {"kind": "retry", "retry": "transient", "state.waited": 0}, limits=WAITS),
    Row("without retries a usage limit is not waited for",
        Outcome("failed", error=LIMIT, status=429, resets_at=NOW + 60),
        {"kind": "stop"}, limits=replace(WAITS, retries=False)),
]


def _field(move: Move, name: str) -> Any:
    target: Any = move
    for part in name.split("."):
        target = getattr(target, part)
    return target


@pytest.mark.parametrize("row", ROWS, ids=[row.rule for row in ROWS])
def test_rule(row: Row) -> None:
    move = decide(row.outcome, row.state, row.limits)
    assert {name: _field(move, name) for name in row.expect} == row.expect
    for name, text in row.contains.items():
        assert text in _field(move, name)


def test_decide_is_pure() -> None:
    """The same outcome and state give the same move, and the state passed in is left as it was."""
    state = State(generation=2, messages=9, generation_start=5, degraded=1, failures=1)
    outcome = Outcome("handoff", handoff=DOC, degraded="x")
    assert decide(outcome, state, LIMITS) == decide(outcome, state, LIMITS)
    assert state == State(generation=2, messages=9, generation_start=5, degraded=1, failures=1)


def test_the_saved_handoff_is_named_with_how_to_continue() -> None:
    note = saved_note("/w/.flower/notes/handoff-lead.md", 3)
    assert note.startswith("; the last handoff is saved at /w/.flower/notes/handoff-lead.md: ")
    assert "flower run SPEC < /w/.flower/notes/handoff-lead.md" in note and "max_generations=" in note


KINDS = [
    ("an interrupt comes first, even on a refresh turn or with an error",
     {"interrupted": True, "stale": 5_000, "handoff": DOC, "error": "x", "fatal": True}, "interrupted"),
    ("a refresh that did not fail", {"interrupted": False, "stale": 5_000, "handoff": None, "error": None,
                                     "fatal": False}, "refresh"),
    ("a refresh that failed is a failure", {"interrupted": False, "stale": 5_000, "handoff": None,
                                            "error": "API Error: 503", "fatal": False}, "failed"),
    ("a handoff", {"interrupted": False, "stale": None, "handoff": DOC, "error": None, "fatal": False}, "handoff"),
    ("an overflow, even one marked fatal", {"interrupted": False, "stale": None, "handoff": None,
                                            "error": OVERFLOW, "fatal": True}, "overflow"),
    ("a fatal error", {"interrupted": False, "stale": None, "handoff": None, "error": "x", "fatal": True}, "fatal"),
    ("any other error", {"interrupted": False, "stale": None, "handoff": None, "error": "x", "fatal": False},
     "failed"),
    ("nothing of the above", {"interrupted": False, "stale": None, "handoff": None, "error": None, "fatal": False},
     "done"),
]


@pytest.mark.parametrize(("facts", "kind"), [row[1:] for row in KINDS], ids=[row[0] for row in KINDS])
def test_a_session_has_one_kind_by_precedence(facts: dict[str, Any], kind: str) -> None:
    assert outcome_kind(**facts) == kind


@pytest.mark.parametrize(("line", "hours"), [
    ("You've hit your 5-hour limit · resets 11:38pm (UTC)", 1 + 8 / 60),
    ("You've hit your usage limit · resets 8pm (UTC)", 21.5),
    ("You've hit your session limit · resets 9am (Europe/London)", 10.5),
    ("You've hit your weekly limit · resets Dec 7, 8pm (UTC)", 69.5),
    ("You've hit your weekly limit · resets Jan 2, 2027, 1am (UTC)", 2.5 + 24 * 28),
    ("You've hit your usage limit", None),
    ("API Error: 429 rate limit · resets soon", None),
])
def test_the_usage_limit_line_says_when_it_resets(line: str, hours: float | None) -> None:
    """The bundled CLI's line for a subscription's usage limit (issue #26 item 10), read when no
    rate_limit_event came; the clock is 22:30 UTC on 4 Dec 2026."""
    now = datetime(2026, 12, 4, 22, 30, tzinfo=timezone.utc).timestamp()
    reset = usage_limit_reset(line, now)
    assert (None if reset is None else round((reset - now) / 3600, 4)) == (None if hours is None else round(hours, 4))
