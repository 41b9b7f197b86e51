"""`flower logs` on a real run: the demo's two steps through the real CLI (issue #18)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from flower.cli import cli
from flower.cli.demo import run_demo

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    run = anyio.run(run_demo, tmp_path_factory.mktemp("logs") / "demo")
    assert all(step.ok for step in run.steps)
    yield run


def invoke(*args: str, width: int = 80) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": str(width)}, catch_exceptions=False)


def test_logs_reads_the_run_as_a_conversation(demo: Any) -> None:
    runs = str(demo.runtime.run_dir)
    out = invoke("logs", runs).stdout
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "you: The calc tests fail. Find out why and fix it." in out  # the prompt, not the workbench listing
    assert "Workbench contents" not in out
    assert "> tester: tester the calc package" in out and "> fixer: fixer the calc package" in out
    assert "brief: TESTER-TASK: run the suite" in out and "[Workbench" not in out  # relay line dropped
    assert "< tester: Conclusion: calc.mean divides by len(xs) - 1." in out
    assert sum("-> denied: The coordinator" in line for line in lines) == 2
    (spilled,) = [line for line in lines if "spilled" in line]
    assert "* Bash" in spilled and "chars to /" in spilled
    assert "# context nearly full" in out and "# a new generation continues from the handoff" in out
    assert lines[-1].split(" ", 1)[1].startswith("answer: Verified: calc.mean now divides by len(xs)")
    sessions = [line for line in lines if line.startswith("== session")]
    assert len(sessions) == 2 and "generation 2" in sessions[1]


def test_logs_json_full_last_and_a_session_prefix(demo: Any) -> None:
    runs = str(demo.runtime.run_dir)
    items = json.loads(invoke("logs", runs, "--json").stdout)
    kinds = [i["kind"] for i in items]
    assert kinds.count("session") == 2 and kinds.count("dispatch") == 2 and kinds.count("reply") == 2
    assert kinds[-1] == "final" and kinds.count("prompt") == 2
    spills = [i for i in items if i["kind"] == "tool" and "spill" in i["detail"]]
    assert len(spills) == 1 and spills[0]["who"] == "tester" and spills[0]["depth"] == 1
    assert Path(spills[0]["detail"]["spill"]["path"]).is_file()
    denied = [i for i in items if "denied" in i.get("detail", {})]
    assert [i["tool"] for i in denied] == ["Bash", "Write"]

    full = invoke("logs", runs, "--full").stdout
    assert "## Dead ends" in full and "## Dead ends" not in invoke("logs", runs).stdout
    assert "--full shows them" not in full
    tail = invoke("logs", runs, "-n", "2").stdout.splitlines()
    assert tail[0].startswith("... ") and tail[1].startswith("== session") and len(tail) == 4

    session = demo.steps[1].session_id
    by_prefix = invoke("logs", session[:8], "-r", runs, "--json")
    assert by_prefix.exit_code == 0
    assert json.loads(by_prefix.stdout)[0]["detail"]["session_id"] == session


def test_sessions_show_gives_the_users_prompt(demo: Any) -> None:
    runs = str(demo.runtime.run_dir)
    session = demo.steps[0].session_id
    info = json.loads(invoke("sessions", "show", session[:8], "-r", runs, "--json").stdout)
    assert info["session_id"] == session
    assert info["first_prompt"] == "The calc tests fail. Find out why and fix it."
