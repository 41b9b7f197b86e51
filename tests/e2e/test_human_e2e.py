"""The human channel through the real CLI: a coordinator asks, the answer or a fallback text comes back as the
tool's result, and mail reaches it through the inbox (issue #14, L-8).

The scripted model calls `mcp__human__ask` directly: the CLI defers SDK MCP tools behind ToolSearch in its
listing (docs/sdk-notes.md#mcp-tools) but runs a direct call to a connected server's tool all the same.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AgentDefinition

from flower import texts
from flower.agent.events import Event
from flower.agent.roles import coordinator, worker
from flower.human.channel import HumanChannel
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ASK = "mcp__human__ask"
INBOX = "mcp__human__inbox"


def runtime(api: ScriptedAPI, tmp_path: Path, workspace: Path, **kwargs: Any) -> Runtime:
    return Runtime(workspace, run_dir=tmp_path / "runs", env=api.cli_env(tmp_path / "home"), run_id="run-7", **kwargs)


def lead(channel: HumanChannel) -> Any:
    return coordinator("lead", "Goal: paint the shed.", {"hands": worker("does the work", "You work.")},
                       channel=channel)


def answer_when_asked(channel: HumanChannel, reply: str) -> threading.Thread:
    def human() -> None:
        deadline = time.monotonic() + 60
        while not channel.pending() and time.monotonic() < deadline:
            time.sleep(0.02)
        channel.answer(channel.pending()[0].id, reply)

    thread = threading.Thread(target=human, daemon=True)
    thread.start()
    return thread


async def test_the_answer_from_another_thread_is_the_tool_result(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([tool_use(ASK, {"question": "Which colour?", "options": ["red", "blue"]}),
                         text("painting it blue")])
    rt = runtime(scripted_api, tmp_path, workspace)
    ch = HumanChannel(timeout_s=60).bind(rt)
    helper = answer_when_asked(ch, "blue, please")
    result = await rt.run(lead(ch), "Paint the shed.")
    helper.join(5)
    assert result.ok and result.text == "painting it blue"
    assert scripted_api.main_requests[1].result_text() == texts.ASK_ANSWERED.format(answer="blue, please")
    assert [(a.question, a.options, a.state) for a in ch.asks] == [("Which colour?", ("red", "blue"), "answered")]
    log = (rt.workbench.notes / "human-questions.md").read_text()  # type: ignore[union-attr]
    assert "Which colour?" in log and "blue, please" in log


async def test_invalid_declined_timeout_and_over_budget_each_give_their_fallback(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([
        tool_use(ASK, {"question": "  "}),
        tool_use(ASK, {"question": "Decline me?"}),
        tool_use(ASK, {"question": "Is anyone there?"}),
        tool_use(ASK, {"question": "One more?"}),
        text("decided myself"),
    ])
    declined: list[str] = []

    def ui(event: Event) -> None:
        if event.kind == "ask" and event.payload["state"] == "asked" and event.text.startswith("Decline"):
            declined.append(event.payload["id"])
            threading.Timer(0.1, ch.decline, (event.payload["id"], "ask the designer")).start()

    ch = HumanChannel(max_asks=2, timeout_s=0.5, on_event=ui)
    rt = runtime(scripted_api, tmp_path, workspace)
    result = await rt.run(lead(ch), "Paint the shed.")
    assert result.ok and declined == ["q2"]
    seen = [request.result_text() for request in scripted_api.main_requests[1:5]]
    assert seen == [
        texts.ASK_INVALID,
        texts.ASK_DECLINED.format(reason=" Reason: ask the designer."),
        texts.ASK_TIMEOUT,
        texts.ASK_OVER_BUDGET,
    ]
    assert [a.state for a in ch.asks] == ["invalid", "declined", "timeout", "over_budget"]


async def test_flower_say_during_a_workers_run_reaches_the_next_inbox_call_and_the_brief(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """The worker's own Bash runs `flower say` in a second process, against the run's SQLite mailbox."""
    brief = workspace / "brief.md"
    brief.write_text("## Goal\nPaint the shed.\n")
    say = f"{sys.executable} -m flower say {tmp_path / 'runs'} 'Use the green paint from the garage.'"
    scripted_api.script(
        [tool_use(INBOX, {}),
         tool_use("Agent", {"description": "paint", "prompt": "PAINT-TASK: paint it", "subagent_type": "hands",
                            "run_in_background": False}),
         tool_use(INBOX, {}),
         text("switching to green")],
        subagents={"PAINT-TASK": [tool_use("Bash", {"command": say}), text("painted the first wall")]},
    )
    rt = runtime(scripted_api, tmp_path, workspace)
    ch = HumanChannel(amend_path=brief).bind(rt)
    result = await rt.run(lead(ch), "Paint the shed.")
    assert result.ok, result.error
    main = scripted_api.main_requests
    assert main[1].result_text() == texts.INBOX_EMPTY
    delivered = main[3].result_text()
    assert "1. Use the green paint from the garage." in delivered and str(brief) in delivered
    assert brief.read_text().startswith("## Goal\nPaint the shed.\n")
    assert "Use the green paint from the garage." in brief.read_text()
    # The say ran in another process: its stdout went to the worker's Bash result.
    assert any("sent" in r.result_text() for r in scripted_api.subagent_requests())


def flower(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def answer_from_another_process(channel: HumanChannel, *args: str, cwd: Path) -> threading.Thread:
    """Once the question is published, run `flower asks` and `flower answer` as separate processes."""
    outputs: list[str] = []

    def human() -> None:
        deadline = time.monotonic() + 60
        while not channel.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        listed = flower("asks", *args, cwd=cwd)
        answered = flower("answer", *args[:1], "the red one", *args[1:], cwd=cwd)
        outputs.extend([listed.stdout + listed.stderr, answered.stdout + answered.stderr])

    thread = threading.Thread(target=human, daemon=True)
    thread.outputs = outputs  # type: ignore[attr-defined]
    thread.start()
    return thread


async def test_flower_answer_from_a_second_process_through_the_sqlite_mailbox(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([tool_use(ASK, {"question": "Which brush?", "options": ["red", "blue"]}),
                         text("using the red brush")])
    rt = runtime(scripted_api, tmp_path, workspace)
    ch = HumanChannel(timeout_s=60, poll_s=0.1).bind(rt)
    helper = answer_from_another_process(ch, str(rt.run_dir), cwd=tmp_path)
    result = await rt.run(lead(ch), "Paint the shed.")
    helper.join(30)
    listed, answered = helper.outputs  # type: ignore[attr-defined]
    assert listed.startswith("q1  run-7  asked ") and "Which brush?  [red | blue]" in listed
    assert answered.strip() == "answered q1: Which brush?"
    assert result.ok and scripted_api.main_requests[1].result_text() == texts.ASK_ANSWERED.format(answer="the red one")
    assert flower("asks", str(rt.run_dir), cwd=tmp_path).stdout.strip() == "no question is waiting"


@pytest.mark.postgres
async def test_flower_answer_from_a_second_process_through_postgresql(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    import psycopg

    from flower.stores.postgres import PostgresSessionStore

    dsn = os.environ.get("FLOWER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        psycopg.connect(dsn, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL unreachable at {dsn}: {exc}")
    schema = f"human_e2e_{os.getpid()}_{secrets.token_hex(3)}"
    store = PostgresSessionStore(dsn, schema=schema)
    try:
        scripted_api.script([tool_use(ASK, {"question": "Which brush?"}), text("using the red brush")])
        rt = runtime(scripted_api, tmp_path, workspace, store=store)
        ch = HumanChannel(timeout_s=60, poll_s=0.1).bind(rt)
        helper = answer_from_another_process(ch, "run-7", "--store", dsn, "--schema", schema, cwd=tmp_path)
        events: list[Any] = []
        result = await rt.run(lead(ch), "Paint the shed.", on_event=events.append)
        helper.join(30)
        listed, answered = helper.outputs  # type: ignore[attr-defined]
        assert listed.startswith("q1  run-7  asked ") and listed.strip().endswith("Which brush?")
        assert answered.strip() == "answered q1: Which brush?"
        assert result.ok
        assert scripted_api.main_requests[1].result_text() == texts.ASK_ANSWERED.format(answer="the red one")
        assert not (rt.run_dir / "human.db").exists()  # the letters went to PostgreSQL
        # the mailbox's table beside the store's in one schema: the session was stored as it ran, not refused
        assert await store.load(rt._key(result.session_id))
        assert not [e for e in events if e.payload.get("subtype") in ("mirror_error", "backfill_failed")]
    finally:
        await store.aclose()
        if ch.mailbox is not None:
            ch.mailbox.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def test_a_subagent_that_inherits_every_tool_is_denied_the_ask_tool(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """Asking is a main-thread act: a worker that needs a decision reports it."""
    scripted_api.script(
        [tool_use("Agent", {"description": "paint", "prompt": "ASK-TASK: paint it", "subagent_type": "any",
                            "run_in_background": False}),
         text("the worker reported the open decision")],
        subagents={"ASK-TASK": [tool_use(ASK, {"question": "Which colour?"}), text("need a colour decision")]},
    )
    ch = HumanChannel(timeout_s=30)
    anything = AgentDefinition(description="does anything", prompt="You work.", tools=None)  # inherits every tool
    spec = coordinator("lead", "Goal: paint.", {"any": anything}, channel=ch)
    result = await runtime(scripted_api, tmp_path, workspace).run(spec, "Paint the shed.")
    assert result.ok
    seen = scripted_api.subagent_requests()[-1].result_text()
    # The CLI prefixes a deny for an MCP tool with "PreToolUse:<tool> hook error: "; the reason follows whole.
    assert seen.endswith(texts.ASK_NOT_FROM_SUBAGENT) and ch.asks == []


async def test_the_wall_lets_the_channel_through_and_denies_another_mcp_tool_on_the_main_thread(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """The coordinator names the channel's tools glance-safe; an SDK MCP tool that writes stays walled."""
    from claude_agent_sdk import create_sdk_mcp_server, tool

    written: list[str] = []

    @tool("write_note", "Write a note.", {"text": str})
    async def write_note(args: dict[str, Any]) -> dict[str, Any]:
        written.append(args["text"])
        return {"content": [{"type": "text", "text": "written"}]}

    scripted_api.script([tool_use("mcp__notes__write_note", {"text": "from the main thread"}),
                         tool_use(ASK, {"question": "Go on?"}), text("went on")])
    ch = HumanChannel(timeout_s=0)
    spec = coordinator("lead", "Goal: paint.", {"hands": worker("does the work", "You work.")}, channel=ch,
                       mcp_servers={"notes": create_sdk_mcp_server("notes", tools=[write_note])})
    assert set(ch.tool_names) <= set(spec.glance_tools) and "mcp__notes__write_note" not in spec.glance_tools
    result = await runtime(scripted_api, tmp_path, workspace).run(spec, "Paint the shed.")
    assert result.ok and written == []
    assert texts.MCP_DENIAL.format(tool="mcp__notes__write_note") in scripted_api.main_requests[1].result_text()
    assert scripted_api.main_requests[2].result_text() == texts.ASK_TIMEOUT
