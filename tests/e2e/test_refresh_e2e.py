"""Refreshes through the real CLI (issue #19; P-1, P-3, P-4, S-19): a long main-thread turn whose glance and
Read results went stale is resumed in the same session, and the next request carries them no more (S-20: the
older ones go with their calls, one line names them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower import texts
from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.runtime import Runtime
from flower.testing import Request, ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

READS = 16
NOTE = "Finding {n}: the importer drops quoted fields that hold a newline. " * 44  # ~3,000 chars, under the spill


def _reads(request: Request) -> list[int]:
    """The note numbers of the Read calls a request carries, in order."""
    return [int(block["input"]["file_path"][-5:-3]) for message in request.messages if message["role"] == "assistant"
            for block in message["content"] if isinstance(block, dict) and block.get("type") == "tool_use"
            and block.get("name") == "Read"]


async def test_a_session_full_of_stale_reads_is_resumed_without_them(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    for n in range(READS):
        (workspace / f"note-{n:02d}.md").write_text(NOTE.format(n=n) + f"MARK-{n:02d}\n")
    # first a background dispatch that never launches (no such agent type): it must not keep refreshes off
    # for the rest of the session, as a worker still running would
    failed = tool_use("Agent", {"description": "x", "prompt": "x", "subagent_type": "no-such-type",
                                "run_in_background": True})
    scripted_api.script([failed] + [tool_use("Read", {"file_path": str(workspace / f"note-{n:02d}.md")})
                                     for n in range(READS)] + [text("all notes read")])
    spec = AgentSpec(name="reader", instructions="Read the notes.", allowed_tools=["Read"])
    runtime = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"),
                      refresh=RefreshPolicy(min_tokens=3_000, share=0.25))
    events: list[Event] = []
    result = await runtime.run(spec, "Read every note.", on_event=events.append)

    assert result.ok, result.error
    assert not result.handoffs and not result.retired  # the same session went on
    # what the resume already dropped is not counted again: one refresh, not one at every later boundary
    assert 1 <= result.refreshes <= 2
    refresh = next(e for e in events if e.kind == "system" and e.payload.get("subtype") == "refresh")
    assert refresh.payload["session_id"] == result.session_id and refresh.payload["stale"] >= 3_000

    requests = scripted_api.main_requests
    after = next(i for i, r in enumerate(requests) if texts.REFRESH_CONTINUE in r.text)
    before, resumed = json.dumps(requests[after - 1].body["messages"]), json.dumps(requests[after].body["messages"])
    # the resumed request continues the recorded history (every Read call is there), but the older results
    # are one line each; the newest six kept their bodies
    assert '"is_error": true' in json.dumps(requests[1].body["messages"][-1])  # the dispatch failed
    made, sent = _reads(requests[after - 1]), _reads(requests[after])
    assert made == list(range(len(made))) and len(made) >= 8
    # the older Reads are one run of expired calls, each alone in its message (the failed dispatch does not
    # end it): all but the last go with their results; that one stays with one line naming the first few
    # removed; the newest six (up to the Read the refresh stopped after) keep their bodies
    assert sent == list(range(len(made) - 6, len(made) + 1))
    shown = [n for n in range(READS) if f"MARK-{n:02d}" in resumed]
    assert shown == sent[1:] and "MARK-00" in before
    assert resumed.count("[flower: expired output of `Read ") == 1
    assert f"; {sent[0]} earlier expired calls before it went with their outputs (Read " in resumed
    assert len(resumed) < len(before) - 3_000 * 4 * 0.8  # smaller by at least about what was judged stale
    # P-3: the store keeps every original body
    stored = await runtime.store.base.load(runtime._key(result.session_id))  # type: ignore[attr-defined]
    assert all(f"MARK-{n:02d}" in json.dumps(stored) for n in made)
    scripted_api.assert_done()
