"""History rewriting on resume, end to end through the real SDK and CLI (issue #5, S-19, S-20, B-7).

One session is recorded by the real CLI into a `SqliteSessionStore` through the SDK's `session_store=`
option, over four runs that leave every kind of history a rewrite cares about (docs/sdk-notes.md#denials,
#session-stores, #errors-and-interrupts, #large-bash-output):

1. glances (`ls -la src`, `ls tiny`, `cat notes.txt`, `ls src`), two hook-denied `rm` calls, and a Bash
   printing 40,000 chars (the CLI persists it past 30,000 and sends a `<persisted-output>` preview);
2. a prompt answered by two 500s with `CLAUDE_CODE_MAX_RETRIES=1`: the CLI writes a `<synthetic>`
   `isApiErrorMessage` entry;
3. `ClaudeSDKClient.interrupt()` during `python3 -c "import time; time.sleep(30)"`: the CLI's
   stop-and-wait result plus the `[Request interrupted by user for tool use]` row;
4. a run SIGKILLed (process group) during a sleeping Bash: a real orphan `tool_use` with no result.

The stored file is then copied, and the same session resumed with the same scripted reply through
`PruningSessionStore` (the rewriting layer) and, from the copy, through the plain `SqliteSessionStore` (the
control). Every rewrite claim is checked on the request the strict fake received, against the control
request where the CLI sends it, so each assertion fails without the layer. A last resume through the layer
checks that the history it left behind resumes again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    ToolUseBlock,
    project_key_for_directory,
)
from claude_agent_sdk.types import SessionKey

from flower import texts
from flower.stores.rewrite import EphemeralPolicy, PruningSessionStore
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.validate import validate
from flower.testing import Request, ScriptedAPI, api_error, collect, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LONG_LS, TINY_LS, LONG_CAT, NEWEST_LS = "ls -la src", "ls tiny", "cat notes.txt", "ls src"
DENIED_OLD, DENIED_NEW = "rm -rf src", "rm notes.txt"
BIG = "python3 -c \"print('B' * 40000)\""
INTERRUPTED = 'python3 -c "import time; time.sleep(30)"'
KILLED = 'python3 -c "import time; time.sleep(60)"'
KILLED_PROMPT = "run the second long job"
DENY_REASON = "REWRITE-E2E: no rm in this workspace"
CLI_STOP_TEXT = "STOP what you are doing"
API_ERROR_TEXT = "API Error: 500"

KILLED_RUN = """
import json, sys, anyio
from claude_agent_sdk import ClaudeAgentOptions, query
from flower.stores.sqlite import SqliteSessionStore
db, cwd, session, env = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
async def main():
    with SqliteSessionStore(db) as store:
        options = ClaudeAgentOptions(cwd=cwd, env=env, setting_sources=[], allowed_tools=["Bash"],
                                     session_store=store, session_store_flush="eager", resume=session)
        async for _ in query(prompt=sys.argv[5], options=options):
            pass
anyio.run(main)
"""


async def deny_rm(input_data: dict[str, Any], tool_use_id: str | None, context: Any) -> dict[str, Any]:
    """A plain PreToolUse deny: the CLI marks the result `toolDenialKind: permission-rule`
    (docs/sdk-notes.md#denials)."""
    command = str((input_data.get("tool_input") or {}).get("command", ""))
    if not command.startswith("rm "):
        return {}
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                   "permissionDecisionReason": DENY_REASON}}


def bash(command: str) -> dict[str, str]:
    return {"command": command, "description": "step"}


def seed(workspace: Path) -> None:
    (workspace / "src").mkdir()
    for n in range(30):
        (workspace / "src" / f"module_{n:02d}.py").write_text(f"VALUE = {n}\n")
    (workspace / "tiny").mkdir()
    (workspace / "tiny" / "one.txt").write_text("1\n")
    notes = "".join(f"note {n}: the parser keeps state {n}\n" for n in range(40))
    (workspace / "notes.txt").write_text(notes)


def calls(request: Request) -> dict[str, str]:
    """command -> tool_use id over the assistant messages of a request."""
    return {
        block["input"]["command"]: block["id"]
        for message in request.messages
        if message.get("role") == "assistant"
        for block in message.get("content") or []
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }


def results(request: Request) -> dict[str, str]:
    """tool_use id -> result text over the user messages of a request."""
    out: dict[str, str] = {}
    for message in request.messages:
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                body = block.get("content")
                if isinstance(body, list):
                    body = "\n".join(str(b.get("text", "")) for b in body if isinstance(b, dict))
                out[block["tool_use_id"]] = str(body)
    return out


