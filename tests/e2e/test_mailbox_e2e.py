"""The mailbox between a run and `flower asks / answer / say` in other processes (issue #26 item 8).

- Several `flower answer` to one question: exactly one says "answered" and the model gets that answer; the
  others say who was first, on one line, and exit 1.
- A channel given only to `coordinator(channel=)` is bound by the Runtime that runs the spec.
- After `flower go --new`, `flower say RUN_DIR` reaches the new run, not the one before it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flower import texts
from flower.agent.roles import coordinator, worker
from flower.human.channel import HumanChannel
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ASK = "mcp__human__ask"
INBOX = "mcp__human__inbox"


def flower(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL)


def lead(channel: HumanChannel) -> Any:
    return coordinator("lead", "Goal: paint the shed.", {"hands": worker("does the work", "You work.")},
                       channel=channel)


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path) -> Runtime:
    return Runtime(workspace, run_dir=tmp_path / "runs", env=api.cli_env(tmp_path / "home"), run_id="run-7")


def when(ready: Callable[[], bool], then: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Once `ready()` holds (polled), run `then()` in a thread; its return value lands in the list."""
    out: list[Any] = []

    def body() -> None:
        deadline = time.monotonic() + 90
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        out.append(then())

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


async def test_of_four_concurrent_answers_exactly_one_is_answered_and_the_model_gets_it(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([tool_use(ASK, {"question": "Which brush?"}), text("done")])
    rt = runtime(scripted_api, tmp_path, workspace)
    # The run takes its letters only every 10 s: all four answers arrive while q1 still looks open to them.
    ch = HumanChannel(timeout_s=90, poll_s=10).bind(rt)

    def answer_four_at_once() -> list[tuple[int, str, str]]:
        procs = [subprocess.Popen([sys.executable, "-m", "flower", "answer", str(rt.run_dir), "q1", f"brush {i}"],
                                  cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(4)]
        return [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]

    helper, out = when(lambda: bool(ch.pending()), answer_four_at_once)
    result = await rt.run(lead(ch), "Paint the shed.")
    helper.join(120)
    (outcomes,) = out
    won = [o for o in outcomes if o[0] == 0]
    lost = [o for o in outcomes if o[0] != 0]
    assert len(won) == 1 and won[0][1] == "answered q1: Which brush?\n" and won[0][2] == "", outcomes
    winner = f"brush {outcomes.index(won[0])}"
    assert result.ok and scripted_api.main_requests[1].result_text() == texts.ASK_ANSWERED.format(answer=winner)
    assert len(lost) == 3
    for status, stdout, stderr in lost:
        assert status == 1 and stdout == "" and stderr.count("\n") == 1
        assert stderr.startswith("flower: q1 was already answered by ") and stderr.endswith(f": {winner}\n")


async def test_a_channel_given_only_to_the_coordinator_is_reachable_from_flower_asks_and_answer(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([tool_use(ASK, {"question": "Which colour?"}), text("painting it red")])
    rt = runtime(scripted_api, tmp_path, workspace)
    ch = HumanChannel(timeout_s=60, poll_s=0.1)  # never bound by the caller: the Runtime running it binds it

    def ask_and_answer() -> tuple[str, str]:
        listed = flower("asks", str(rt.run_dir), cwd=tmp_path)
        answered = flower("answer", str(rt.run_dir), "red", cwd=tmp_path)
        return listed.stdout + listed.stderr, answered.stdout + answered.stderr

    helper, out = when(lambda: bool(ch.pending()), ask_and_answer)
    result = await rt.run(lead(ch), "Paint the shed.")
    helper.join(60)
    ((listed, answered),) = out
    assert listed.startswith("q1  run-7  asked ") and listed.strip().endswith("Which colour?"), listed
    assert answered == "answered q1: Which colour?\n"
    assert result.ok and scripted_api.main_requests[1].result_text() == texts.ASK_ANSWERED.format(answer="red")


BRIEF = ("## Goal\nThe importer reads TSV.\n## Acceptance criteria\n- it reads a.tsv\n"
         "## Bounds\nNothing else changes.\n## Unknowns and assumptions\nNone.\n")


def test_flower_say_after_go_new_reaches_the_new_run_not_the_one_before(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    env = scripted_api.cli_env(tmp_path / "home")
    runs = workspace / "runs"
    # The first run asks (nobody answers within 1 s): its letters are the newest in the mailbox.
    scripted_api.script([tool_use(ASK, {"question": "CSV or TSV?"}), text(BRIEF)])
    first = flower("go", "--clarify-only", "--timeout", "1", "import CSV files", cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    asked = len(scripted_api.main_requests)
    # The new run's clarifier reads its inbox; the fake holds that first reply for 10 s while the human says.
    scripted_api.script([tool_use(INBOX, {}, delay=10), text(BRIEF)])
    helper, out = when(lambda: len(scripted_api.main_requests) > asked,
                       lambda: flower("say", str(runs), "Tabs, not commas.", cwd=tmp_path))
    second = flower("go", "--clarify-only", "--new", "import TSV files", cwd=workspace, env=env)
    helper.join(60)
    assert second.returncode == 0, second.stderr
    (said,) = out
    assert said.returncode == 0 and said.stdout.startswith("sent to "), said.stderr
    delivered = scripted_api.main_requests[-1].result_text()
    assert "1. Tabs, not commas." in delivered, delivered
