"""What the bundled CLI refuses, and a step that must not look clean when it did (issue #17 items 14, 16)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from flower import texts
from flower.agent.roles import coordinator, worker
from flower.cli import cli
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.e2e]

REFUSAL = "Subagents should return findings as text, not write report files"
SPEC = """\
from flower import coordinator, worker

spec = coordinator("lead", "Goal: a parser.", {"w": worker("works", "You work.", tools=["Read", "Bash"])})
"""


def dispatch(kind: str, marker: str) -> object:
    return tool_use("Agent", {"description": "d", "prompt": f"{marker}: go", "subagent_type": kind,
                              "run_in_background": False})


@pytest.mark.anyio
async def test_subagent_report_files_are_refused_and_a_topic_name_is_the_way_through(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 16: the CLI refuses a subagent's Write of REPORT*/SUMMARY*/FINDINGS*/ANALYSIS*.md anywhere,
    the workbench artifacts folder included (case-insensitive); a topic name passes, and the worker rules
    say so."""
    artifacts = workspace / ".flower" / "artifacts"
    refused = [artifacts / n for n in ("REPORT.md", "summary.md", "Findings-1.md", "ANALYSIS_final.md")]
    allowed = artifacts / "parser-findings.md"
    steps = [tool_use("Write", {"file_path": str(p), "content": "x"}) for p in [*refused, allowed]]
    scripted_api.script([dispatch("w", "SUBX"), text("done")], {"SUBX": [*steps, text("wrote")]})
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    spec = coordinator("lead", "goal", {"w": worker("writes", "You write.", tools=["Write", "Read"])})
    result = await rt.run(spec, "go")
    sub = scripted_api.subagent_requests()
    assert [REFUSAL in r.result_text() for r in sub[1:]] == [True] * 4 + [False]
    assert not any(p.exists() for p in refused) and allowed.read_text() == "x"
    assert "name them by topic" in sub[0].system_text and "name them by topic" in texts.WORKER_RULES
    assert result.ok and result.tool_errors == 4  # item 14: counted even when the step ends ok


def test_a_refused_dispatch_is_not_a_clean_done(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    """Item 14: a worker the CLI refuses to spawn used to end "+ done" with nothing said; the summary, the
    manifest and the report now show the tool errors."""
    (tmp_path / "spec.py").write_text(SPEC)
    scripted_api.script([dispatch("nobody", "SUBX"), text("all done")])
    env = scripted_api.cli_env(tmp_path / "home")
    runs = tmp_path / "runs"
    ran = CliRunner().invoke(cli, ["run", f"{tmp_path / 'spec.py'}:spec", "-w", str(workspace), "-r", str(runs)],
                             env=env, input="build it\n", catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    lines = ran.stdout.splitlines()
    assert any(line.startswith("! done with 1 tool errors lead") for line in lines), ran.stdout
    assert any(line.startswith("  tool error: Agent: ") for line in lines)
    (row,) = json.loads((runs / "manifest.json").read_text())["steps"]
    assert row["tool_errors"] == 1 and row["tool_error_samples"][0].startswith("Agent: ")
    report = CliRunner().invoke(cli, ["report", str(runs)], env=env, catch_exceptions=False)
    assert any("tool errors: main / subagents" in line and "1 / 0" in line for line in report.stdout.splitlines())


@pytest.mark.anyio
async def test_a_scripted_call_of_a_missing_tool_fails_the_test_naming_the_step(tmp_path: Path, workspace: Path) -> None:
    """Item 15, through the real CLI: the session has no `Reed`; the CLI would answer "No such tool" and the
    run would go on. The fake answers 400 and `assert_done` names the step, once."""
    from flower.agent.spec import AgentSpec
    from flower.errors import ScriptError

    api = ScriptedAPI([tool_use("Reed", {"file_path": "x"}), text("never reached")]).start()
    try:
        rt = Runtime(workspace, run_dir=tmp_path / "runs", env=api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="0"),
                     resilience=False)
        result = await rt.run(AgentSpec(name="solo", instructions="x"), "go")
    finally:
        api.stop()
    assert not result.ok
    with pytest.raises(ScriptError, match=r"step 1 of thread main: tool_use 'Reed' names a tool this session does not have"):
        api.assert_done()
    assert len([f for f in api.failures if "'Reed'" in f]) == 1


def test_flower_run_stops_a_401_at_once_naming_the_endpoint(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Item 10 through `flower run`: one retry line with n/N, the wait and the endpoint, then one error line
    naming the endpoint; not minutes of `retry: authentication_failed`."""
    from flower.testing import api_error

    (tmp_path / "spec.py").write_text(
        'from flower.agent.spec import AgentSpec\nspec = AgentSpec(name="solo", instructions="x")\n')
    scripted_api.handler = lambda request: api_error(401, "invalid x-api-key")
    env = scripted_api.cli_env(tmp_path / "home")
    ran = CliRunner().invoke(cli, ["run", f"{tmp_path / 'spec.py'}:spec", "-w", str(workspace), "-r",
                                   str(tmp_path / "runs")], env=env, input="go\n")
    assert ran.exit_code == 1
    retries = [line for line in ran.output.splitlines() if line.startswith("~ retry")]
    assert 1 <= len(retries) <= 2 and re.fullmatch(
        rf"~ retry 1/10 \(401\) in \d+\.\ds to {re.escape(scripted_api.base_url)}: authentication_failed", retries[0])
    assert f"failed at step solo: API Error: 401 authentication_failed: {scripted_api.base_url} refused" in ran.output
    assert "ede_diagnostic" not in ran.output  # the CLI's diagnostic of an attempt the runtime stopped
    assert "x error: \n" not in ran.output