def body_of(request: Request, command: str) -> str | None:
    """The result text the request carries for the call of `command`; None when the call is not sent."""
    call = calls(request).get(command)
    return None if call is None else results(request).get(call)


@dataclass
class Recorded:
    session_id: str
    key: SessionKey
    db: Path
    control_db: Path
    env: dict[str, str]


async def record_session(api: ScriptedAPI, tmp_path: Path, workspace: Path) -> Recorded:
    """Runs 1-4 of the module docstring; returns where the session is stored (and a copy for the control)."""
    seed(workspace)
    db = tmp_path / "sessions.db"
    env = api.cli_env(tmp_path / "home", CLAUDE_CODE_MAX_RETRIES="1")

    deny = [HookMatcher(matcher="Bash", hooks=[deny_rm])]  # type: ignore[list-item]

    def options(**kwargs: Any) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(cwd=str(workspace), env=env, setting_sources=[], allowed_tools=["Bash"],
                                  session_store=store, session_store_flush="eager",
                                  hooks={"PreToolUse": deny}, **kwargs)

    api.script([tool_use("Bash", bash(command)) for command in
                (LONG_LS, DENIED_OLD, TINY_LS, BIG, LONG_CAT, DENIED_NEW, NEWEST_LS)] + [text("survey done")])
    with SqliteSessionStore(db) as store:
        first = await collect("survey the workspace", options())
        assert first.error is None and first.result.result == "survey done"
        session = first.session_id

        api.script([api_error(500), api_error(500)])
        failed = await collect("now summarise it", options(resume=session))
        assert failed.result.is_error and failed.result.session_id == session

        api.script([tool_use("Bash", bash(INTERRUPTED))])
        async with ClaudeSDKClient(options(resume=session)) as client:
            await client.query("run the long job")
            async for message in client.receive_response():
                if isinstance(message, AssistantMessage) and any(
                    isinstance(block, ToolUseBlock) for block in message.content
                ):
                    await anyio.sleep(1.5)  # the sleep is running now
                    await client.interrupt()

    api.script([tool_use("Bash", bash(KILLED))])
    await kill_mid_tool(api, db, workspace, session, env)
    control_db = tmp_path / "control.db"
    shutil.copyfile(db, control_db)
    key = SessionKey(project_key=project_key_for_directory(workspace), session_id=session)
    return Recorded(session, key, db, control_db, env)


async def kill_mid_tool(
    api: ScriptedAPI, db: Path, workspace: Path, session: str, env: dict[str, str]
) -> None:
    """Resume in a child process and SIGKILL its process group while the scripted Bash sleeps."""
    asked = len(api.main_requests)
    args = [str(db), str(workspace), session, json.dumps(env), KILLED_PROMPT]
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, *args],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 45
        while len(api.main_requests) <= asked and time.monotonic() < deadline and child.poll() is None:
            await anyio.sleep(0.1)
        assert len(api.main_requests) == asked + 1, "the killed run never asked for its tool call"
        await anyio.sleep(2.0)  # the tool_use entry is mirrored (eager flush) and the sleep is running
        assert child.poll() is None, "the killed run ended by itself"
    finally:
        with contextlib.suppress(ProcessLookupError):  # the group may be gone if the run ended by itself
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)


async def resume(api: ScriptedAPI, store: Any, workspace: Path, rec: Recorded, reply: str) -> Request:
    api.script([text(reply)])
    options = ClaudeAgentOptions(cwd=str(workspace), env=rec.env, setting_sources=[], allowed_tools=["Bash"],
                                 session_store=store, session_store_flush="eager", resume=rec.session_id)
    run = await collect("carry on", options)
    assert run.error is None and run.result.result == reply, run.error
    assert api.failures == []  # the strict fake accepted the resumed request
    return api.main_requests[-1]


