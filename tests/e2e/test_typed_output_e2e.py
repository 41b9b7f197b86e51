"""Typed results (issue #28 item 2) through `flower run`, the real Claude Code CLI and SDK, against the scripted
API: a step with an output type ends on a call to the CLI's `StructuredOutput` tool, which the CLI checks
against the type's schema.

- a valid reply: the typed value is the step's `output` and what the next step reads as `ctx[name]`;
- an invalid reply, then a valid one: the CLI's schema error goes back to the same session once;
- invalid twice, or no structured reply at all: the run fails with one line, and no third request is sent;
- `Runtime.run(output_type=<JSON schema>)`: the value is the plain JSON, the manifest keeps it;
- a typed step that hands over to a new generation: the last generation's reply is the output;
- killed in the next step, the run continues in a new process with the typed value replayed from DBOS.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic import BaseModel

from flower.agent.spec import AgentSpec
from flower.cli import cli
from flower.flow import engine
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, Usage, structured, text, tool_use
from flower.util.loader import import_file
from tests.support.flowproc import SLEEP, finish, flower, outputs, runs_json, wait_for_request

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

FLOWS = """\
from pydantic import BaseModel, Field
from flower import AgentSpec, Step, Workflow

class Count(BaseModel):
    files: int = Field(ge=0)
    names: list[str]

spec = AgentSpec(name="agent", instructions="You answer.", allowed_tools=["Read"])
wf = Workflow([
    Step("count", spec, "Count the files.", output_type=Count),
    Step("use", spec, lambda ctx: f"USE: {type(ctx['count']).__name__} says {ctx['count'].files} files: "
                                  f"{', '.join(ctx['count'].names)}."),
], name="typed")
only = Workflow([Step("count", spec, "Count the files.", output_type=Count)], name="only")
"""
GOOD = {"files": 2, "names": ["a.txt", "b.txt"]}


class Count(BaseModel):
    files: int
    names: list[str]




@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    yield
    if engine.current() is not None:
        engine.destroy()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run(api: ScriptedAPI, tmp_path: Path, *flags: str, target: str = "wf") -> Result:
    (tmp_path / "flows.py").write_text(FLOWS)
    (tmp_path / "ws").mkdir(exist_ok=True)
    args = ["run", f"{tmp_path / 'flows.py'}:{target}", "-w", str(tmp_path / "ws"), "-r", str(tmp_path / "runs"), *flags]
    return CliRunner().invoke(cli, args, env=api.cli_env(tmp_path / "home"), catch_exceptions=False)


def sessions(api: ScriptedAPI) -> list[str | None]:
    return [r.headers.get("x-claude-code-session-id") for r in api.requests]


def test_a_valid_reply_is_the_typed_output_and_the_next_steps_context(
        scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([structured(GOOD), text("used")])
    result = run(scripted_api, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    count, use = data["steps"]
    assert count["ok"] and count["output"] == GOOD and json.loads(count["text"]) == GOOD
    assert use["output"] is None and use["text"] == "used"
    # the next step read the model instance from the context
    assert "USE: Count says 2 files: a.txt, b.txt." in scripted_api.requests[1].last_user_text()
    tools = [t["name"] for t in scripted_api.requests[0].body["tools"]]
    assert "StructuredOutput" in tools  # offered to the typed step ...
    assert "StructuredOutput" not in [t["name"] for t in scripted_api.requests[1].body["tools"]]  # ... only
    rows = json.loads((tmp_path / "runs" / "manifest.json").read_text())["steps"]
    assert [row["output"] for row in rows] == [GOOD, None]


def test_an_invalid_reply_is_fixed_in_the_same_session(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([structured({"files": "two", "names": ["a.txt"]}), structured(GOOD)])
    result = run(scripted_api, tmp_path, "--json", target="only")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    [count] = data["steps"]
    assert data["output"] == GOOD  # the last step's typed output, beside its text
    assert count["ok"] and count["output"] == GOOD and count["attempts"] == 1
    # the CLI's schema error went back to the model, in the same session
    assert "/files: must be integer" in scripted_api.requests[1].result_text()
    assert sessions(scripted_api)[0] == sessions(scripted_api)[1] == count["session_id"]


def test_invalid_twice_fails_in_one_line(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([structured({"files": "two", "names": []}), structured({"files": -1, "names": []})])
    result = run(scripted_api, tmp_path)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("flower: run ") and "failed at step count: the reply did not match the output type " \
        "after one retry: Output does not match required schema: /files: must be >= 0" in line, result.stderr
    assert len(scripted_api.requests) == 2  # one retry, no third request, and the next step never ran
    assert "Traceback" not in result.output


def test_a_reply_without_structured_output_fails_in_one_line(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    scripted_api.script([text("There are two files."), text("Two, as I said.")])
    result = run(scripted_api, tmp_path)
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1].endswith(
        "failed at step count: the reply gave no structured output (it never called StructuredOutput): "
        "Two, as I said."), result.stderr
    assert "StructuredOutput" in scripted_api.requests[1].last_user_text()  # the CLI reminded it once


async def test_runtime_run_takes_a_json_schema(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    schema = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}}, "required": ["verdict"]}
    scripted_api.script([structured({"verdict": "maybe"}), structured({"verdict": "pass"})])
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    spec = AgentSpec(name="judge", instructions="You judge.")
    result = await rt.run(spec, "pass or fail?", output_type=schema)
    assert result.ok and result.output == {"verdict": "pass"}, result.error
    assert "must be equal to one of the allowed values" in scripted_api.requests[1].result_text()


CRASH_FLOW = FLOWS.replace('''    Step("use",''', '''    Step("wait", AgentSpec(name="waiter", instructions="You wait.", allowed_tools=["Bash"]), "WAIT-STEP"),
    Step("use",''')


def test_the_typed_output_is_checkpointed_and_typed_again_after_a_crash(
        scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    """DBOS records the typed step like any other: killed in the next step, the same command in a new process
    replays it without a request, and the step after reads the model instance again; `flower runs`, which
    never loads the workflow file, still reads the attempt's cost."""
    (tmp_path / "flows.py").write_text(CRASH_FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    ws, run_dir = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    command = ("run", f"{tmp_path / 'flows.py'}:wf", "-w", str(ws), "-r", str(run_dir))
    scripted_api.script([structured(GOOD), tool_use("Bash", {"command": SLEEP})])
    child = flower(env, *command)
    wait_for_request(scripted_api, "WAIT-STEP")
    time.sleep(2.0)  # the Bash call is sleeping: the wait step is in flight
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)

    restart = len(scripted_api.requests)
    scripted_api.script([text("waited"), text("used")])
    code, _, err = finish(flower(env, *command))
    assert code == 0, err
    after = scripted_api.requests[restart:]
    assert not any("Count the files." in r.text for r in after)  # the typed step is replayed, not asked again
    assert "USE: Count says 2 files: a.txt, b.txt." in after[-1].last_user_text()
    (row,) = runs_json(env, run_dir)
    assert (row["state"], row["done"], row["total"]) == ("finished", 3, 3)
    costs = [step["cost_usd"] for step in json.loads((run_dir / "manifest.json").read_text())["steps"]]
    assert row["cost_usd"] == pytest.approx(sum(costs[:1]) + sum(costs[-2:]), abs=1e-6)
    assert outputs(run_dir)["count"] == GOOD  # a process without the class reads the plain data
    import_file(tmp_path / "flows.py")  # the class the checkpoints name, loaded as the run's process loaded it
    ctx = outputs(run_dir)
    assert type(ctx["count"]).__name__ == "Count" and ctx["count"].model_dump() == GOOD


