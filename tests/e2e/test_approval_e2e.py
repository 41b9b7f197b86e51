"""A human approves a tool call (issue #28 item 1, L-15), through `flower run` and the real CLI.

The spec's rule `Bash(git push:*)` turns the model's `true && git push ...; echo ran >> ran.txt` into a
question on the run's human channel; the answer comes from `flower answer` in another process:

- yes: the call runs (a worker's own rule, its call through the coordinator's hooks);
- no with a reason: the model gets the denial and the reason, and the call never ran;
- no answer within the channel's timeout: denied as such, and nothing is left waiting;
- SIGKILL while it waits: the resumed session issues the call again and it is asked again (the dead
  question is closed); SIGKILL after the human answered but before the run took the answer: the
  answer holds for the call issued again, nobody is asked twice.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flower import texts
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.flowproc import finish, flower, processes_in, session

pytestmark = [pytest.mark.e2e]

SPECS = """\
import os
from flower import AgentSpec, coordinator, worker
from flower.human import HumanChannel

channel = HumanChannel(timeout_s=float(os.environ["APPROVAL_WAIT"]), poll_s=float(os.environ["APPROVAL_POLL"]))
solo = AgentSpec("solo", "You ship releases.", allowed_tools=["Bash"], channel=channel,
                 approve=["Bash(git push:*)"])
lead = coordinator("lead", "Ship the release.",
                   {"shipper": worker("ships releases", "You ship.", approve=["Bash(git push:*)"])}, channel=channel)