async def test_resume_through_the_rewriting_store(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """S-19 rewrites, seen in the request the resumed CLI sends; S-20/B-7 the result is valid and accepted;
    the stored rows stay the originals; a second resume through the layer finds the chain it left intact."""
    rec = await record_session(scripted_api, tmp_path, workspace)
    with SqliteSessionStore(rec.db) as plain:
        original = plain.load_sync(rec.key)
    assert original is not None

    def rewriting() -> PruningSessionStore:
        return PruningSessionStore(rec.db, workspace=workspace, ephemeral=EphemeralPolicy(keep_recent=1))

    with rewriting() as store:
        rewritten = await resume(scripted_api, store, workspace, rec, "resumed with rewrites")
        report = store.last_report(rec.key)
        loaded, _ = store.rewrite(original)
    with SqliteSessionStore(rec.control_db) as control_store:
        control = await resume(scripted_api, control_store, workspace, rec, "resumed plain")

    # The stored originals are unchanged: a plain load of the same file starts with the very same entries.
    with SqliteSessionStore(rec.db) as plain:
        stored = plain.load_sync(rec.key)
    assert stored is not None and stored[: len(original)] == original and len(stored) > len(original)
    assert report is not None
    assert (report.expired, report.denials_dropped, report.api_errors_dropped,
            report.interrupts_neutralised, report.orphans_healed) == (3, 1, 1, 1, 1)
    killed_call = calls(rewritten)[KILLED]
    assert validate(loaded) == [] and validate(original) == [
        f"pairing: tool_use {killed_call} (Bash) has no tool_result before the next assistant message"
    ]

    # 1. expiry: the old long `ls` and the tiny one are a run of expired calls (the denial between does not
    # end it): the first goes with its result, the tiny one stays with one line naming both; `cat` (after the
    # large python output, which ends the run) carries the note; the newest glance keeps its body.
    assert LONG_LS in calls(control) and LONG_LS not in calls(rewritten)
    assert calls(control)[LONG_LS] in results(control) and calls(control)[LONG_LS] not in results(rewritten)
    assert str(body_of(rewritten, TINY_LS)).startswith(f"[flower: expired output of `{TINY_LS}`, run ")
    assert f"1 earlier expired call before it went with their outputs ({LONG_LS})" in str(
        body_of(rewritten, TINY_LS)) and body_of(control, TINY_LS) == "one.txt"
    assert str(body_of(rewritten, LONG_CAT)).startswith(f"[flower: expired output of `{LONG_CAT}`, run ")
    assert "note 39" in str(body_of(control, LONG_CAT)) and "note 39" not in str(body_of(rewritten, LONG_CAT))
    assert "module_29.py" in str(body_of(rewritten, NEWEST_LS))
    # 3. denials: exactly one left, the newest; the older call went together with its result.
    assert rewritten.text.count(DENY_REASON) == 1 and control.text.count(DENY_REASON) == 2
    assert DENIED_OLD in calls(control) and DENIED_OLD not in calls(rewritten)
    assert DENY_REASON in str(body_of(rewritten, DENIED_NEW))
    # 4a. the CLI never sends its <synthetic> API-error message (docs/sdk-notes.md#errors-and-interrupts): the
    # rewrite is seen in the history the store handed out, not in the request.
    assert API_ERROR_TEXT not in rewritten.text and API_ERROR_TEXT not in control.text
    assert [e["message"]["model"] for e in original if e.get("isApiErrorMessage")] == ["<synthetic>"]
    assert not any(e.get("isApiErrorMessage") for e in loaded)
    # 4b. the interrupt's stop-and-wait text is replaced by the neutral note.
    assert body_of(rewritten, INTERRUPTED) == texts.INTERRUPTED_RESULT and CLI_STOP_TEXT not in rewritten.text
    assert CLI_STOP_TEXT in str(body_of(control, INTERRUPTED))
    # 4c. the killed call is healed and its turn kept; without the layer the CLI silently drops the whole
    # killed turn, prompt and call.
    assert body_of(rewritten, KILLED) == texts.ORPHAN_RESULT and KILLED_PROMPT in rewritten.text
    assert KILLED not in calls(control) and KILLED_PROMPT not in control.text
    # The large output reaches both as the CLI's own persisted preview (PruningSessionStore does not trim).
    assert "<persisted-output>" in str(body_of(rewritten, BIG))
    assert body_of(rewritten, BIG) == body_of(control, BIG)

    # The CLI's new entries hang under the healing entry, which only the rewritten copy holds; healing again
    # gives it the same uuid, so a second resume through the layer sees an unbroken chain.
    assert validate(stored)[0].startswith("chain: parentUuid")
    with rewriting() as store:
        assert validate(store.rewrite(stored)[0]) == []
        again = await resume(scripted_api, store, workspace, rec, "resumed twice")
    assert again.text.count(texts.ORPHAN_RESULT) == 1 and "resumed with rewrites" in again.text
