"""`flower rewind` on a real run (issue #28 item 4): two steps through the real CLI in which a worker edits
and creates files; the run is rewound to the start of step two and to its first prompt, files and session
come back to the chosen message, the original history stays as it was, and the fork resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from flower.agent.roles import coordinator, worker
from flower.cli import cli
from flower.runtime.runtime import Runtime
from flower.stores.opening import open_store
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = pytest.mark.e2e

ORIGINAL = "alpha\n"


def invoke(*args: str, width: int = 80) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": str(width)}, catch_exceptions=False)


def _dispatch(marker: str) -> Any:
    return tool_use("Agent", {"description": f"fix {marker}", "subagent_type": "fixer", "prompt": f"{marker}: fix it",
                              "run_in_background": False})


def _spec() -> Any:
    fixer = worker("Fixes files.", "You make minimal fixes.", tools=["Read", "Edit", "Write"])
    return coordinator("lead", "Goal: the files are fixed.", {"fixer": fixer})


def _run(root: Path) -> tuple[Runtime, list[Any], ScriptedAPI]:
    ws = root / "ws"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text(ORIGINAL)
    main = [_dispatch("FIX-ONE"), text("first fix done"), _dispatch("FIX-TWO"), text("second fix done")]
    subs = {
        "FIX-ONE": [tool_use("Edit", {"file_path": str(ws / "a.txt"), "old_string": "alpha", "new_string": "beta"}),
                    tool_use("Write", {"file_path": str(ws / "new.txt"), "content": "made in step one\n"}),
                    text("edited a.txt, wrote new.txt")],
        "FIX-TWO": [tool_use("Edit", {"file_path": str(ws / "a.txt"), "old_string": "beta", "new_string": "gamma"}),
                    tool_use("Write", {"file_path": str(ws / "new.txt"), "content": "changed in step two\n"}),
                    text("edited a.txt again")],
    }
    api = ScriptedAPI(main, subs).start()
    runtime = Runtime(ws, run_dir=root / "runs", env=api.cli_env(root / "home"), handoff=None, workbench=False)

    async def steps() -> list[Any]:
        first = await runtime.run(_spec(), "Fix the files.", step_name="one")
        second = await runtime.run(_spec(), "Fix them again.", step_name="two", resume=first.session_id)
        return [first, second]

    results = anyio.run(steps)
    assert all(r.ok for r in results), [r.error for r in results]
    api.assert_done()
    return runtime, results, api


def _stored(runs: Path, session: str) -> list[dict[str, Any]]:
    store = open_store(None, runs)
    try:
        key = store.find_session(session)
        assert key is not None
        return [dict(e) for e in store.load_sync(key) or []]
    finally:
        store.close()  # type: ignore[attr-defined]


def test_rewind_restores_files_and_forks_the_session(tmp_path: Path) -> None:
    runtime, results, api = _run(tmp_path)
    runs, ws, session = str(runtime.run_dir), runtime.workspace, results[0].session_id
    assert (ws / "a.txt").read_text() == "gamma\n"
    before = _stored(runtime.run_dir, session)

    listing = invoke("rewind", runs)
    assert listing.exit_code == 0, listing.output
    lines = listing.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert lines[0].startswith(f"== session {session}")
    assert any(line.split()[0] == "1" and "you: Fix the files." in line for line in lines[1:])
    assert any("after fixer: fix FIX-ONE" in line for line in lines)
    found = json.loads(invoke("rewind", runs, "--json").stdout)
    assert [p["index"] for p in found] == list(range(1, len(found) + 1))

    # the start of step two: the worker's edits of step one stay, those of step two are undone
    done = json.loads(invoke("rewind", runs, "--to", "two", "--json").stdout)
    assert done["point"]["text"] == "Fix them again." and done["point"]["session"] == session
    assert (ws / "a.txt").read_text() == "beta\n" and (ws / "new.txt").read_text() == "made in step one\n"
    assert sorted(Path(f["path"]).name for f in done["files"]) == ["a.txt", "new.txt"]
    fork = done["session_id"]
    assert fork != session
    forked = _stored(runtime.run_dir, fork)
    said = json.dumps(forked)
    assert "Fix them again." in said and "FIX-ONE" in said and "FIX-TWO" not in said
    assert _stored(runtime.run_dir, session) == before  # the original history is unchanged

    # the first prompt, by its uuid: back to the files the run started with
    first = next(p for p in found if p["text"] == "Fix the files.")
    again = invoke("rewind", runs, "--to", first["uuid"])
    assert again.exit_code == 0, again.output
    assert (ws / "a.txt").read_text() == ORIGINAL and not (ws / "new.txt").exists()
    assert f"(session {session[:8]} unchanged)" in again.stdout and "removed " in again.stdout
    assert all(len(line) <= 80 for line in again.stdout.splitlines()  # but for the lines naming paths
               if not line.startswith(("removed", "restored", "continue")))

    # and forward again, to the end of step one, by its number: the rewinds are recorded too
    end_of_one = next(p for p in found if p["text"] == "first fix done")
    assert invoke("rewind", runs, "--to", str(end_of_one["index"])).exit_code == 0
    assert (ws / "a.txt").read_text() == "beta\n" and (ws / "new.txt").read_text() == "made in step one\n"
    assert _stored(runtime.run_dir, session) == before

    # the fork goes on from the chosen message: the model sees the history up to it, not after
    api.script([text("continuing from step two's start")])
    resumed = anyio.run(lambda: runtime.run(_spec(), "Go on.", step_name="two", resume=fork))
    assert resumed.ok, resumed.error
    request = json.dumps(api.main_requests[-1].messages)
    assert "Fix them again." in request and "first fix done" in request and "second fix done" not in request
    assert "Go on." in request
    api.stop()


def test_rewind_bad_input_is_one_line(tmp_path: Path) -> None:
    runtime, results, api = _run(tmp_path)
    api.stop()
    runs = str(runtime.run_dir)
    for to, needle in (("999", "no message #999"), ("nosuchstep", "no message or step nosuchstep"),
                       ("", "--to is empty")):
        result = invoke("rewind", runs, "--to", to)
        assert result.exit_code == 1 and "Traceback" not in result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("flower: ") and needle in line, line
    (runtime.run_dir / "checkpoints" / "log.jsonl").unlink()
    result = invoke("rewind", runs, "--to", "1")
    assert result.exit_code == 1 and "has no file checkpoints" in result.stderr
    assert (runtime.workspace / "a.txt").read_text() == "gamma\n"


def test_run_resume_at_forks_at_a_message(tmp_path: Path) -> None:
    runtime, results, api = _run(tmp_path)
    session = results[0].session_id
    before = _stored(runtime.run_dir, session)
    end_of_one = next(e for e in before if e.get("type") == "assistant" and "first fix done" in json.dumps(e))
    api.script([text("going on from the end of step one")])
    result = anyio.run(lambda: runtime.run(_spec(), "Go on.", step_name="two", resume=session,
                                           resume_at=end_of_one["uuid"]))
    api.stop()
    assert result.ok, result.error
    assert result.session_id != session
    request = json.dumps(api.main_requests[-1].messages)
    assert "first fix done" in request and "Fix them again." not in request and "Go on." in request
    assert _stored(runtime.run_dir, session) == before


def test_the_clis_own_checkpoints_miss_a_workers_edit_and_refuse_a_store(tmp_path: Path) -> None:
    """Why flower keeps its own (docs/sdk-notes.md#found-by-flowers-tests): the CLI's `rewind_files` puts back
    the main thread's edit but not a worker's, and the SDK refuses its checkpoints beside a session store."""
    from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions, ClaudeSDKClient, UserMessage

    from flower.stores.sqlite import SqliteSessionStore

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "main.txt").write_text("one\n")
    (ws / "worker.txt").write_text("one\n")
    main = [tool_use("Edit", {"file_path": str(ws / "main.txt"), "old_string": "one", "new_string": "two"}),
            tool_use("Agent", {"description": "fix", "subagent_type": "fixer", "prompt": "FIX: go",
                               "run_in_background": False}),
            text("done")]
    sub = {"FIX": [tool_use("Edit", {"file_path": str(ws / "worker.txt"), "old_string": "one", "new_string": "two"}),
                   text("edited")]}
    with ScriptedAPI(main, sub) as api:
        options = ClaudeAgentOptions(
            cwd=str(ws), env=api.cli_env(tmp_path / "home"), setting_sources=[], allowed_tools=["Edit", "Read", "Agent"],
            enable_file_checkpointing=True, extra_args={"replay-user-messages": None},
            agents={"fixer": AgentDefinition(description="Fixes.", prompt="Fix.", tools=["Edit", "Read"])})

        async def session() -> None:
            async with ClaudeSDKClient(options) as client:
                await client.query("Edit both.")
                prompts = [m.uuid async for m in client.receive_response()
                           if isinstance(m, UserMessage) and m.parent_tool_use_id is None and m.uuid]
                assert (ws / "main.txt").read_text() == (ws / "worker.txt").read_text() == "two\n"
                await client.rewind_files(prompts[0])

        anyio.run(session)
    assert (ws / "main.txt").read_text() == "one\n"  # the main thread's edit is undone
    assert (ws / "worker.txt").read_text() == "two\n"  # the worker's is not
    assert list((tmp_path / "home" / ".claude" / "file-history").iterdir())  # kept in the CLI's config dir

    with_store = ClaudeAgentOptions(cwd=str(ws), enable_file_checkpointing=True,
                                    session_store=SqliteSessionStore(tmp_path / "s.db"))
    with pytest.raises(ValueError, match="session_store cannot be combined with enable_file_checkpointing"):
        anyio.run(lambda: ClaudeSDKClient(with_store).connect())


TARGETS = """\
from flower import coordinator, worker

fixer = worker("Fixes files.", "You make minimal fixes.", tools=["Read", "Edit", "Write"])
lead = coordinator("lead", "Goal: the files are fixed.", {"fixer": fixer})
"""


def test_flower_run_then_rewind_then_continue_the_fork(tmp_path: Path) -> None:
    """The whole command line: `flower run`, `flower rewind --to 1`, `flower run -c` goes on from the fork."""
    ws, runs = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    (ws / "a.txt").write_text(ORIGINAL)
    (tmp_path / "targets.py").write_text(TARGETS)
    target = f"{tmp_path / 'targets.py'}:lead"
    edit = tool_use("Edit", {"file_path": str(ws / "a.txt"), "old_string": "alpha", "new_string": "beta"})
    with ScriptedAPI([_dispatch("FIX-ONE"), text("fixed"), text("from the start again")],
                     {"FIX-ONE": [edit, text("edited a.txt")]}) as api:
        env = api.cli_env(tmp_path / "home")
        first = CliRunner().invoke(cli, ["run", target, "-w", str(ws), "-r", str(runs), "-p", "Fix the files."],
                                   env=env, catch_exceptions=False)
        assert first.exit_code == 0, first.output
        assert (ws / "a.txt").read_text() == "beta\n"
        back = invoke("rewind", str(runs), "--to", "1")
        assert back.exit_code == 0, back.output
        assert (ws / "a.txt").read_text() == ORIGINAL
        again = CliRunner().invoke(cli, ["run", target, "-w", str(ws), "-r", str(runs), "-c", "-p", "Once more."],
                                   env=env, catch_exceptions=False)
        assert again.exit_code == 0, again.output
        request = json.dumps(api.main_requests[-1].messages)
    assert "Fix the files." in request and "Once more." in request and "fixed" not in request
