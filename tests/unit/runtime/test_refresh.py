"""RefreshPolicy: when resuming a live session to drop stale results pays (issue #19)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flower.errors import ConfigError
from flower.runtime.refresh import RefreshPolicy


def test_a_refresh_needs_the_floor_and_the_share() -> None:
    policy = RefreshPolicy(min_tokens=20_000, share=0.3)
    assert policy.needed(10_000) == 20_000 and policy.needed(100_000) == 30_000
    assert not policy.worth(100_000, 29_999) and policy.worth(100_000, 30_000)
    assert not policy.worth(40_000, 19_000) and policy.worth(40_000, 20_000)


@given(context=st.integers(0, 2_000_000), stale=st.integers(0, 2_000_000), growth=st.integers(0, 2_000_000))
def test_the_next_check_never_skips_a_refresh_that_would_pay(context: int, stale: int, growth: int) -> None:
    """The stale part grows at most as fast as the context: until the context has grown by what was missing,
    no refresh can be worth it; the next check waits exactly that long, or a tenth of the floor when less
    was missing (checks are not free), and always lies ahead."""
    policy = RefreshPolicy()
    stale = min(stale, context)
    missing = policy.needed(context) - stale
    later = policy.next_check(context, stale)
    assert later == context + max(missing, policy.min_tokens // 10) > context
    if growth < missing:
        assert not policy.worth(context + growth, stale + growth)


@pytest.mark.parametrize("kwargs", [{"min_tokens": 0}, {"share": 0}, {"share": 1.5}])
def test_bad_settings_are_one_line_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="RefreshPolicy"):
        RefreshPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_refresh_waits_for_running_tasks_and_then_for_what_was_missing(
    tmp_path: Path,
) -> None:
    """A refresh ends the CLI process, and background workers with it: none while one runs. After a check
    that says "not yet", the next waits for what was missing. (What counts as stale, minus what the resume
    already dropped, is the e2e test's: `tests/e2e/test_refresh_e2e.py` fails without the subtraction.)"""
    from flower.agent.spec import AgentSpec
    from flower.runtime.handoff import ContextMeter
    from flower.runtime.host import Step
    from flower.runtime.runtime import Runtime
    from flower.runtime.session import Session
    from flower.runtime.tally import Tally

    runtime = Runtime(tmp_path, run_dir=tmp_path / "runs", refresh=RefreshPolicy(min_tokens=1_000, share=0.1))
    stale = {"tokens": 5_000}

    async def measured() -> int:
        return stale["tokens"]

    meter, tally = ContextMeter(), Tally()
    meter.observe("m1", {"input_tokens": 20_000})
    step = Step(AgentSpec(name="a", instructions="x"), "go", "a", meter, tally, None)

    def session(on: Runtime, *, running: set[str] | None = None) -> Session:
        made = Session(on, step, resume="s")
        made._stale = measured  # type: ignore[method-assign]
        made.tasks.running.update(running or ())
        return made

    busy = session(runtime, running={"toolu_bg"})
    assert not await busy.refresh_due() and busy.refresh is None
    busy.tasks.running.clear()
    assert await busy.refresh_due() and busy.refresh == 5_000
    stale["tokens"] = 500  # below the floor: no refresh, and the next check waits for the missing 1,500
    later = session(runtime)
    assert not await later.refresh_due() and tally.next_refresh == 21_500
    off = Runtime(tmp_path, run_dir=tmp_path / "runs", refresh=False)
    tally.next_refresh = 0
    assert off.refresh is None and not await session(off).refresh_due()


def _scripted_drive(tmp_path: Path, attempts: list, seen: list) -> object:  # type: ignore[type-arg]
    """A Runtime whose attempts are scripted: each entry is (setup(runtime, tally), Outcome); `seen` gets
    (message, tally.next_refresh) at the start of each attempt."""
    from flower.runtime.runtime import Runtime

    runtime = Runtime(tmp_path, run_dir=tmp_path / "runs", refresh=RefreshPolicy(min_tokens=1_000, share=0.1))
    queue = list(attempts)

    async def attempt(step, message, session, fork):  # type: ignore[no-untyped-def]
        seen.append((message, step.tally.next_refresh))
        setup, result = queue.pop(0)
        setup(runtime, step.tally)
        return result

    runtime._attempt = attempt  # type: ignore[method-assign]
    runtime._answered()  # the scripted sessions stand for an endpoint that answers
    return runtime


@pytest.mark.anyio
async def test_a_handoff_starts_the_refresh_checks_afresh(tmp_path: Path) -> None:
    """The next check's context belongs to the retired generation: a new one starting far below it must
    not wait for it (it may never get there before its own handoff)."""
    from flower.agent.spec import AgentSpec
    from flower.runtime.outcome import Outcome

    def checked(runtime, tally) -> None:  # type: ignore[no-untyped-def]
        tally.next_refresh = 185_000

    seen: list = []
    handed = Outcome("handoff", session_id="s1", handoff="## Doing\nX\n## Next\n1. go")
    done = Outcome("done", session_id="s2", settled=True)
    runtime = _scripted_drive(tmp_path, [(checked, handed), (lambda r, t: None, done)], seen)
    await runtime.run(AgentSpec(name="a", instructions="x"), "go")  # type: ignore[attr-defined]
    assert len(seen) == 2 and seen[1][1] == 0


@pytest.mark.anyio
async def test_an_interrupt_that_lands_on_a_refresh_is_delivered(tmp_path: Path) -> None:
    """Runtime.interrupt during the turn a refresh stops: the resume carries the user's message (L-5)."""
    from flower.agent.spec import AgentSpec
    from flower.runtime.outcome import Outcome

    def interrupted(runtime, tally) -> None:  # type: ignore[no-untyped-def]
        runtime._steering.note = "look at the parser first"

    seen: list = []
    both = Outcome("refresh", session_id="s1", stale=5_000)
    done = Outcome("done", session_id="s1", settled=True)
    runtime = _scripted_drive(tmp_path, [(interrupted, both), (lambda r, t: None, done)], seen)
    result = await runtime.run(AgentSpec(name="a", instructions="x"), "go")  # type: ignore[attr-defined]
    assert "look at the parser first" in seen[1][0] and runtime._steering.note is None  # type: ignore[attr-defined]
    assert result.refreshes == 1


def test_running_tasks_are_tracked_until_a_terminal_message() -> None:
    """As the bundled CLI reports them (seen on a real run): a foreground worker's task starts, is updated to
    completed and notified; a stopped background task may end with the update alone (SDK docs)."""
    from claude_agent_sdk import TaskNotificationMessage, TaskStartedMessage, TaskUpdatedMessage

    from flower.runtime.control import Tasks

    tasks = Tasks({"toolu_bg"})  # a background Agent call, task not known yet

    def started(task: str, call: str) -> TaskStartedMessage:
        return TaskStartedMessage("task_started", {}, task, "d", "u", "s", tool_use_id=call, task_type="local_agent")

    tasks.track(started("t_fg", "toolu_fg"))
    tasks.track(started("t_bg", "toolu_bg"))
    assert tasks.running == {"t_fg", "t_bg", "toolu_bg"}
    tasks.track(TaskUpdatedMessage("task_updated", {}, "t_fg", {"status": "running"}))
    assert "t_fg" in tasks.running  # not terminal
    tasks.track(TaskNotificationMessage("task_notification", {}, "t_fg", "completed", "", "", "u", "s",
                                                  tool_use_id="toolu_fg"))
    assert tasks.running == {"t_bg", "toolu_bg"}
    tasks.track(TaskUpdatedMessage("task_updated", {}, "t_bg", {"status": "killed"}))
    assert tasks.running == set()
