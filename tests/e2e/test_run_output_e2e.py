"""`flower run` output a person and a script can use, and the model fallback (issue #28 items 3 and 5), through
the real Claude Code CLI and SDK against the scripted API:

- a long, many-line final answer is printed whole in a pipe (no 6-line cut);
- `--json` is one JSON object on stdout holding the whole final text, cost, tokens and session ids;
- `-c/--continue` resumes the spec's last session here: the fake sees the earlier conversation;
- with `--fallback-model`, a primary model that answers 529 overloaded leaves the CLI on the fallback, the
  step completes there, and the switch shows in the live view, the step's result and `flower report`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flower.cli import cli
from flower.flow import engine
from flower.testing import Request, ScriptedAPI, Step, api_error, text

pytestmark = [pytest.mark.e2e]

PRIMARY, FALLBACK = "claude-opus-4-5", "claude-sonnet-4-5"
TARGETS = """\
from flower import AgentSpec, Step, Workflow

lead = AgentSpec(name="lead", instructions="You answer.", allowed_tools=["Read"])
pinned = AgentSpec(name="pinned", instructions="You answer.", allowed_tools=["Read"], model="%s")
flow = Workflow([Step("draft", pinned, "write the draft")], name="flow")
""" % PRIMARY
LONG = "\n".join(f"line {n}: the whole answer, \"quoted\", ünïcode ✓ and a backslash \\" for n in range(300))


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    yield
    if engine.current() is not None:
        engine.destroy()


def flower(env: dict[str, str], tmp_path: Path, *args: str) -> Result:
    (tmp_path / "targets.py").write_text(TARGETS)
    (tmp_path / "ws").mkdir(exist_ok=True)
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def run(env: dict[str, str], tmp_path: Path, target: str, *flags: str) -> Result:
    return flower(env, tmp_path, "run", f"{tmp_path / 'targets.py'}:{target}", "-w", str(tmp_path / "ws"),
                  "-r", str(tmp_path / "runs"), *flags)


def test_a_long_final_answer_is_printed_whole_in_a_pipe(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([text(LONG)])
    result = run(scripted_api.cli_env(tmp_path / "home"), tmp_path, "lead", "-p", "answer at length")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index(LONG.splitlines()[0])
    assert lines[start:start + 300] == LONG.splitlines()  # every line, in order, neither cut nor indented
    assert "more lines" not in result.stdout
    assert any(line.startswith("+ done lead") for line in lines[start + 300:])


def test_json_is_one_object_with_the_whole_text(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([text(LONG)])
    result = run(scripted_api.cli_env(tmp_path / "home"), tmp_path, "lead", "--json", "-p", "answer at length")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # the whole of stdout is one object
    assert data["text"] == LONG and data["state"] == "finished" and data["ok"] and data["error"] is None
    assert data["run_id"] and data["cost_usd"] > 0 and data["run_dir"] == str(tmp_path / "runs")
    assert data["usage"]["input_tokens"] > 0 and data["usage"]["output_tokens"] > 0
    [step] = data["steps"]
    assert step["step"] == "lead" and step["text"] == LONG and data["session_ids"] == [step["session_id"]]
    assert scripted_api.requests[0].headers.get("x-claude-code-session-id") == step["session_id"]


def test_json_and_events_together_are_refused_in_one_line(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    result = run(scripted_api.cli_env(tmp_path / "home"), tmp_path, "lead", "--json", "--events", "-p", "x")
    assert result.exit_code == 1 and "choose one" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert scripted_api.requests == []


def test_continue_resumes_the_last_session_here(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([text("FIRST-ANSWER about the parser"), text("SECOND-ANSWER builds on it")])
    env = scripted_api.cli_env(tmp_path / "home")
    first = run(env, tmp_path, "lead", "--json", "-p", "FIRST-QUESTION: the parser?")
    assert first.exit_code == 0, first.output
    again = run(env, tmp_path, "lead", "-c", "--json", "-p", "SECOND-QUESTION: and then?")
    assert again.exit_code == 0, again.output
    second = scripted_api.main_requests[-1]
    history = json.dumps(second.body["messages"])
    assert "FIRST-QUESTION" in history and "FIRST-ANSWER about the parser" in history
    assert "SECOND-QUESTION" in second.last_user_text()
    assert json.loads(again.stdout)["session_ids"] == json.loads(first.stdout)["session_ids"]
    assert json.loads(again.stdout)["text"] == "SECOND-ANSWER builds on it"


def test_continue_with_no_session_here_is_one_line(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    env = scripted_api.cli_env(tmp_path / "home")
    result = run(env, tmp_path, "lead", "-c", "-p", "go on")
    assert result.exit_code == 1 and "no session of 'lead'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    workflow = run(env, tmp_path, "flow", "-c")
    assert workflow.exit_code == 1 and "continues an AgentSpec's last session" in workflow.stderr
    assert scripted_api.requests == []


def overloaded_primary(request: Request) -> Step | None:
    """The primary model is overloaded on every request; the fallback's requests follow the script."""
    return api_error(529) if request.body.get("model") == PRIMARY else None


def test_the_step_completes_on_the_fallback_model(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """529 three times in a row on the primary model: the CLI switches to --fallback-model, the step completes
    there, the live view says so on one line, the result records it, and `flower report` shows it."""
    scripted_api.handler = overloaded_primary
    scripted_api.script([text("answered on the fallback")])
    env = scripted_api.cli_env(tmp_path / "home")
    result = run(env, tmp_path, "lead", "--model", PRIMARY, "--fallback-model", FALLBACK, "-p", "answer")
    assert result.exit_code == 0, result.output
    assert [r.body["model"] for r in scripted_api.requests] == [PRIMARY] * 3 + [FALLBACK]
    assert (f"! model {PRIMARY} failed (overloaded): this turn runs on the fallback {FALLBACK}"
            in result.stdout.splitlines())
    assert "answered on the fallback" in result.stdout.splitlines() and "+ done lead" in result.stdout
    assert "not the spec's" not in result.stdout  # the fallback is not reported as a model mismatch too
    [row] = json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]
    assert row["fallbacks"] == [{"model": PRIMARY, "fallback_model": FALLBACK, "trigger": "overloaded"}]
    report = flower(env, tmp_path, "report", str(tmp_path / "runs"))
    assert report.exit_code == 0, report.output
    assert f"fallback: {PRIMARY} -> {FALLBACK} (overloaded)" in report.stdout
    data = json.loads(flower(env, tmp_path, "report", str(tmp_path / "runs"), "--json").stdout)
    assert [(f["model"], f["fallback_model"]) for f in data["fallbacks"]] == [(PRIMARY, FALLBACK)]
    by_model = flower(env, tmp_path, "report", str(tmp_path / "runs"), "--by", "model").stdout
    assert FALLBACK in by_model


def test_a_workflow_step_falls_back_by_the_setting(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """FLOWER_FALLBACK_MODEL is the run's setting: a workflow step whose spec names none falls back to it."""
    scripted_api.handler = overloaded_primary
    scripted_api.script([text("drafted on the fallback")])
    env = {**scripted_api.cli_env(tmp_path / "home"), "FLOWER_FALLBACK_MODEL": FALLBACK}
    result = run(env, tmp_path, "flow", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["text"] == "drafted on the fallback" and data["steps"][0]["fallbacks"][0]["fallback_model"] == FALLBACK
    assert [r.body["model"] for r in scripted_api.requests] == [PRIMARY] * 3 + [FALLBACK]
