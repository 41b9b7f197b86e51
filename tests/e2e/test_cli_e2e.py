"""`flower run`, `once`, `report` and `preview` end to end: the real CLI through the real SDK against the
scripted API, driven in-process with click's CliRunner (B-10, B-11, B-12, S-19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flower import texts
from flower.cli import cli
from flower.testing import ScriptedAPI, Usage, text, tool_use

pytestmark = pytest.mark.e2e

SPEC = """\
from claude_agent_sdk import AgentDefinition
from flower.agent.spec import AgentSpec

spec = AgentSpec(
    name="e2e", instructions="Look around, then delegate the data.",
    allowed_tools=["Bash", "Agent", "Read"],
    agents={"worker": AgentDefinition(description="makes data", prompt="You make data.", tools=["Bash"])},
)
"""
# Parallel results are stored in completion order, so the glance meant to expire comes alone, first.
GLANCES = [
    ("Bash", {"command": c}) for c in ("ls", "ls -a", "pwd", "wc -l README", "head -1 README", "ls -la")
]


def invoke(env: dict[str, str], *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=input, catch_exceptions=False)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    # long enough that its expiry note is shorter than the listing (a shorter body is left alone)
    (path / "README").write_text("".join(f"line {n}: flower end-to-end fixture text\n" for n in range(40)))
    return path


def test_run_then_report_then_preview_then_resume(
    scripted_api: ScriptedAPI, tmp_path: Path, ws: Path
) -> None:
    """The whole loop on one real session: live view and summary, the report's numbers against what the fake
    API saw, the preview's diff, and the resume actually sending what the preview showed."""
    scripted_api.script(
        [
            tool_use(
                "Bash",
                {"command": "cat README"},
                say="Looking around.",  # one API message, two entries
                usage=Usage(input_tokens=1000, cache_read_input_tokens=4000),
            ),
            tool_use(*GLANCES[0], *GLANCES[1:], usage=Usage(input_tokens=500, cache_read_input_tokens=6000)),
            tool_use(
                "Agent",
                {
                    "description": "make data",
                    "prompt": "SUBTASK-BIG make the data",
                    "subagent_type": "worker",
                    "run_in_background": False,
                },
                usage=Usage(input_tokens=300, cache_read_input_tokens=8000, cache_creation_input_tokens=200),
            ),
            text("all done", usage=Usage(input_tokens=100, cache_read_input_tokens=9000)),
        ],
        subagents={
            "SUBTASK-BIG": [
                tool_use("Bash", {"command": "python3 -c \"print('y' * 6000)\""}),
                text("the data is in the spill file"),
            ]
        },
    )
    (tmp_path / "spec.py").write_text(SPEC)
    env = scripted_api.cli_env(tmp_path / "home")
    runs = tmp_path / "runs"
    ran = invoke(
        env,
        "run",
        f"{tmp_path / 'spec.py'}:spec",
        "-w",
        str(ws),
        "-r",
        str(runs),
        input="look, then make data\n",
    )
    assert ran.exit_code == 0, ran.output
    lines = ran.stdout.splitlines()
    assert lines[0] == "= step e2e" and "* Bash cat README" in lines and "  Looking around." in lines
    assert "> dispatch worker: make data" in lines and "  | worker * Bash python3 -c \"print('y' * 6000)\"" in lines
    assert any(line.startswith("  | ~ spilled 6") and "/.flower/spill/" in line for line in lines)
    assert "+ worker: make data returned" in "\n".join(lines) and "all done" in lines  # the answer: whole, not indented
    summary = lines[-1]
    assert summary.startswith("+ done e2e | $") and "context 9.1K/750K" in summary
    assert f"run dir {runs}" in summary and "\x1b" not in ran.stdout  # not a terminal: plain lines

    report = json.loads(invoke(env, "report", str(runs), "--json").stdout)
    (session,) = report["sessions"]
    assert (
        report["main"]["turns"] == len(scripted_api.main_requests) == 4
    )  # 10 assistant entries, 4 API messages
    assert report["contexts"] == [5000, 6500, 8500, 9100] and report["slope"] == 1430.0
    assert report["main"]["usage"]["input"] == 1900 and report["main"]["usage"]["cache_read"] == 27000
    assert report["main"]["tool_calls"] == {"Bash": 7, "Agent": 1}
    assert report["subagents"]["tool_calls"] == {"Bash": 1}
    assert report["subagents"]["turns"] == len(scripted_api.subagent_requests()) == 2
    assert (
        report["spills"]["count"] == 1
        and report["spills"]["subagents"] == 1
        and report["spills"]["chars"] >= 6000
    )
    assert report["pruned"]["expired"] == 1 and report["workbench_source"] == "manifest"
    assert report["workbench_root"] == str((ws / ".flower").resolve())
    manifest = json.loads((runs / "manifest.json").read_text())
    assert (
        f"| ${manifest['steps'][0]['cost_usd']:.4f} | {manifest['steps'][0]['num_turns']} turns |" in summary
    )
    assert report["cost_usd"] == pytest.approx(manifest["steps"][0]["cost_usd"]) and report["cost_usd"] > 0

    shown = invoke(env, "preview", session, "-r", str(runs))
    assert "== main: 1 expired" in shown.stdout and "+tool_result" in shown.stdout
    assert "-tool_result (toolu_" in shown.stdout and "line 0: flower end-to-end fixture text" in shown.stdout
    assert "expired output of" in shown.stdout
    diff = json.loads(invoke(env, "preview", session, "-r", str(runs), "--json").stdout)["main"]["diff"]
    (added,) = [line for line in diff if line.startswith("+tool_result")]
    assert "[flower: expired output of `cat README`, run 3 rounds ago." in added

    scripted_api.script([text("resumed fine", usage=Usage(input_tokens=50, cache_read_input_tokens=9500))])
    resumed = invoke(
        env,
        "run",
        f"{tmp_path / 'spec.py'}:spec",
        "-w",
        str(ws),
        "-r",
        str(runs),
        "--resume",
        session,
        "--prompt",
        "anything left?",
    )
    assert resumed.exit_code == 0, resumed.output
    sent = scripted_api.main_requests[-1]
    assert "expired output of `cat README`" in sent.text  # what the preview promised is what the resume sent
    assert "line 39: flower end-to-end fixture text" not in sent.text
    assert len(json.loads((runs / "manifest.json").read_text())["steps"]) == 2


