"""The economy bench's fixed task as two scripts for the scripted model: plain SDK and flower.

The task (on the repository of `bench/_repo.py`): survey it, run its test script, fix the planted bugs,
run the script again, report. Both scripts make the same tool calls with the same inputs; they differ
only where flower's mechanism forces it:

* plain — the main thread makes every call itself;
* flower — the coordinator glances (`git status --short && ls`, then `git diff --stat`), and four
  workers make the calls: a surveyor (the same find and Reads, plus a module map written to artifacts/),
  a tester and a verifier (the test runs, piped through `tee` into artifacts/ and then summarised with
  `tail`: a failing command ends in PostToolUseFailure, which the spill guard does not see, and the worker
  rules send long outputs to artifacts/), and a fixer (Reads and Edits). Tiny: three workers, the fixer
  re-runs the tests itself.

Briefs and hand-backs are written the way the worker and coordinator rules ask (goal and acceptance in
the brief; conclusion, evidence, outputs, unverified in the reply); their lengths are the model's part of
the per-dispatch cost the bench reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench._repo import FIXES, SURVEY_READS
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.testing import text, tool_use

__all__ = ["PROMPT", "flower_script", "flower_spec", "plain_script"]

PROMPT = ("Survey this repository, run its test script (python3 run_tests.py), fix what fails, run the "
          "script again, and report what was wrong and what you changed.")
REPORT = {
    False: ("Done. Two bugs fixed, suite green.\n"
            "1. ledger/money.py allocate: rounded shares did not add up to the total; the rounding drift now "
            "goes to the last share.\n"
            "2. ledger/dates.py is_leap: missed the 400-year rule (2000 was a leap year).\n"
            "The test script passes on the second run."),
    True: ("Done. ledger/money.py allocate: rounded shares did not add up to the total; the drift now goes "
           "to the last share. The test script passes on the second run."),
}
FIND = {"command": "find . -type f -not -path './.git/*' | sort", "description": "List the files"}
TEST = {"command": "python3 run_tests.py", "description": "Run the test script"}
Steps = list[Any]


def _parallel(calls: list[tuple[str, dict[str, Any]]]) -> Any:
    """One assistant message making `calls` in parallel."""
    return tool_use(calls[0][0], calls[0][1], *calls[1:])


def _reads(repo: Path) -> Steps:
    """The survey's Reads, three per assistant message."""
    files = [repo / name for name in SURVEY_READS if (repo / name).exists()]
    groups = [files[i:i + 3] for i in range(0, len(files), 3)]
    return [_parallel([("Read", {"file_path": str(path)}) for path in group]) for group in groups]


def _fix(repo: Path, tiny: bool) -> Steps:
    """Read the buggy files (the CLI edits only files read first), then edit them."""
    reads = [("Read", {"file_path": str(repo / name)}) for name, _, _ in FIXES[tiny]]
    edits = [("Edit", {"file_path": str(repo / name), "old_string": old, "new_string": new})
             for name, old, new in FIXES[tiny]]
    return [_parallel(reads), _parallel(edits)]


def plain_script(repo: Path, tiny: bool) -> Steps:
    """(a) Everything on the main thread. The survey already read the buggy files, so it edits directly."""
    edit = _fix(repo, tiny)[1]
    return [tool_use("Bash", FIND), *_reads(repo), tool_use("Bash", TEST), edit,
            tool_use("Bash", {**TEST, "description": "Run the test script again"}), text(REPORT[tiny])]


def _agent(kind: str, marker: str, brief: str) -> Any:
    return tool_use("Agent", {"description": f"{kind} the ledger repo", "subagent_type": kind,
                              "prompt": f"{marker}: {brief}", "run_in_background": False})


def _survey_doc(repo: Path) -> str:
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")
                   if p.is_file() and ".git" not in p.parts and ".flower" not in p.parts)
    lines = ["# Survey of the ledger repository", "", f"{len(files)} files; runner: run_tests.py.", ""]
    lines += [f"- {name}: {'module' if name.startswith('ledger/') else 'support file'}" for name in files]
    return "\n".join(lines) + "\n"


def _reply(conclusion: str, evidence: str, output: str, unverified: str = "none.") -> Any:
    return text(f"Conclusion: {conclusion}\nEvidence: {evidence}\nOutput: {output}\nUnverified: {unverified}")


