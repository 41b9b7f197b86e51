"""`flower check TARGET` (issue #28 item 8): a spec or a workflow and the settings checked without any model
request. Run as a user runs it (a subprocess, in the project's folder): one line per problem and exit 1, or
one ok line; the scripted API sees no request, and with no API at all the check works the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flower.testing import ScriptedAPI

pytestmark = pytest.mark.e2e

GOOD = """\
from pydantic import BaseModel
from flower import AgentSpec, Step, Workflow
from flower.agent.roles import coordinator, worker

class Count(BaseModel):
    files: int

lead = coordinator("lead", "Goal: count.", {"reader": worker("reads", "You read.", tools=["Read", "Grep"])})
wf = Workflow([Step("survey", lead, "Survey."), Step("count", lead, "Count.", output_type=Count)], name="good")
solo = AgentSpec(name="solo", instructions="You answer.", allowed_tools=["Read"])
"""

BAD = """\
from flower import AgentSpec, Step, Workflow
from flower.agent.roles import coordinator, worker

reader = worker("reads", "You read.", tools=["Read", "Grep"])
lead = coordinator("lead", "Goal: count.", {"reader": reader})
judge = AgentSpec(name="judge", instructions="You judge.")
wf = Workflow([Step("survey", lead, "Survey."), Step("judge", judge, "Judge.", output_type={"type": "object"})],
              name="bad")
# changed after they were built, which building cannot see
reader.tools.append("Grpe")
reader.description = " "
lead.allowed_tools.append("Serch")
lead.agents["writer"] = "a writer"
judge.effort = "extreme"
wf.steps[1].output_type = {"type": "object", "required": "verdict"}
"""


def flower(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def bare_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "FLOWER_"))}
    return {**env, **extra}


def test_a_good_target_is_one_ok_line_and_no_request(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(GOOD)
    env = {**bare_env(), **scripted_api.cli_env(tmp_path / "home")}
    done = flower(tmp_path, env, "check", "flow.py:wf")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout == ("flow.py:wf: ok (workflow good: 2 steps (1 typed), 1 spec, 1 worker; settings "
                           "default)\n")
    done = flower(tmp_path, env, "check", "flow.py:solo")
    assert done.stdout == "flow.py:solo: ok (spec solo, 0 workers; settings default)\n", done.stderr
    assert scripted_api.requests == []


def test_every_problem_is_one_line_and_exit_one_without_any_api(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(BAD)
    (tmp_path / "flower.toml").write_text('windw = 200000\nbudget = "ten"\n')
    # no key, and an endpoint where nothing listens: a check needs neither
    env = bare_env(ANTHROPIC_BASE_URL="http://127.0.0.1:9", FLOWER_WINDOW="huge")
    done = flower(tmp_path, env, "check", "flow.py:wf")
    assert done.returncode == 1 and done.stderr == "", done.stderr
    toml = tmp_path / "flower.toml"
    assert done.stdout.splitlines() == [
        f"{toml}: unknown flower setting 'windw' (known: workspace, run_dir, store, model, fallback_model, budget, "
        "window, handoff_at, limit_wait, trim, spill_threshold, otlp)",
        f"{toml}: budget must be a number, not 'ten'",
        "FLOWER_WINDOW must be a token count like 200000 or 200k, not 'huge'",
        "step 'survey' (spec 'lead'): allowed_tools names 'Serch', which is not a tool of the Claude Code CLI "
        "(did you mean 'WebSearch'?)",
        "step 'survey' (spec 'lead'), worker 'reader' has no description: the coordinator chooses by the "
        "description, the worker follows the prompt",
        "step 'survey' (spec 'lead'), worker 'reader': tools names 'Grpe', which is not a tool of the Claude Code "
        "CLI (did you mean 'Grep'?)",
        "step 'survey' (spec 'lead'), worker 'writer' is a str, not a worker(...) (an AgentDefinition)",
        "step 'judge' (spec 'judge'): effort must be one of low, medium, high, xhigh, max, not 'extreme'",
        "step 'judge': output_type is not a valid JSON schema (required): 'verdict' is not of type 'array'",
        "flow.py:wf: 9 problems",
    ]


def test_a_target_that_does_not_load_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(GOOD.replace('tools=["Read", "Grep"]', 'tools=["Read", "Grp"]'))
    done = flower(tmp_path, bare_env(), "check", "flow.py:wf")
    assert done.returncode == 1 and done.stdout.splitlines() == [
        "flow.py:8: worker 'reads': tools names 'Grp', which is not a tool of the Claude Code CLI (did you mean 'Grep'?)",
        "flow.py:wf: 1 problem"], done.stdout + done.stderr
    (tmp_path / "flow.py").write_text(GOOD)
    done = flower(tmp_path, bare_env(), "check", "flow.py:Count")  # a callable that is not a factory
    assert done.returncode == 1 and done.stdout.splitlines() == [
        "flow.py:Count() failed: ValidationError: 1 validation error for Count", "flow.py:Count: 1 problem"]
    done = flower(tmp_path, bare_env(), "check", "flow.py:lead.name")
    assert done.returncode == 1 and done.stdout.splitlines() == [
        "flow.py:lead.name is a str, not a Workflow or an AgentSpec (or a callable returning one)",
        "flow.py:lead.name: 1 problem"]
    done = flower(tmp_path, bare_env(), "check", "nothere.py:wf")
    assert done.returncode == 1 and done.stdout.splitlines() == ["spec file nothere.py not found",
                                                                  "nothere.py:wf: 1 problem"]


def test_a_new_project_checks_ok(tmp_path: Path) -> None:
    assert flower(tmp_path, bare_env(), "init", "proj").returncode == 0
    done = flower(tmp_path / "proj", bare_env(), "check", "flow.py:wf")
    assert (done.returncode, done.stdout) == (0, "flow.py:wf: ok (workflow starter: 2 steps (0 typed), 1 spec, "
                                                 f"2 workers; settings from {tmp_path / 'proj' / 'flower.toml'})\n")