HANDOFF_DOC = "## Doing\nCounting.\n## Decided\nCount by name.\n## Dead ends\nNone.\n## Next\n1. Finish.\n## Scene\nws/"


async def test_a_typed_step_that_hands_over_gives_the_last_generation_s_output(
        scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path) -> None:
    """The CLI asks every query of a typed session for its structured output, the handoff round too: the value
    the retiring session gives there is not the step's; the new generation's final reply is."""
    scripted_api.script([
        tool_use("Bash", {"command": "echo one"}, usage=Usage(input_tokens=40_000)),
        tool_use("Bash", {"command": "echo two"}, usage=Usage(input_tokens=170_000)),
        text(HANDOFF_DOC, usage=Usage(input_tokens=170_000)),
        structured({"files": 0, "names": []}, usage=Usage(input_tokens=5_000)),  # asked for by the CLI
        structured(GOOD, usage=Usage(input_tokens=5_000)),
    ])
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"),
                 handoff=HandoffPolicy(window=200_000))
    spec = AgentSpec(name="counter", instructions="You count.", allowed_tools=["Bash"])
    result = await rt.run(spec, "count the files", output_type=Count)
    assert result.ok and result.output == Count.model_validate(GOOD), result.error
    assert len(result.handoffs) == 1 and len(result.retired) == 1
    assert "[structured-output-enforce]" in scripted_api.requests[3].last_user_text()
    assert "Continue from" in scripted_api.requests[4].last_user_text()