def _test_run(log: Path, lines: int, what: str) -> Steps:
    return [tool_use("Bash", {"command": f"python3 run_tests.py 2>&1 | tee {log}", "description": what}),
            tool_use("Bash", {"command": f"tail -n {lines} {log}", "description": "Read the summary"})]


def _workers(repo: Path, artifacts: Path, summary: str, tiny: bool) -> dict[str, Steps]:
    log1, log2 = artifacts / "test-run-1.log", artifacts / "test-run-2.log"
    fixed = ", ".join(name for name, _, _ in FIXES[tiny])
    causes = "allocate in ledger/money.py loses the rounding drift" + (
        "" if tiny else "; is_leap in ledger/dates.py misses the 400-year rule")
    survey = artifacts / "survey.md"
    scripts = {
        "SURVEY-TASK": [tool_use("Bash", FIND), *_reads(repo),
                        tool_use("Write", {"file_path": str(survey), "content": _survey_doc(repo)}),
                        _reply("ledger is bookkeeping in integer cents; run_tests.py runs the checks.",
                               "README.md, docs/overview.md, ledger/money.py, ledger/dates.py.", str(survey),
                               "nothing run yet.")],
        "TEST-TASK": [*_test_run(log1, 16, "Run the test script"),
                      _reply(f"{summary}. {causes}.", f"short test summary in {log1}.", str(log1))],
    }
    if tiny:
        scripts["FIX-TASK"] = [*_fix(repo, tiny), *_test_run(log2, 1, "Run the test script again"),
                               _reply(f"fixed {fixed}; the suite passes.", f"{log2} last line.", fixed)]
    else:
        scripts["FIX-TASK"] = [*_fix(repo, tiny), _reply(
            f"fixed {fixed}.", "allocate gives the drift to the last share; is_leap has the 400-year rule.",
            fixed, "not re-run (the verifier does that).")]
        scripts["VERIFY-TASK"] = [*_test_run(log2, 1, "Run the test script again"),
                                  _reply("the suite passes.", f"{log2} last line.", str(log2))]
    return scripts


def _briefs(tiny: bool) -> Steps:
    fix = ("fix allocate in ledger/money.py (shares must add up to the total)"
           + (" and re-run python3 run_tests.py. Done when it passes." if tiny else
              " and is_leap in ledger/dates.py (400-year rule). Done when both are edited."))
    briefs = [
        _agent("surveyor", "SURVEY-TASK", "map this repository: what each part does and how tests run. Done "
               "when a module map is in the artifacts folder."),
        _agent("tester", "TEST-TASK", "run python3 run_tests.py and name every failing check and its likely "
               "cause. Done when each failure has a file and a cause."),
        _agent("fixer", "FIX-TASK", fix),
    ]
    if not tiny:
        briefs.append(_agent("verifier", "VERIFY-TASK", "re-run python3 run_tests.py. Done when it passes, "
                             "or name what still fails."))
    return briefs


def flower_script(repo: Path, artifacts: Path, summary: str, tiny: bool) -> tuple[Steps, dict[str, Steps]]:
    """(b) The coordinator glances and dispatches; `summary` is the failing run's last line."""
    main = [tool_use("Bash", {"command": "git status --short && ls", "description": "Glance at the repo"}),
            *_briefs(tiny),
            tool_use("Bash", {"command": "git diff --stat", "description": "Glance at the diff"}),
            text(REPORT[tiny])]
    return main, _workers(repo, artifacts, summary, tiny)


def flower_spec() -> AgentSpec:
    hands = ["Bash", "Read", "Write", "Edit"]
    workers = {
        "surveyor": worker("Maps a repository: layout, entry points, how to test.", "You survey code.",
                           tools=hands),
        "tester": worker("Runs test suites and diagnoses failures.", "You run tests and find causes.",
                         tools=hands),
        "fixer": worker("Makes minimal code fixes.", "You fix bugs with minimal edits.", tools=hands),
        "verifier": worker("Re-runs checks and reports pass or fail.", "You verify results.", tools=hands),
    }
    return coordinator("lead", "Goal: the ledger test suite passes.", workers)
