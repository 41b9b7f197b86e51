"""What refreshes and handoffs pay to write the cache again, through the real CLI (issue #27, P-4): each
is priced by its first request as the API answered it, recorded in the manifest, and `flower report` shows
per generation what the refreshes wrote, cost and saved."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from flower import texts
from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.agent.usage import message_cost
from flower.runtime.economics import Prices, request_cost
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, Usage, text, tool_use
from tests.support.cli import invoke

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

NOTE = "Finding {n}: the importer drops quoted fields that hold a newline. " * 44  # ~3,000 chars, under the spill
NOTES = 24
DOC = "## Doing\nPorting the parser.\n## Next\n1. Finish the lexer.\n"


def _costs(events: list[Event]) -> list[dict[str, Any]]:
    """The `cache_cost` events' payloads, without their subtype (as the step's result records them)."""
    return [{k: v for k, v in e.payload.items() if k != "subtype"} for e in events
            if e.kind == "system" and e.payload.get("subtype") == "cache_cost"]


def _context(usage: dict[str, int]) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


async def test_a_refresh_is_priced_by_its_first_request_and_the_report_says_what_it_saved(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    for n in range(NOTES):
        (workspace / f"note-{n:02d}.md").write_text(NOTE.format(n=n) + f"MARK-{n:02d}\n")
    scripted_api.script([tool_use("Read", {"file_path": str(workspace / f"note-{n:02d}.md")}) for n in range(NOTES)]
                        + [text("all notes read")])
    spec = AgentSpec(name="reader", instructions="Read the notes.", allowed_tools=["Read"])
    runs = tmp_path / "runs"
    runtime = Runtime(workspace, run_dir=runs, env=scripted_api.cli_env(tmp_path / "home"),
                      refresh=RefreshPolicy(min_tokens=3_000, share=0.25))
    events: list[Event] = []
    result = await runtime.run(spec, "Read every note.", on_event=events.append)
    assert result.ok and result.refreshes >= 1, result.error

    requests = scripted_api.main_requests
    first = next(i for i, r in enumerate(requests) if texts.REFRESH_CONTINUE in r.text)
    served, before = scripted_api.usage(requests[first]), scripted_api.usage(requests[first - 1])
    assert served is not None and before is not None
    cost = _costs(events)[0]
    assert cost["kind"] == "refresh" and cost["session_id"] == result.session_id
    assert cost["cache_write"] == served["cache_creation_input_tokens"] > 0
    assert cost["cache_read"] == served["cache_read_input_tokens"]
    assert cost["before"] == _context(before) and cost["context"] == _context(served) < _context(before)
    model = scripted_api.model
    assert cost["priced"] == round(request_cost(served, Prices.of(model)))
    assert cost["usd"] == pytest.approx(message_cost(model, {**served, "output_tokens": 0}), abs=1e-6)
    assert len(_costs(events)) == result.refreshes and list(result.cache_costs) == _costs(events)
    (row,) = json.loads((runs / "manifest.json").read_text())["steps"]
    assert row["cache_costs"] == _costs(events)

    report = json.loads((await anyio.to_thread.run_sync(invoke, "report", str(runs), "--json")).stdout)
    (generation,) = report["generations"]
    assert generation["refreshes"] == result.refreshes
    assert generation["refresh_write"] == sum(c["cache_write"] for c in _costs(events))
    # saved: each request from the second after the refresh on read the dropped tokens less (0.1x), minus
    # what the first one paid above reading its whole unrefreshed context from the cache
    # saved: each request after a refresh's first one read the dropped tokens less (at the model's cache-read
    # price), less what that first one paid above reading its whole unrefreshed context from the cache
    read = Prices.of(model).read
    firsts = [i for i, r in enumerate(requests) if texts.REFRESH_CONTINUE in r.last_user_text()]
    assert len(firsts) == result.refreshes and len(requests) - firsts[0] >= 5  # it had later requests to save on
    saved = 0.0
    for index, record in zip(firsts, _costs(events), strict=True):
        was, now = (_context(scripted_api.usage(requests[i]) or {}) for i in (index - 1, index))
        assert (record["before"], record["context"]) == (was, now)
        saved += read * (was - now) * (len(requests) - index - 1) - (record["priced"] - read * was)
    assert generation["refresh_saved"] == round(saved)
    shown = (await anyio.to_thread.run_sync(partial(invoke, "report", str(runs), env={"COLUMNS": "250"}))).stdout
    assert (f"{result.refreshes} refreshes wrote {generation['refresh_write']:,} (priced "
            f"{generation['refresh_priced']:,}) and saved {generation['refresh_saved']:,} net") in shown, shown


async def test_a_handoff_says_what_its_round_cost_and_the_new_generation_what_its_first_request_wrote(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    round_usage = Usage(input_tokens=10, cache_read_input_tokens=6_000, cache_creation_input_tokens=200,
                        output_tokens=300)
    scripted_api.script([
        tool_use("Bash", {"command": "echo work"}, usage=Usage(input_tokens=6_000)),
        text(DOC, usage=round_usage),
        text("done", usage=Usage(input_tokens=3, cache_read_input_tokens=4_000, cache_creation_input_tokens=2_500)),
    ])
    runtime = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"),
                      handoff=HandoffPolicy(window=1_000_000))
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if event.kind == "tool_call" and not any(e.kind == "handoff" for e in events):
            runtime.handoff("finish the lexer first")

    result = await runtime.run(AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash"]),
                               "port the parser", on_event=on_event)
    assert result.ok and result.text == "done" and len(result.retired) == 1, result.error
    (handoff,) = [e.payload for e in events if e.kind == "handoff"]
    assert handoff["cache_write"] == 200 and handoff["context"] == 6_000
    prices = Prices.of(scripted_api.model)
    assert handoff["priced"] == round(10 + prices.read * 6_000 + prices.write * 200 + prices.output * 300)
    (cost,) = _costs(events)
    assert cost["kind"] == "handoff" and cost["retired"] == result.retired[0]
    assert cost["session_id"] == result.session_id != result.retired[0]
    assert (cost["cache_write"], cost["cache_read"], cost["input"]) == (2_500, 4_000, 3)
    assert cost["priced"] == round(3 + prices.read * 4_000 + prices.write * 2_500) and cost["before"] == 6_000
