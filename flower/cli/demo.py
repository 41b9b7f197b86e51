"""`flower demo`: a full coordinator run on the scripted model, offline and deterministic.

It generates a small repository with a planted bug, starts `flower.testing.ScriptedAPI`, and runs two
steps through the real Claude Code CLI:

1. survey-and-fix — the coordinator glances at the repo (git status, ls), tries to run the tests itself
   (denied: it must delegate), dispatches a tester (its 20,000-character test log is spilled to disk; it
   writes a check script into the workbench and runs it), tries to write a note itself (denied again),
   dispatches a fixer (which edits the bug and re-runs the tester's script), and glances at the diff;
2. verify — resumes that session through the rewriting store (stale glance results expire, the older
   denial is pruned), glances again, reports that its context is near the window, writes a handoff, and a
   second generation finishes the job.

The model is scripted; everything else (CLI, hooks, tools, store, files) is real. The usage the scripted
model reports is derived from each request's size, except for one reply that reports a near-full window
so that the handoff happens in seconds instead of hours.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.agent.events import Event
from flower.agent.roles import coordinator, worker
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.runtime import Runtime, StepResult
from flower.stores.rewrite import EphemeralPolicy
from flower.testing import ScriptedAPI, Usage, text, tool_use

__all__ = ["DemoRun", "make_repo", "run_demo"]

WINDOW = HandoffPolicy(window=200_000)

OPS = '''"""Small numeric helpers."""


def mean(xs):
    return sum(xs) / (len(xs) - 1)


def spread(xs):
    return max(xs) - min(xs)
'''

RUN_TESTS = '''"""Runs every check with a verbose log, the way real suites do."""
import sys

sys.path.insert(0, ".")
from calc.ops import mean, spread

failures = 0
for i in range(1, 401):
    print(f"check {i:03d}: spread(range({i})) == {i - 1} ... ok")
for xs in ([2, 4], [1, 2, 3], [10]):
    try:
        got = mean(xs)
        ok = abs(got - sum(xs) / len(xs)) < 1e-9
    except ZeroDivisionError:
        got, ok = "ZeroDivisionError", False
    failures += not ok
    print(f"check mean({xs}) -> {got} ... {'ok' if ok else 'FAIL'}")
print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
'''

CHECK_MEAN = '''# desc: checks calc.mean against sum/len on three inputs
import sys
sys.path.insert(0, ".")
from calc.ops import mean
bad = [xs for xs in ([2, 4], [1, 2, 3], [10]) if mean(xs) != sum(xs) / len(xs)]
print("mean OK" if not bad else f"mean WRONG for {bad}")
'''

FILES = {
    "README.md": "# calc\nTiny numeric helpers. Run `python3 run_tests.py`.\n",
    "calc/__init__.py": '"""calc: small numeric helpers."""\n',
    "calc/ops.py": OPS,
    "run_tests.py": RUN_TESTS,
    "docs/usage.md": "Use `calc.ops.mean(xs)` for the arithmetic mean.\n",
    "data/sample.csv": "x\n" + "\n".join(str(i) for i in range(50)) + "\n",
}

HANDOFF = """## Doing
Fixing calc.mean in the demo repository; the fix is in and verified.
## Decided
Divide by len(xs), not len(xs) - 1: the docs promise the arithmetic mean (DECISION-MEAN).
## Dead ends
None.
## Next
1. Glance at the final diff. 2. Report.
## Scene
calc/ops.py; workbench scripts/check_mean.py re-runs the check."""


def make_repo(root: Path) -> Path:
    """A small git repository with a planted bug in calc.mean."""
    root.mkdir(parents=True, exist_ok=True)
    for name, body in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    git = ["git", "-c", "user.name=flower demo", "-c", "user.email=demo@flower.invalid"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "calc: first version"], cwd=root, check=True)
    return root


def _agent(kind: str, marker: str, goal: str) -> Any:
    return tool_use("Agent", {"description": f"{kind} the calc package", "subagent_type": kind,
                              "prompt": f"{marker}: {goal}", "run_in_background": False})


def _script(repo: Path, wb: Path) -> tuple[list[Any], dict[str, list[Any]]]:
    check = wb / "scripts" / "check_mean.py"
    main = [
        tool_use("Bash", {"command": "git status --short && ls -la && ls -la calc", "description": "glance at the repo"}),
        tool_use("Bash", {"command": "python3 run_tests.py", "description": "run the tests"}),
        _agent("tester", "TESTER-TASK", "run the suite and find why it fails. Done when the cause is named."),
        tool_use("Write", {"file_path": str(wb / "notes" / "cause.md"), "content": "mean divides by n-1"}),
        _agent("fixer", "FIXER-TASK", "make calc.mean divide by len(xs). Done when scripts/check_mean.py says OK."),
        tool_use("Bash", {"command": "git diff --stat", "description": "glance at the diff"}),
        text("calc.mean fixed and verified by the workbench check; see the fixer's report."),
        # step 2: resumed through the rewriting store
        tool_use("Bash", {"command": "git log --oneline -3 && git status --short", "description": "glance"},
                 usage=Usage(input_tokens=WINDOW.threshold() + 2_000)),
        text(HANDOFF),
        tool_use("Bash", {"command": "git diff --stat", "description": "final glance"}),
        text("Verified: calc.mean now divides by len(xs); the check script passes. Done."),
    ]
    tester = [
        tool_use("Bash", {"command": f"python3 run_tests.py 2>&1 | tee {wb / 'artifacts' / 'test-log.txt'}",
                          "description": "run the suite, keep its log"}),
        tool_use("Write", {"file_path": str(check), "content": CHECK_MEAN}),
        tool_use("Bash", {"command": f"python3 {check}", "description": "run the check"}),
        text(f"Conclusion: calc.mean divides by len(xs) - 1.\nEvidence: calc/ops.py:5; {check} prints WRONG.\n"
             "Output: scripts/check_mean.py, artifacts/test-log.txt\nUnverified: none."),
    ]
    fixer = [
        tool_use("Edit", {"file_path": str(repo / "calc" / "ops.py"), "old_string": "(len(xs) - 1)",
                          "new_string": "len(xs)"}),
        tool_use("Bash", {"command": f"python3 {check}", "description": "re-run the check"}),
        text("Conclusion: fixed calc/ops.py:5.\nEvidence: scripts/check_mean.py prints mean OK.\n"
             "Output: calc/ops.py\nUnverified: none."),
    ]
    return main, {"TESTER-TASK": tester, "FIXER-TASK": fixer}


@dataclass
class DemoRun:
    """What the demo produced, for the report and for tests."""

    root: Path
    repo: Path
    runtime: Runtime
    api: ScriptedAPI
    steps: list[StepResult]
    events: list[Event]


def _spec() -> Any:
    tester = worker("Runs test suites and diagnoses failures.", "You run tests and find causes.",
                    tools=["Bash", "Read", "Write", "Grep"])
    fixer = worker("Fixes code.", "You make minimal fixes.", tools=["Read", "Edit", "Bash"])
    return coordinator("lead", "Goal: the calc test suite passes.", {"tester": tester, "fixer": fixer})


async def run_demo(root: Path | None = None, on_event: Callable[[Event], Any] | None = None) -> DemoRun:
    """Run the whole demo under `root` (a fresh temporary directory by default)."""
    root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="flower-demo-"))
    repo = make_repo(root / "repo")
    events: list[Event] = []

    def record(event: Event) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    main, subagents = _script(repo, repo / ".flower")
    api = ScriptedAPI(main, subagents).start()
    try:
        runtime = Runtime(repo, run_dir=root / "runs", env=api.cli_env(root / "home"), handoff=WINDOW,
                          ephemeral=EphemeralPolicy(keep_recent=1), run_id="demo")
        spec = _spec()
        first = await runtime.run(spec, "The calc tests fail. Find out why and fix it.", step_name="survey-and-fix",
                                  on_event=record)
        second = await runtime.run(spec, "Verify the fix and report.", step_name="verify",
                                   resume=first.session_id, on_event=record)
    finally:
        api.stop()
    api.assert_done()
    return DemoRun(root, repo, runtime, api, [first, second], events)
