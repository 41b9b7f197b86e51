"""A step whose recorded session has no stored history starts afresh (issue #26 item 1).

A SIGKILL within ~60 ms of a step's first API request leaves the session id recorded in the run's DBOS
stream while neither the store nor the CLI's own transcript holds an entry of it. The test makes that state
exactly: it kills `flower run` once step two's first request has come (its id is recorded by then), then
removes what the store and the CLI wrote of that session. The same command then runs step two afresh with
its own prompt, says so, and finishes; step one's request is never repeated at the fake.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import project_key_for_directory

from flower import AgentSpec, texts
from flower.runtime.runtime import Runtime
from flower.stores.sqlite import SqliteSessionStore
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.flowproc import (
    FLOW,
    SLEEP,
    finish,
    flower,
    outputs,
    processes_in,
    runs_json,
    session,
    wait_for_request,
)
from tests.support.killsweep import Chain, Req

pytestmark = [pytest.mark.e2e]


def forget(home: Path, run_dir: Path, ws: Path, session_id: str) -> None:
    """What a kill in the first milliseconds of a session leaves: no entry of it anywhere."""
    with SqliteSessionStore(run_dir / "sessions.db") as store:
        anyio.run(store.delete, {"project_key": project_key_for_directory(str(ws)), "session_id": session_id})
        assert not store.load_sync({"project_key": project_key_for_directory(str(ws)), "session_id": session_id})
    for path in (home / ".claude" / "projects").rglob(f"{session_id}.jsonl"):
        path.unlink()


def test_a_recorded_session_without_history_starts_the_step_afresh(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    home = tmp_path / "home"
    env = scripted_api.cli_env(home)
    ws, run_dir = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    command = ("run", f"{tmp_path / 'flow.py'}:flow", "-w", str(ws), "-r", str(run_dir))

    scripted_api.script([text("ONE"), tool_use("Bash", {"command": SLEEP})])
    child = flower(env, *command)
    two = wait_for_request(scripted_api, "STEP-TWO")
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    deadline = time.monotonic() + 20
    while processes_in(home) and time.monotonic() < deadline:  # the CLI dies by its parent-death signal
        time.sleep(0.05)
    forget(home, run_dir, ws, session(two))
    (row,) = runs_json(env, run_dir)
    assert (row["state"], row["done"]) == ("interrupted", 1)

    restart = len(scripted_api.requests)
    scripted_api.script([text("TWO"), text("THREE")])
    code, _, err = finish(flower(env, *command))
    assert code == 0, err
    assert f"flower: two: its session {session(two)} has no stored history; starting the step afresh" \
        in err.splitlines()
    after = scripted_api.requests[restart:]
    assert [("STEP-ONE" in r.text, "STEP-TWO" in r.last_user_text(), "STEP-THREE" in r.text) for r in after] == \
        [(False, True, False), (False, False, True)]  # step one is replayed; step two runs on its own prompt
    assert texts.RESUME_AFTER_CRASH not in after[0].text and session(after[0]) != session(two)
    assert outputs(run_dir) == {"one": "ONE", "two": "TWO", "three": "THREE"}
    (row,) = runs_json(env, run_dir)
    assert (row["state"], row["done"], row["total"]) == ("finished", 3, 3)


def test_a_new_generation_without_history_resumes_the_generation_before(tmp_path: Path) -> None:
    """A kill in a new generation's first milliseconds (step two hands over after its first tool call): its
    session is recorded and nothing of it is stored anywhere. The step resumes the generation before, which
    holds the work done, instead of starting afresh and doing that work again (issue #26 item 1)."""
    lost: dict[str, str] = {}

    def forget_generation(chain: Chain) -> None:
        requests = chain.api.requests
        (gen2,) = [session(requests[i]) for i, tag in chain.tags.items() if tag == ("two", "g2n0")]
        (gen1,) = {session(requests[i]) for i, tag in chain.tags.items() if tag == ("two", "g1n0")}
        lost.update(gen1=gen1, gen2=gen2)
        forget(chain.home, chain.runs, chain.ws, gen2)

    chain = Chain(tmp_path, [Req("two", "g2n0", 0)], after_kill=forget_generation)
    code, _, err = chain.run()
    assert code == 0, err
    assert f"flower: two: its session {lost['gen2']} has no stored history; resuming its previous session " \
           f"{lost['gen1']}" in err.splitlines()
    (kill,) = chain.kills
    again = [chain.api.requests[i] for i, (step, _) in sorted(chain.tags.items()) if i >= kill.since and step == "two"]
    assert session(again[0]) == lost["gen1"] and texts.RESUME_AFTER_CRASH in again[0].last_user_text()
    assert chain.redone() == []  # the first generation's tool call is not run again
    assert outputs(chain.runs) == {"one": "OUT-one", "two": "OUT-two", "three": "OUT-three"}


def test_a_new_session_is_said_before_its_cli_starts_under_the_id_said(tmp_path: Path) -> None:
    """The id of a new session is chosen and said (the event a durable step records it on) before the CLI
    runs, so a kill at any instant after the CLI wrote its first line leaves a session the next run finds;
    the CLI's transcript and requests carry that id."""
    home = tmp_path / "home"
    said: list[tuple[str, list[str]]] = []

    def on_event(event: Any) -> None:
        if event.payload.get("subtype") == "session":
            said.append((event.payload["session_id"], processes_in(home)))

    with ScriptedAPI(handler=lambda request: text("done")) as api:
        (tmp_path / "ws").mkdir()
        runtime = Runtime(tmp_path / "ws", run_dir=tmp_path / "runs", env=api.cli_env(home))
        result = runtime.run_sync(AgentSpec(name="a", instructions="x"), "hello", on_event=on_event)
        (sid, running), = said
        assert running == []  # no CLI of this step was running yet
        assert result.session_id == sid
        assert {r.headers.get("x-claude-code-session-id") for r in api.requests} == {sid}
        assert [p.stem for p in (home / ".claude" / "projects").rglob("*.jsonl")] == [sid]
