"""Refreshes through the real CLI (issue #19; P-1, P-3, P-4, S-19): a long main-thread turn whose glance and
Read results went stale is resumed in the same session, and the next request carries them as one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower import texts
from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

READS = 16
NOTE = "Finding {n}: the importer drops quoted fields that hold a newline. " * 44  # ~3,000 chars, under the spill


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
    shown = [n for n in range(READS) if f"MARK-{n:02d}" in resumed]
    called = [n for n in range(READS) if f"note-{n:02d}.md" in resumed]
    assert called == list(range(len(called))) and len(called) >= 8
    assert shown == called[-6:] and "MARK-00" in before
    assert resumed.count("[flower: expired output of `Read ") == len(called) - 6
    assert len(resumed) < len(before) - 3_000 * 4 * 0.8  # smaller by at least about what was judged stale
    # P-3: the store keeps every original body
    stored = await runtime.store.base.load(runtime._key(result.session_id))  # type: ignore[attr-defined]
    assert all(f"MARK-{n:02d}" in json.dumps(stored) for n in called)
    scripted_api.assert_done()
