"""`flower run TARGET --model M --events --budget B --otlp URL -p P` on an AgentSpec and on a Workflow, through
the real CLI and SDK against the scripted API (issue #25): the model reaches the API request, the budget
reaches the Claude Code CLI (it stops the query past it), the spans reach an OTLP/HTTP receiver on 127.0.0.1,
and the JSON lines carry the complete final text (`--events`; `--json` is one object, test_run_output_e2e)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from flower.cli import cli
from flower.flow import engine
from flower.testing import ScriptedAPI, Usage, text, tool_use
from tests.support.otlp import OtlpReceiver

pytestmark = [pytest.mark.e2e]

MODEL = "claude-sonnet-4-5"
PINNED = "claude-haiku-4-5"
TARGETS = """\
from flower import AgentSpec, Step, Workflow

lead = AgentSpec(name="lead", instructions="You answer.", allowed_tools=["Read"])
pinned = AgentSpec(name="pinned", instructions="You check.", allowed_tools=["Read"], model="%s")
flow = Workflow([Step("draft", lead, "write the draft"), Step("check", pinned, "check it")], name="flow")
""" % PINNED
# Longer than any cut a terminal view makes, on many lines, with characters JSON escapes.
LONG = "".join(f"line {n}: the whole answer, \"quoted\", tabbed\t, ünïcode ✓ and a backslash \\\n" for n in range(600))


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    found = OtlpReceiver()
    yield found
    found.stop()


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    yield
    if engine.current() is not None:
        engine.destroy()


def flower_run(env: dict[str, str], tmp_path: Path, target: str, *flags: str) -> Result:
    (tmp_path / "targets.py").write_text(TARGETS)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    args = ["run", f"{tmp_path / 'targets.py'}:{target}", "-w", str(ws), "-r", str(tmp_path / "runs"), *flags]
    return CliRunner().invoke(cli, args, env=env, catch_exceptions=False)


def json_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]  # stdout holds JSON lines only


def test_an_agent_spec_with_every_flag(scripted_api: ScriptedAPI, tmp_path: Path, receiver: OtlpReceiver) -> None:
    scripted_api.script([text(LONG)])
    env = scripted_api.cli_env(tmp_path / "home")
    result = flower_run(env, tmp_path, "lead", "--model", MODEL, "--events", "--budget", "5", "--otlp", receiver.url,
                        "-p", "answer at length")
    assert result.exit_code == 0, result.output
    lines = json_lines(result)
    assert [r.body["model"] for r in scripted_api.requests] == [MODEL]
    assert [e["text"] for e in lines if e["kind"] == "result"] == [LONG]
    summary = [e for e in lines if e["kind"] == "summary"]
    assert len(summary) == 1 and summary[0]["text"] == LONG and summary[0]["ok"] and summary[0]["step"] == "lead"
    assert lines[-1]["kind"] == "run" and lines[-1]["state"] == "finished" and lines[-1]["steps"] == 1
    assert {"run lead", "invoke_agent lead", f"chat {MODEL}"} <= set(receiver.names), receiver.names


def test_a_workflow_with_every_flag(scripted_api: ScriptedAPI, tmp_path: Path, receiver: OtlpReceiver) -> None:
    """On a Workflow, --model is the model of each step whose spec names none; the pinned step keeps its own."""
    scripted_api.script([text(LONG), text("checked: " + LONG)])
    env = scripted_api.cli_env(tmp_path / "home")
    result = flower_run(env, tmp_path, "flow", "--model", MODEL, "--events", "--budget", "5", "--otlp", receiver.url,
                        "-p", "unused by a workflow")
    assert result.exit_code == 0, result.output
    lines = json_lines(result)
    assert [r.body["model"] for r in scripted_api.requests] == [MODEL, PINNED]
    summaries = [(e["step"], e["text"]) for e in lines if e["kind"] == "summary"]
    assert summaries == [("draft", LONG), ("check", "checked: " + LONG)]
    assert [e["text"] for e in lines if e["kind"] == "result"] == [LONG, "checked: " + LONG]
    assert lines[-1]["kind"] == "run" and (lines[-1]["state"], lines[-1]["steps"], lines[-1]["total"]) == (
        "finished", 2, 2)
    assert {"run flow", "invoke_agent lead", "invoke_agent pinned", f"chat {MODEL}", f"chat {PINNED}"} <= set(
        receiver.names), receiver.names


@pytest.mark.parametrize("target", ["lead", "flow"])
def test_the_budget_reaches_the_claude_code_cli(scripted_api: ScriptedAPI, tmp_path: Path, receiver: OtlpReceiver,
                                                target: str) -> None:
    """Each reply costs $0.60 at the model's price: the CLI stops the query past --budget, for both targets,
    and the spans of the failed run are still exported."""
    scripted_api.handler = lambda request: tool_use("Read", {"file_path": "x"}, usage=Usage(input_tokens=200_000))
    env = scripted_api.cli_env(tmp_path / "home")
    result = flower_run(env, tmp_path, target, "--model", MODEL, "--events", "--budget", "0.25", "--otlp",
                        receiver.url, "-p", "read forever")
    assert result.exit_code == 1, result.output
    assert "Reached maximum budget ($0.25)" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert len(scripted_api.requests) <= 2 and {r.body["model"] for r in scripted_api.requests} == {MODEL}
    first = next(e for e in json_lines(result) if e["kind"] == "summary")
    assert first["step"] in ("lead", "draft") and not first["ok"] and "Reached maximum budget" in first["error"]
    assert "invoke_agent lead" in receiver.names
