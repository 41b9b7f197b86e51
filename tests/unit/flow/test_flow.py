"""Pure parts of the workflow engine (issue #13, L-6, B-13): step rendering and validation, targets, the
system-database rule and its checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flower import AgentSpec, ConfigError, FlowError, Step, StoreError, Workflow, parallel
from flower.flow import engine
from flower.flow.workflow import Context, as_workflow

SPEC = AgentSpec(name="a", instructions="i")
WRITER = AgentSpec(name="w", instructions="i", allowed_tools=["Read", "Edit"])


def test_render_prompt_resume_prompt_and_items() -> None:
    step = Step("s", SPEC, "look at {item}", resume_prompt=lambda ctx: f"go on with {ctx['x']}")
    assert step.render({}, item="a.py") == "look at a.py"
    assert step.render({"x": 1}, resuming=True) == "go on with 1"
    assert Step("t", SPEC, "plain").render({}, item=3) == "plain\n\nItem: 3"
    assert Step("u", SPEC, lambda ctx, item: f"{item}!").render({}, item="x") == "x!"
    with pytest.raises(FlowError, match="step v: the prompt is empty"):
        Step("v", SPEC, lambda ctx: "  ").render({})


def test_step_and_workflow_validation() -> None:
    for bad, message in [
        (lambda: Step("", SPEC, "x"), "non-empty name"),
        (lambda: Step("a#b", SPEC, "x"), "may not start with '_' or contain '#'"),
        (lambda: Step("a", "spec", "x"), "spec is a str, not an AgentSpec"),  # type: ignore[arg-type]
        (lambda: Step("a", SPEC, "x", retries=-1), "retries must be a whole number"),
        (lambda: Step("a", SPEC, "x", over=[1], limit=0), "limit must be a whole number >= 1"),
        (lambda: Workflow([]), "has no steps"),
        (lambda: Workflow([Step("a", SPEC, "x")], context={"_x": 1}), "context key '_x'"),
        (lambda: Workflow([parallel(Step("a", SPEC, "x"), Step("a", SPEC, "y"))]), "two steps named a"),
        (lambda: parallel(Step("a", SPEC, "x"), Step("b", SPEC, "y", resume_from="a")), "runs alongside it"),
    ]:
        with pytest.raises(FlowError, match=message):
            bad()
    wf = Workflow([Step("a", SPEC, "x"), parallel(Step("b", WRITER, "y"), Step("c", SPEC, "z"), limit=1)])
    assert wf.total == 3 and wf.find("b").writes and not wf.find("c").writes


def test_context_properties() -> None:
    ctx = Context({"_results": {}, "_sessions": {"a": "s1"}, "_failed_at": None, "_aborted": None})
    assert ctx.ok and ctx.sessions == {"a": "s1"} and ctx.failed_at is None
    assert not Context({"_failed_at": "b"}).ok


def test_targets_become_workflows() -> None:
    wf = as_workflow(SPEC, "f.py:spec", prompt="do it")
    assert [s.name for s in wf.steps] == ["a"] and wf.source == "f.py:spec" and wf.context == {"prompt": "do it"}
    assert as_workflow(lambda: wf, "f.py:make") is wf
    with pytest.raises(ConfigError, match="is an AgentSpec: give the task"):
        as_workflow(SPEC, "f.py:spec")
    with pytest.raises(ConfigError, match="f.py:n is a int, not a Workflow or an AgentSpec"):
        as_workflow(3, "f.py:n")
    with pytest.raises(ConfigError, match=r"f.py:boom\(\) failed: RuntimeError: no"):
        as_workflow(lambda: (_ for _ in ()).throw(RuntimeError("no")), "f.py:boom")


def test_system_database_rule(tmp_path: Path) -> None:
    assert engine.database_url(tmp_path) == f"sqlite:///{tmp_path.resolve() / 'dbos.sqlite'}"
    assert engine.database_url(tmp_path, str(tmp_path / "sessions.db")).endswith("/dbos.sqlite")
    assert engine.database_url(tmp_path, "postgres://u@h/db") == "postgresql://u@h/db"
    assert engine.client(tmp_path / "nothing-here") is None  # reading creates nothing
    assert not (tmp_path / "nothing-here").exists()


def test_another_applications_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "dbos.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("create table notes (body text)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="belongs to another application"):
        engine.launch(tmp_path)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "dbos.sqlite").write_text("not a database at all, just text " * 20)
    with pytest.raises(StoreError, match="is not a DBOS system database"):
        engine.launch(tmp_path / "junk")
    assert path.read_bytes() == before and engine.current() is None


def test_a_parallel_writer_gets_a_git_worktree_in_a_repository_else_a_copy(tmp_path: Path) -> None:
    import subprocess

    from flower.flow.durable import isolated_workspace

    repo, plain, runs = tmp_path / "repo", tmp_path / "plain", tmp_path / "runs"
    for folder in (repo, plain):
        folder.mkdir()
        (folder / "a.txt").write_text("committed\n")
        (folder / ".flower").mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (repo / "a.txt").write_text("uncommitted\n")

    tree = isolated_workspace(repo, runs, "run-1", "fix[0]")
    assert tree == runs / "workspaces" / "run-1" / "fix_0_" and (tree / ".git").is_file()  # a worktree
    assert (tree / "a.txt").read_text() == "committed\n"  # at HEAD: uncommitted changes are not in it
    assert isolated_workspace(repo, runs, "run-1", "fix[0]") == tree  # the same path on a re-run
    copy = isolated_workspace(plain, runs, "run-1", "fix[1]")
    assert (copy / "a.txt").read_text() == "committed\n" and not (copy / ".flower").exists()


def test_a_step_writes_when_any_agent_in_its_tree_can() -> None:
    """A parallel step gets its own workspace when anything in it may change files: a coordinator without
    glance allows no hands-on tool itself, but its workers do; Monitor and PowerShell run commands."""
    from flower.agent.roles import coordinator, worker

    reader = worker("reads", "You read.", tools=["Read", "Grep"])
    assert not Step("r", coordinator("lead", "g", {"r": reader}, glance=False), "x").writes
    assert Step("w", coordinator("lead", "g", {"w": worker("edits", "You edit.", tools=["Edit"])}, glance=False),
                "x").writes
    everything = coordinator("lead", "g", {"r": reader}, glance=False)
    assert everything.agents is not None
    everything.agents["r"].tools = None  # inherits every tool, Write included
    assert Step("e", everything, "x").writes
    for tool in ("Monitor", "PowerShell"):
        assert Step(tool, AgentSpec(name="a", instructions="i", allowed_tools=[tool]), "x").writes


def test_a_scoped_rule_for_a_writing_tool_writes() -> None:
    """`Bash(make:*)` in allowed_tools runs make: the step writes (its parallel copies need own workspaces)."""
    from flower.agent.spec import AgentSpec
    from flower.flow.step import Step

    spec = AgentSpec(name="b", instructions="build", allowed_tools=["Read", "Bash(make:*)"])
    assert Step("b", spec, prompt="go").writes
    assert not Step("r", AgentSpec(name="r", instructions="read", allowed_tools=["Read", "Grep"]), prompt="go").writes
