"""Long runs that wait where they can, through the real CLI against the fake (issue #26 item 10).

A subscription's usage limit is waited for (up to `limit_wait`), the window an overflow showed outlives a
restart, a retry after a CLI that died before its first frame still carries the task, a fallback handoff
quotes the task, and a typo'd endpoint fails within seconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.resilience import RetryPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, Usage, api_error, cli_env, prompt_too_long, text, tool_use
from tests.support.flowproc import finish, flower

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FAST = RetryPolicy(max_attempts=4, base=0.05, cap=0.2, probe_timeout=30, probe_interval=0.05)


def solo(**kwargs: Any) -> AgentSpec:
    return AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash", "Read"], **kwargs)


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path, env: dict[str, str] | None = None,
            **kwargs: Any) -> Runtime:
    full = {**api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="1"), **(env or {})}
    kwargs.setdefault("resilience", FAST)
    return Runtime(workspace, run_dir=tmp_path / "runs", env=full, **kwargs)


def _children() -> list[int]:
    """This process's child processes (from /proc)."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                found.append(int(entry.name))
    return found


def _kill_the_next_cli() -> tuple[list[int], threading.Thread]:
    """A thread that SIGKILLs the next CLI this process starts, as soon as it exists (before its first frame);
    the pids it killed."""
    before = set(_children())
    killed: list[int] = []

    def kill_first_cli() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not killed:
            for pid in set(_children()) - before:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.005)

    watcher = threading.Thread(target=kill_first_cli, daemon=True)
    watcher.start()
    return killed, watcher


async def test_a_retry_after_the_cli_died_before_its_first_frame_carries_the_task(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10c: the first CLI is killed before it says anything; the retry's only prompt used to be the
    resume text, so the task was lost."""
    scripted_api.script([text("did the task")])
    killed, watcher = _kill_the_next_cli()
    rt = runtime(scripted_api, tmp_path, workspace)
    result = await rt.run(solo(), "the original task TASK-MARK-C")
    watcher.join()
    assert killed and result.ok, result.error
    assert result.attempts == 2 and len(scripted_api.requests) == 1
    assert "TASK-MARK-C" in scripted_api.requests[0].text


async def test_two_incomplete_handoffs_give_a_fallback_that_quotes_the_task(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10d: the fallback said "(see the workbench notes)" instead of the task."""
    scripted_api.script([
        tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=160_000)),
        text("I would rather keep going."), text("No."),
        text("done in generation two", usage=Usage(input_tokens=5_000)),
    ])
    rt = runtime(scripted_api, tmp_path, workspace, handoff=HandoffPolicy(window=200_000))
    events: list[Event] = []
    result = await rt.run(solo(), "port the parser TASK-MARK-D", on_event=events.append)
    assert result.ok, result.error
    doc = Path(result.handoffs[0]).read_text()
    assert "TASK-MARK-D" in doc and "see the workbench notes" not in doc
    assert "TASK-MARK-D" in scripted_api.requests[-1].last_user_text()


def _subscriber(api: ScriptedAPI, reset: float) -> dict[str, str]:
    """A claude.ai login (the CLI then says "You've hit your ... limit"), refused until `reset`."""
    headers = {"anthropic-ratelimit-unified-status": "rejected",
               "anthropic-ratelimit-unified-reset": str(int(reset)),
               "anthropic-ratelimit-unified-representative-claim": "five_hour"}
    api.handler = lambda request: (api_error(429, "rate_limit_error", headers=headers) if time.time() < reset
                                   else text("done after the reset"))
    return {"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake-flower-testing", "ANTHROPIC_API_KEY": ""}