def test_once_walls_the_main_thread_to_its_tools(scripted_api: ScriptedAPI, tmp_path: Path, ws: Path) -> None:
    """`once --tools Read`: a Bash call on the main thread is denied by the whitelist wall (S-7)."""
    scripted_api.script([tool_use("Bash", {"command": "echo hi"}), text("could not run it")])
    env = scripted_api.cli_env(tmp_path / "home")
    done = invoke(env, "once", "run echo", "--tools", "Read", "-w", str(ws), "-r", str(tmp_path / "runs"))
    assert done.exit_code == 0, done.output
    # the denied call is a tool error, said in the summary (issue #17 item 14)
    assert any(line.startswith("! done with 1 tool errors once | $") for line in done.stdout.splitlines())
    denial = scripted_api.main_requests[1].result_text()
    assert texts.WHITELIST_DENIAL.format(tool="Bash", name="once").split(";")[0] in denial
    steps = json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]
    assert [s["step"] for s in steps] == ["once"] and steps[0]["ok"] is True


def test_resume_of_an_unknown_session_is_refused(scripted_api: ScriptedAPI, tmp_path: Path, ws: Path) -> None:
    env = scripted_api.cli_env(tmp_path / "home")
    done = invoke(
        env, "once", "hi", "-w", str(ws), "-r", str(tmp_path / "runs"), "--resume", "no-such-session"
    )
    assert (
        done.exit_code == 1
        and done.stderr.strip() == "flower: unknown session no-such-session: nothing to resume"
    )
    assert scripted_api.requests == []
