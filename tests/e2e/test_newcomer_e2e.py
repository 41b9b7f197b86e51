"""What a newcomer hit (issue #18): Ctrl-C names the session and the resume command; a failed step prints its
error once; a new run dir ignores itself in git."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from flower.cli import cli
from flower.testing import ScriptedAPI, api_error, text, tool_use

pytestmark = pytest.mark.e2e


def test_ctrl_c_prints_the_session_and_how_to_resume(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.handler = lambda request: (
        tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(60)"'}) if request.index == 0
        else text("stopped"))
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, **scripted_api.cli_env(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "flower", "once", "wait a minute", "-t", "Bash", "-w", str(ws), "-r",
         str(tmp_path / "runs")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not scripted_api.requests and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # the tool is running now
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    session = scripted_api.requests[0].headers.get("x-claude-code-session-id")
    assert f"interrupted: session {session} is stored; resume it with" in err
    assert f"flower once 'continue' -t Bash -w {ws} -r {tmp_path / 'runs'} --resume {session[:8]}" in err
    assert "Aborted!" not in err and "Traceback" not in err
    assert (tmp_path / "runs" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_a_failed_step_prints_its_error_once(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.handler = lambda request: api_error(400, "FAKE-BAD-REQUEST: malformed")
    env = scripted_api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="0")
    result = CliRunner().invoke(cli, ["once", "hi", "-w", str(tmp_path), "-r", str(tmp_path / "runs")], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert (result.stdout + result.stderr).count("FAKE-BAD-REQUEST") == 1, result.output
    assert "x failed once" in result.stdout


def test_the_demo_says_why_it_matters_with_one_turn_count(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "demo")], env={"COLUMNS": "80"},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "…" not in out and all(len(line) <= 80 for line in out.splitlines())
    import re

    why = re.search(r"holds ([\d,]+) tokens;\s+the\s+same work in one\s+thread without flower would\s+hold "
                    r"~([\d,]+)", out.replace("\n", " ").replace("  ", " "))
    assert why, out
    flower_tokens, baseline = (int(g.replace(",", "")) for g in why.groups())
    assert baseline > flower_tokens > 0
    total = re.search(r"total: (\d+) turns on the main thread", out.replace("\n", " "))
    report_turns = re.search(r"main\s+(\d+)\s", out.split("Threads")[1])
    assert total and report_turns and total.group(1) == report_turns.group(1)  # one turn count


def test_config_file_settings_reach_the_runtime(
    scripted_api: ScriptedAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flower.toml's spill_threshold and trim are what the run used (the manifest records them); its run_dir
    is not, since a file inside the workspace may not choose where data goes (issue #30)."""
    import json

    scripted_api.script([text("ok")])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flower.toml").write_text('run_dir = "from-config"\nspill_threshold = 1234\ntrim = true\n')
    result = CliRunner().invoke(cli, ["once", "hi", "-w", str(tmp_path)], env=scripted_api.cli_env(tmp_path / "home"),
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "from-config").exists() and "ignored: run_dir from" in result.stderr
    row = json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"][-1]
    assert row["policies"]["spill_threshold"] == 1234 and row["policies"]["trim"] is not None


def test_budget_stops_the_run_cleanly(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """`--budget USD`: past it the query stops; one line says why, no traceback, no further requests."""
    from flower.testing import Usage

    scripted_api.handler = lambda request: tool_use("Bash", {"command": "echo more"}, usage=Usage(input_tokens=100_000))
    result = CliRunner().invoke(cli, ["once", "go", "-t", "Bash", "-w", str(tmp_path), "-r", str(tmp_path / "runs"),
                                      "--budget", "0.3"], env=scripted_api.cli_env(tmp_path / "home"),
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert (result.stdout + result.stderr).count("Reached maximum budget ($0.3)") == 1, result.output
    assert "Traceback" not in result.output and len(scripted_api.requests) <= 2