"""
PUSH = {"command": "true && git push origin main 2>/dev/null; echo ran >> ran.txt"}
RULE = "Bash(git push:*)"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def start(env: dict[str, str], tmp: Path, target: str, *more: str, wait: float = 90, poll: float = 0.2
          ) -> subprocess.Popen[str]:
    (tmp / "specs.py").write_text(SPECS)
    return flower({**env, "APPROVAL_WAIT": str(wait), "APPROVAL_POLL": str(poll)}, "run",
                  f"{tmp / 'specs.py'}:{target}", "-w", str(tmp / "ws"), "-r", str(tmp / "runs"), *more)


def waiting(tmp: Path, child: subprocess.Popen[str], count: int = 1, timeout: float = 90, *, new: str = ""
            ) -> list[dict[str, Any]]:
    """`flower asks --json` once it lists `count` questions (none of run `new`, when given); the run's output
    if it ends first."""
    deadline = time.monotonic() + timeout
    listed: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise AssertionError(f"the run ended ({child.returncode}) before asking: {finish(child)}")
        if (tmp / "runs" / "human.db").exists():
            shown = cli("asks", str(tmp / "runs"), "--json", cwd=tmp)
            listed = json.loads(shown.stdout) if shown.returncode == 0 else []
            if len(listed) >= count and not any(q["run"] == new for q in listed):
                return listed
        time.sleep(0.2)
    raise AssertionError(f"never {count} question(s) waiting: {listed}")


def questions(tmp: Path) -> list[tuple[str, str]]:
    """(run, qid) of every question the mailbox ever held."""
    with sqlite3.connect(tmp / "runs" / "human.db") as db:
        return list(db.execute("SELECT run, ref FROM human_letters WHERE kind = 'question' ORDER BY id"))


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path


def test_a_workers_call_waits_for_a_yes_from_another_process_then_runs(scripted_api: ScriptedAPI, tmp: Path) -> None:
    scripted_api.script(
        [tool_use("Agent", {"description": "ship", "prompt": "SHIP-1: push the release", "subagent_type": "shipper",
                            "run_in_background": False}),
         text("shipped")],
        subagents={"SHIP-1": [tool_use("Bash", PUSH), text("pushed")]},
    )
    child = start(scripted_api.cli_env(tmp / "home"), tmp, "lead", "-p", "ship the release")
    (asked,) = waiting(tmp, child)
    assert asked["id"] == "q1" and asked["options"] == ["yes", "no"]
    assert asked["approval"]["agent"] == "shipper" and asked["approval"]["rule"] == RULE
    assert asked["question"] == f"Approve shipper's Bash: {PUSH['command']}  (rule {RULE})"
    listed = cli("asks", str(tmp / "runs"), cwd=tmp).stdout
    assert listed.startswith("q1  ") and " approval " in listed and listed.rstrip().endswith("[yes | no]"), listed
    assert not (tmp / "ws" / "ran.txt").exists()
    said = cli("answer", str(tmp / "runs"), "q1", "yes", cwd=tmp)
    assert (said.returncode, said.stdout, said.stderr) == (0, f"approved q1: {asked['question']}\n", "")
    code, out, err = finish(child)
    assert code == 0, err
    assert "? q1 approve shipper's Bash: " + PUSH["command"] in out.splitlines() and "+ q1 approved" in out, out
    assert (tmp / "ws" / "ran.txt").read_text() == "ran\n"
    assert cli("asks", str(tmp / "runs"), cwd=tmp).stdout == "no question is waiting\n"


def test_a_no_with_a_reason_reaches_the_model_as_a_denial_and_the_call_never_runs(
    scripted_api: ScriptedAPI, tmp: Path
) -> None:
    scripted_api.script([tool_use("Bash", PUSH), text("not pushed")])
    child = start(scripted_api.cli_env(tmp / "home"), tmp, "solo", "-p", "push the release")
    waiting(tmp, child)
    vague = cli("answer", str(tmp / "runs"), "q1", "maybe", "later", cwd=tmp)
    assert (vague.returncode, vague.stderr) == (
        1, "flower: q1 asks to approve a call: answer yes or no, then an optional reason\n")
    said = cli("answer", str(tmp / "runs"), "q1", "no", "the release is frozen", cwd=tmp)
    assert said.returncode == 0 and said.stdout.startswith("denied q1: Approve Bash: "), said.stderr
    code, out, err = finish(child)
    assert code == 0, err
    lines = out.splitlines()  # the live view, in a pipe: the question, how to answer it, how it ended
    assert "? q1 approve Bash: true && git push origin main 2>/dev/null; echo ran >> ran.txt" in lines, out
    assert f"  flower answer {(tmp / 'runs').resolve()} q1 yes|no [reason]   (rule Bash(git push:*))" in lines, out
    assert "x q1 denied: the release is frozen" in lines
    seen = scripted_api.main_requests[1].result_text()
    assert seen == "PreToolUse:Bash hook error: " + texts.APPROVAL_DENIED.format(
        rule=RULE, reason=" Reason: the release is frozen."), seen
    assert not (tmp / "ws" / "ran.txt").exists()


def test_no_answer_in_time_denies_the_call_as_the_channel_says(scripted_api: ScriptedAPI, tmp: Path) -> None:
    scripted_api.script([tool_use("Bash", PUSH), text("nobody answered")])
    code, _, err = finish(start(scripted_api.cli_env(tmp / "home"), tmp, "solo", "-p", "push", wait=1))
    assert code == 0, err
    seen = scripted_api.main_requests[1].result_text()
    assert seen == "PreToolUse:Bash hook error: " + texts.APPROVAL_TIMEOUT.format(rule=RULE), seen
    assert not (tmp / "ws" / "ran.txt").exists()
    assert cli("asks", str(tmp / "runs"), cwd=tmp).stdout == "no question is waiting\n"


def _kill(api: ScriptedAPI, child: subprocess.Popen[str], home: Path) -> None:
    """SIGKILL flower. The kernel then sends its CLI SIGTERM, and on its way out the CLI may send one more
    request (the hook it waited on failed, so the call was blocked): that one is answered apart, not from the
    script, and the test goes on once nothing of the killed run is left."""
    api.handler = lambda request: text("(the killed run's last request)")
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    deadline = time.monotonic() + 30
    while processes_in(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not processes_in(home)
    api.handler = None


@pytest.mark.parametrize("answered", [False, True], ids=["waiting", "answered"])
def test_after_a_sigkill_a_waiting_approval_is_asked_again_and_an_answered_one_is_not(
    scripted_api: ScriptedAPI, tmp: Path, answered: bool
) -> None:
    env = scripted_api.cli_env(tmp / "home")
    scripted_api.script([tool_use("Bash", PUSH)])
    # The run takes remote answers every 60 s: an answer given now is in the mailbox, not yet in the run.
    child = start(env, tmp, "solo", "-p", "push the release", poll=60 if answered else 0.2)
    (first,) = waiting(tmp, child)
    if answered:
        said = cli("answer", str(tmp / "runs"), "q1", "yes", cwd=tmp)
        assert said.returncode == 0 and said.stdout.startswith("approved q1"), said.stderr
    _kill(scripted_api, child, tmp / "home")
    assert not (tmp / "ws" / "ran.txt").exists()
    sid = session(scripted_api.main_requests[0])

    # The resumed session: the CLI closed the killed call as interrupted, and the model issues it again.
    scripted_api.script([tool_use("Bash", PUSH), text("pushed after the restart")])
    child = start(env, tmp, "solo", "-p", "continue", "--resume", sid)
    if not answered:
        # The dead process's q1 is closed, and the call is asked again by the resumed session (a new run).
        (again,) = waiting(tmp, child, new=first["run"])
        assert again["approval"]["key"] == first["approval"]["key"] and again["question"] == first["question"]
        said = cli("answer", str(tmp / "runs"), again["id"], "yes", cwd=tmp)
        assert said.returncode == 0, said.stderr
    code, _, err = finish(child)
    assert code == 0, err
    assert (tmp / "ws" / "ran.txt").read_text() == "ran\n"
    asked = questions(tmp)
    assert len(asked) == (1 if answered else 2), asked
    assert cli("asks", str(tmp / "runs"), cwd=tmp).stdout == "no question is waiting\n"