async def test_a_usage_limit_is_waited_for_and_said_once(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10a: a usage limit was retried like an overload (seconds apart) and the step failed."""
    reset = int(time.time()) + 8  # past the four quick retries the step had before
    rt = runtime(scripted_api, tmp_path, workspace, env=_subscriber(scripted_api, reset))
    events: list[Event] = []
    result = await rt.run(solo(), "the task TASK-MARK-A", on_event=events.append)
    assert result.ok and result.text == "done after the reset", result.error
    waits = [e for e in events if e.payload.get("subtype") == "limit_wait"]
    assert len(waits) == 1 and "usage limit reached: waiting" in waits[0].text
    assert waits[0].payload["until"] == reset and result.retries == ()
    assert "You've hit your" in result.errors[0] and "resets" in result.errors[0]
    assert "TASK-MARK-A" in scripted_api.requests[-1].text and time.time() >= reset


async def test_a_usage_limit_past_limit_wait_fails_at_once_saying_when_it_resets(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    reset = int(time.time()) + 3600
    rt = runtime(scripted_api, tmp_path, workspace, env=_subscriber(scripted_api, reset), limit_wait=60)
    started = time.monotonic()
    result = await rt.run(solo(), "task")
    assert not result.ok and result.attempts == 1 and time.monotonic() - started < 30
    assert result.error is not None and "(in 1 h): longer than this step may still wait for a usage limit, 1 min" in result.error
    assert "FLOWER_LIMIT_WAIT" in result.error


async def test_the_window_an_overflow_showed_outlives_a_restart(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10b: the calibrated window was kept in memory only, so a restarted run overflowed again."""
    scripted_api.script([tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=120_000)),
                         prompt_too_long(), text("continued in generation two")])
    first = runtime(scripted_api, tmp_path, workspace)
    assert (await first.run(solo(), "task")).ok
    learned = first.window(solo())
    assert learned is not None and 120_000 <= learned < 130_000  # the context the overflow came at
    scripted_api.script([text("after the restart")])
    again = runtime(scripted_api, tmp_path, workspace)
    result = await again.run(solo(), "task")
    assert result.ok and again.window(solo()) == learned
    rows = json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]
    assert rows[-1]["window"] == learned and rows[-1]["threshold"] == learned - learned // 4
    stored = json.loads((tmp_path / "runs" / "windows.json").read_text())
    assert list(stored["windows"].values()) == [learned] and scripted_api.base_url in next(iter(stored["windows"]))


@pytest.fixture
def silent_port() -> Any:
    """A port whose host never completes a connection: a listener with a full backlog drops every SYN."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    held = [socket.create_connection(("127.0.0.1", port))]
    for _ in range(2):
        pending = socket.socket()
        pending.setblocking(False)
        pending.connect_ex(("127.0.0.1", port))
        held.append(pending)
    yield port
    for s in (*held, server):
        s.close()


@pytest.mark.parametrize("where", ["refuses", "never answers"])
def test_a_typod_endpoint_fails_flower_once_within_seconds_naming_it(
    tmp_path: Path, workspace: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """Item 10e: a typo'd endpoint was probed for up to 600 s an attempt (and a host that never answers
    held the CLI for minutes before its first retry)."""
    if where == "refuses":
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()  # nothing listens there now
    else:
        port = request.getfixturevalue("silent_port")
    url = f"http://127.0.0.1:{port}"
    env = {**cli_env(url, tmp_path / "home"), "FLOWER_RUN_DIR": str(tmp_path / "runs")}
    started = time.monotonic()
    child = flower(env, "once", "hi", "-w", str(workspace))
    try:
        code, out, err = finish(child, timeout=45)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert time.monotonic() - started < 30, err
    assert code != 0 and "Traceback" not in err
    assert f"endpoint {url} does not accept connections and has never answered this run" in err + out


async def test_a_fork_whose_first_cli_died_before_its_first_frame_is_retried_as_the_fork(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """A fork's CLI killed before it says anything: the retry forks again on the fork's own prompt; it must not
    resume the parent in place with the resume text (the parent stays as it was, the task is not lost)."""
    scripted_api.script([text("parent done"), text("fork done")])
    rt = runtime(scripted_api, tmp_path, workspace)
    parent = await rt.run(solo(), "the parent task PARENT-MARK")
    assert parent.ok and parent.session_id
    key = rt._key(parent.session_id)
    kept = len(await rt.store.load(key) or [])
    killed, watcher = _kill_the_next_cli()
    result = await rt.run(solo(), "the fork's task FORK-MARK", resume=parent.session_id, fork=True)
    watcher.join()
    assert killed and result.ok, result.error
    assert "FORK-MARK" in scripted_api.requests[-1].last_user_text()
    assert result.session_id != parent.session_id
    assert len(await rt.store.load(key) or []) == kept  # the parent is never changed by its fork
