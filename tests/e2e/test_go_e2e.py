"""`flower go` through a real pty on the scripted model (issue #15, L-11, L-12, L-14).

The whole command runs as a child process in a pseudo-terminal of 80 columns, against the test's scripted
API: the clarifier asks one question, answered by typing its option's number; the goal is set; the judge
rejects round one and accepts round two; the bequest lands in CLAUDE.md and AGENTS.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from flower.go.bequest import BEGIN, Bequest
from flower.human.documents import Brief, Goal, Verdict
from flower.testing import GoRound, ScriptedAPI, go_dispatch, go_script, text, tool_use
from tests.support.ptykit import Term

pytestmark = pytest.mark.e2e

REQUEST = "make the CSV importer handle quoted newlines"
BRIEF = Brief(goal="The importer reads quoted newlines.", acceptance="- impl.txt says two",
              bounds="Nothing else changes.", unknowns="RFC 4180 quoting, as answered.")
GOAL = Goal("Quoted newlines import.", ("impl.txt says two",))
BEQUEST = Bequest(what="A CSV importer that reads quoted newlines.", acceptance="All checks met.",
                  generated="None.", dead_ends="Round one wrote the wrong value.",
                  workbench=".flower/: read notes/brief.md first.")
TASK = "change impl.txt"


def report_by_step(env: dict[str, str], workspace: Path) -> dict[str, object]:
    shown = subprocess.run([sys.executable, "-m", "flower", "report", "runs", "--by", "step", "--json"],
                           cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    data: dict[str, object] = json.loads(shown.stdout)
    return data


def test_go_clarifies_sets_a_goal_is_judged_twice_and_bequeaths(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script(
        go_script(
            asks=[("Which quoting rules?", ["RFC 4180", "Excel"])], brief=BRIEF, goal=GOAL, bequest=BEQUEST,
            rounds=[GoRound([go_dispatch("CODE-ONE", TASK), text("round one done")],
                            Verdict("not_yet", "impl.txt says one.", ("impl.txt says two",))),
                    GoRound([go_dispatch("CODE-TWO", TASK), text("round two done")],
                            Verdict("achieved", "impl.txt says two."))],
        ),
        subagents={
            "CODE-ONE": [tool_use("Bash", {"command": "echo one > impl.txt"}), text("wrote one")],
            "CODE-TWO": [tool_use("Bash", {"command": "echo two > impl.txt"}), text("wrote two")],
        },
    )
    (workspace / "CLAUDE.md").write_text("# My project\nKeep this line.\n")
    env = scripted_api.cli_env(tmp_path / "home")
    term = Term(["-m", "flower", "go", REQUEST], cwd=workspace, env=env, timeout=240)
    term.expect("? q1 Which quoting rules?")
    term.expect("1) RFC 4180")
    term.expect("answer (a number")
    term.send("1\r")
    term.expect("+ q1 answered: RFC 4180")
    term.expect("= run ")
    assert term.wait_exit() == 0, term.seen[-2000:]
    assert ", 2 judged round(s); files: .flower/notes/brief.md, .flower/notes/goal.md, CLAUDE.md, AGENTS.md" \
        in term.text()

    assert (workspace / "impl.txt").read_text() == "two\n"
    main = scripted_api.main_requests
    assert "RFC 4180" in main[1].result_text()  # the answer reached the clarifier as the tool's result
    judged = [r for r in main if "Judge this round" in r.text]
    assert len(judged) == 2
    feedback = [r for r in main if "did NOT achieve the goal" in r.last_user_text()]
    assert len(feedback) == 1 and "impl.txt says one" in feedback[0].last_user_text()
    brief = (workspace / ".flower" / "notes" / "brief.md").read_text()
    assert "RFC 4180 quoting" in brief
    claude, agents = (workspace / "CLAUDE.md").read_text(), (workspace / "AGENTS.md").read_text()
    assert claude.startswith("# My project\nKeep this line.\n") and BEGIN in claude
    assert "A CSV importer that reads quoted newlines." in agents
    assert claude[claude.index(BEGIN):] == agents  # the same block in both files

    # Every session lands in its step's row (the judge's, the round's, the forked bequest's), each reply once.
    report = report_by_step(env, workspace)
    assert {row["step"]: row["messages"] for row in report["rows"]} == {  # type: ignore[index, union-attr]
        "clarify": 2, "goal": 1, "work": 4, "work:judge#1": 1, "work#round2": 4, "work:judge#2": 1, "bequest": 1}
    assert report["total"]["messages"] == len(scripted_api.requests)  # type: ignore[index]


@pytest.mark.parametrize("flag", [["--timeout", "inf"], ["--timeout", "nan"], ["--budget", "0"]])
def test_go_refuses_impossible_values_in_one_line(tmp_path: Path, workspace: Path, flag: list[str]) -> None:
    ran = subprocess.run([sys.executable, "-m", "flower", "go", "-w", str(workspace), *flag, "x"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "x"})
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1 and ran.stderr.startswith("flower: "), ran.stderr


def test_go_on_a_pipe_without_a_request_is_one_line(tmp_path: Path, workspace: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "flower", "go", "-w", str(workspace)], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANTHROPIC_API_KEY": "x"})
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1
    assert "give the request as an argument" in ran.stderr


def test_go_wakes_a_killed_run_appends_the_new_sentence_and_resumes_the_work_session(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    import os
    import signal
    import time

    started = workspace / "worker-started"
    scripted_api.script(
        [*go_script(brief=BRIEF, goal=GOAL), go_dispatch("CODE-SLOW", TASK)],  # killed in round one
        subagents={"CODE-SLOW": [tool_use("Bash", {"command": f"touch {started} && python3 -c 'import time; "
                                                           "time.sleep(120)'"})]},
    )
    env = scripted_api.cli_env(tmp_path / "home")
    first = Term(["-m", "flower", "go", REQUEST], cwd=workspace, env=env, timeout=240)
    first.expect("= step work")
    for _ in range(600):
        if started.exists():
            break
        time.sleep(0.1)
    assert started.exists(), first.seen[-2000:]
    os.killpg(first.child.pid, signal.SIGKILL)  # the whole process group: go, the CLI, the worker's shell
    first.child.close(force=True)
    work_session = scripted_api.main_requests[-1]

    scripted_api.script(go_script(
        brief=None,  # the brief is on disk: clarify is done
        goal=replace(GOAL, checks=("impl.txt says two and CRLF is handled",)),  # the re-derived goal
        rounds=[GoRound([tool_use("mcp__human__inbox", {}), text("round one done after the restart")],
                        Verdict("achieved", "All checks hold."))],
        bequest=BEQUEST,
    ))
    second = Term(["-m", "flower", "go", "also handle CRLF"], cwd=workspace, env=env, timeout=240)
    second.expect("= run ")
    assert second.wait_exit() == 0, second.seen[-2000:]
    shown = second.text()
    assert "<- waking run" in shown and "(wake 1)" in shown and "brief: confirmed" in shown
    assert "goal: 1 items" in shown and "appended to the brief" in shown
    assert "also handle CRLF" in (workspace / ".flower" / "notes" / "brief.md").read_text()
    after = scripted_api.main_requests[len(scripted_api.main_requests) - 5:]
    assert "also handle CRLF" in after[0].text  # the goal was derived again from the amended brief
    assert "CRLF is handled" in (workspace / ".flower" / "notes" / "goal.md").read_text()
    # The work step resumed its own session: the request carries the history it had before the kill.
    assert "CODE-SLOW" in after[1].text and len(after[1].messages) > len(work_session.messages)
    assert "also handle CRLF" in after[2].result_text()  # and the coordinator's inbox delivered the sentence

    # The killed process's sessions count for their steps too: no message is left without a step.
    report = report_by_step(env, workspace)
    rows = {row["step"]: row["messages"] for row in report["rows"]}  # type: ignore[index, union-attr]
    assert set(rows) == {"clarify", "goal", "work", "work:judge#1", "bequest"}, rows
    assert sum(rows.values()) == report["total"]["messages"] == len(scripted_api.requests)  # type: ignore[index]


def test_ctrl_c_once_interrupts_with_a_remark_and_twice_stops_with_the_resume_command(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    import time

    from tests.support.ptykit import CTRL_C

    started = workspace / "worker-started"
    slow = {"command": f"touch {started} && python3 -c 'import time; time.sleep(120)'"}
    scripted_api.script(
        # --no-goal: clarify, then the work step dispatches (and, after the remark, dispatches again)
        [*go_script(brief=BRIEF), go_dispatch("CODE-SLOW", TASK), go_dispatch("CODE-SLOWER", TASK)],
        subagents={"CODE-SLOW": [tool_use("Bash", slow)], "CODE-SLOWER": [tool_use("Bash", slow)]},
    )
    env = scripted_api.cli_env(tmp_path / "home")
    term = Term(["-m", "flower", "go", "--no-goal", REQUEST], cwd=workspace, env=env, timeout=240)

    def wait_for_worker() -> None:
        for _ in range(600):
            if started.exists():
                return
            time.sleep(0.1)
        raise AssertionError(term.seen[-2000:])

    term.expect("= step work")
    wait_for_worker()
    started.unlink()
    term.send(CTRL_C)
    term.expect("interrupted: a remark")
    term.send("use the csv module\r")
    term.expect("! interrupted: use the csv module")
    wait_for_worker()  # the session went on: the coordinator dispatched again, the remark in its request
    resumed = scripted_api.main_requests[-1]
    assert "interrupted on purpose" in resumed.last_user_text() and "use the csv module" in resumed.last_user_text()
    term.send(CTRL_C)
    term.expect("interrupted: a remark")
    term.send(CTRL_C)
    term.expect("Continue it with: flower go -w")
    assert term.wait_exit() == 130


def test_new_archives_the_brief_and_starts_over_on_a_pipe(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    env = scripted_api.cli_env(tmp_path / "home")

    def go(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "flower", "go", "--clarify-only", *args], cwd=workspace,
                              env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180)

    scripted_api.script(go_script(brief=BRIEF))
    first = go(REQUEST)
    assert first.returncode == 0, first.stderr
    assert "\x1b" not in first.stdout and "= step clarify" in first.stdout  # plain lines on a pipe
    notes = workspace / ".flower" / "notes"
    assert "RFC 4180 quoting" in (notes / "brief.md").read_text()

    refused = go("import TSV files too")  # a finished run's brief would silently stand in for the request
    assert refused.returncode == 1 and "start over with --new" in refused.stderr
    assert refused.stderr.count("\n") == 1
    scripted_api.script(go_script(brief=replace(BRIEF, unknowns="Excel quoting, as answered.")))
    second = go("--new", "import TSV files too")
    assert second.returncode == 0, second.stderr
    archived = list((notes / "archive").glob("*/brief.md"))
    assert len(archived) == 1 and "RFC 4180 quoting" in archived[0].read_text()
    assert "Excel quoting" in (notes / "brief.md").read_text()
    assert "import TSV files too" in scripted_api.main_requests[-1].text  # clarified afresh, not skipped


def test_json_prints_one_json_object_per_line(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    scripted_api.script(go_script(brief=BRIEF))
    ran = subprocess.run([sys.executable, "-m", "flower", "go", "--json", "--clarify-only", REQUEST], cwd=workspace,
                         env=scripted_api.cli_env(tmp_path / "home"), capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=180)
    assert ran.returncode == 0, ran.stderr
    items = [json.loads(line) for line in ran.stdout.splitlines()]  # every line is one JSON object
    kinds = {item.get("kind") for item in items}
    assert {"step", "notice"} <= kinds
    assert any(item.get("kind") == "notice" and item["text"].startswith("= run ") for item in items)


def test_budget_stops_cleanly_and_keeps_the_run(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    scripted_api.handler = lambda request: text(BRIEF.prompt_block())  # every session gets a reply; the budget decides
    ran = subprocess.run([sys.executable, "-m", "flower", "go", "--budget", "0.001", REQUEST], cwd=workspace,
                         env=scripted_api.cli_env(tmp_path / "home"), capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=180)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "past the budget of $0.00; the run is kept" in ran.stderr and "--budget MORE" in ran.stderr
    assert "= step work" not in ran.stdout  # stopped after the first step's cost passed the budget
    listed = subprocess.run([sys.executable, "-m", "flower", "runs", "-r", str(workspace / "runs")],
                            capture_output=True, text=True, timeout=120, env=scripted_api.cli_env(tmp_path / "home"))
    assert "interrupted" in listed.stdout and "finished" not in listed.stdout, listed.stdout + listed.stderr
