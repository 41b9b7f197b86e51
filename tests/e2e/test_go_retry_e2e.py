"""A failed `flower go` run wakes by retrying its failed step (issue #26 item 7, L-7, L-11).

The first run is driven through a pty of 80 columns: the clarifier's question is answered, the brief and
the goal are set, the coordinator dispatches its coder once and then the API refuses its next request with
a fatal 400, so the work step fails and the run stops. `flower resume RUN` or `flower go` again (on a pipe) wakes it: DBOS forks
the run from the failed attempt, so clarify and goal are not asked again (the fake counts every request),
the brief and the answer stay, and the work session resumes with what it had done.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flower import texts
from flower.testing import ScriptedAPI, api_error, text, tool_use
from tests.support.ptykit import Term

pytestmark = pytest.mark.e2e

REQUEST = "make the CSV importer handle quoted newlines"
BRIEF = ("## Goal\nThe importer reads quoted newlines.\n## Acceptance criteria\n- impl.txt says one\n"
         "## Bounds\nNothing else changes.\n## Unknowns and assumptions\nRFC 4180 quoting, as answered.\n")
GOAL = "## Goal\nQuoted newlines import.\n## Checks\n- impl.txt says one\n"
BEQUEST = ("## What this is\nA CSV importer.\n## Acceptance\nAll checks met.\n## Generated files\nNone.\n"
           "## Dead ends\nNone.\n## Workbench\n.flower/: read notes/brief.md first.\n")
DISPATCH = {"description": "fix the importer", "prompt": "CODE-ONE: change impl.txt", "subagent_type": "coder",
            "run_in_background": False}


def _flower(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=240)


@pytest.mark.parametrize("wake", ["resume", "go"])
def test_a_failed_go_run_is_woken_and_retries_only_its_failed_step(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path, wake: str
) -> None:
    scripted_api.script(
        [
            tool_use("mcp__human__ask", {"question": "Which quoting rules?", "options": ["RFC 4180", "Excel"]}),
            text(BRIEF),
            text(GOAL),
            tool_use("Agent", DISPATCH),
        ],
        subagents={"CODE-ONE": [tool_use("Bash", {"command": "echo one > impl.txt"}), text("wrote one")]},
    )
    # The coordinator's request after its coder's report is refused, however often it is asked.
    scripted_api.handler = lambda request: (api_error(400, "FAKE-BAD-REQUEST: the work step fails here")
                                            if not request.is_subagent and "hand-back" in request.text else None)
    env = scripted_api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="0")
    term = Term(["-m", "flower", "go", "--rounds", "1", REQUEST], cwd=workspace, env=env, timeout=240)
    term.expect("? q1 Which quoting rules?")
    term.expect("answer (a number")
    term.send("1\r")
    term.expect("x stopped at work")
    assert term.wait_exit() == 1, term.seen[-2000:]
    before = scripted_api.requests
    failed_work = scripted_api.main_requests[-1]
    scripted_api.handler = None
    runs = workspace / "runs"
    (failed,) = json.loads(_flower(env, "runs", "-r", str(runs), "--json").stdout)
    assert failed["state"] == "failed" and failed["failed_at"] == "work"

    scripted_api.script([
        text("round one done after the retry"),
        text("## Verdict\nachieved\n## Reason\nimpl.txt says one.\n"),
        text(BEQUEST),
    ])
    if wake == "resume":
        woken = _flower(env, "resume", failed["run_id"], "-r", str(runs))
    else:  # `flower go` again in the workspace, with the flags it was started with
        woken = _flower(env, "go", "-w", str(workspace), "--rounds", "1")
    assert woken.returncode == 0, woken.stdout + woken.stderr
    out = woken.stdout + woken.stderr
    assert f"<- waking run {failed['run_id']} (wake 1): retrying its failed step" in out
    assert "Traceback" not in out

    after = scripted_api.requests[len(before):]
    # Only the failed step and the ones after it asked the model: no clarify, no goal, no second dispatch.
    assert [r.is_subagent for r in after] == [False, False, False], [r.text[:80] for r in after]
    work, judged, bequest = after
    assert texts.RESUME_AFTER_FAILURE in work.text
    assert work.headers.get("x-claude-code-session-id") == failed_work.headers.get("x-claude-code-session-id")
    assert "CODE-ONE" in work.text and len(work.messages) > len(failed_work.messages)  # its history kept
    assert "Judge this round" in judged.text and texts.BEQUEST_REQUEST[:60] in bequest.text
    notes = workspace / ".flower" / "notes"
    assert "RFC 4180 quoting" in (notes / "brief.md").read_text()  # the brief and the answer are kept
    assert "RFC 4180" in "".join(p.read_text() for p in notes.glob("*questions*.md"))
    assert "A CSV importer." in (workspace / "CLAUDE.md").read_text()
    rows = json.loads(_flower(env, "runs", "-r", str(runs), "--json").stdout)
    assert [r["state"] for r in rows] == ["failed", "finished"]
    assert (rows[0]["done"], rows[0]["total"]) == (2, 4), rows[0]  # the step it failed at is not done
    assert rows[1]["done"] == rows[1]["total"] == 4


def test_flower_run_again_of_a_failed_run_names_the_retry(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """`flower run` of the same target refuses a failed run in one line that says how to retry it, and
    `flower resume RUN` retries the failed step only (the first step's request is not repeated)."""
    flow = tmp_path / "flow.py"
    flow.write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "spec = AgentSpec(name='s', instructions='', allowed_tools=['Read'])\n"
        "wf = Workflow([Step('one', spec, 'FIRST-STEP'), Step('two', spec, 'SECOND-STEP')], name='two-steps')\n"
    )
    scripted_api.script([text("one done")])
    scripted_api.handler = lambda request: (api_error(400, "FAKE-BAD-REQUEST: step two fails")
                                            if "SECOND-STEP" in request.text else None)
    env = scripted_api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="0")
    target = ["run", f"{flow}:wf", "-w", str(tmp_path), "-r", str(tmp_path / "runs")]
    first = _flower(env, *target)
    assert first.returncode == 1, first.stdout + first.stderr
    scripted_api.handler = None
    (row,) = json.loads(_flower(env, "runs", "-r", str(tmp_path / "runs"), "--json").stdout)
    again = _flower(env, *target)
    assert again.returncode == 1 and again.stderr.count("\n") == 1
    assert f"flower resume {row['run_id']} retries its failed step" in again.stderr

    scripted_api.script([text("two done")])
    seen = len(scripted_api.requests)
    resumed = _flower(env, "resume", row["run_id"], "-r", str(tmp_path / "runs"), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert f"run {row['run_id']} failed at two: retrying that step as run" in resumed.stderr
    (retry,) = scripted_api.requests[seen:]
    assert "SECOND-STEP" in retry.text and "FIRST-STEP" not in retry.last_user_text()
    result = json.loads(resumed.stdout)
    assert result["state"] == "finished" and result["run_id"] != row["run_id"]

    twice = _flower(env, "resume", row["run_id"], "-r", str(tmp_path / "runs"))
    assert twice.returncode == 1 and twice.stderr.count("\n") == 1
    assert f"was retried as run {result['run_id']}: continue that one" in twice.stderr


def test_a_run_that_failed_in_a_parallel_step_is_not_retried(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """Its branches are child workflows a retry would all run again: one line says so, nothing runs."""
    flow = tmp_path / "flow.py"
    flow.write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "spec = AgentSpec(name='s', instructions='', allowed_tools=['Read'])\n"
        "wf = Workflow([Step('each', spec, 'ITEM-{item}', over=['a', 'b'])], name='fan')\n"
    )
    scripted_api.handler = lambda request: (api_error(400, "FAKE-BAD-REQUEST: b fails") if "ITEM-b" in request.text
                                            else text("a done"))
    env = scripted_api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="0")
    first = _flower(env, "run", f"{flow}:wf", "-w", str(tmp_path), "-r", str(tmp_path / "runs"))
    assert first.returncode == 1, first.stdout + first.stderr
    (row,) = json.loads(_flower(env, "runs", "-r", str(tmp_path / "runs"), "--json").stdout)
    seen = len(scripted_api.requests)
    again = _flower(env, "resume", row["run_id"], "-r", str(tmp_path / "runs"))
    assert again.returncode == 1 and again.stderr.count("\n") == 1, again.stderr
    assert f"run {row['run_id']} failed in parallel step each: a failed parallel step is not retried" in again.stderr
    assert len(scripted_api.requests) == seen
