"""Live cost during a step (issue #18, B-12): each API message is priced as the CLI prices it, the status line
moves before the step ends, workers are named and their cost shown."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from flower.agent.events import Event
from flower.agent.roles import coordinator, worker
from flower.agent.usage import message_cost
from flower.cli.live import LiveView
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, Usage, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def model_of(events: list[Event]) -> str:
    return next(str(e.payload["model"]) for e in events if e.payload.get("model"))


async def test_cost_moves_during_the_step_and_matches_the_clis_total(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script(
        [tool_use("Bash", {"command": "ls"}, usage=Usage(input_tokens=20_000, output_tokens=300)),
         tool_use("Agent", {"description": "count files", "prompt": "SUBX: count", "subagent_type": "counter",
                            "run_in_background": False}, usage=Usage(input_tokens=1_000, cache_read_input_tokens=20_000)),
         text("done", usage=Usage(input_tokens=500, cache_creation_input_tokens=3_000, output_tokens=40))],
        subagents={"SUBX": [tool_use("Bash", {"command": "ls | wc -l"}, usage=Usage(input_tokens=8_000)),
                            text("3 files", usage=Usage(input_tokens=9_000, output_tokens=1_000))]},
    )
    spec = coordinator("lead", "goal", {"counter": worker("counts", "You count.", tools=["Bash"])})
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    out = io.StringIO()
    events: list[Event] = []
    seen: list[float] = []
    with LiveView(threshold=150_000, file=out, live=False) as view:
        def update(event: Event) -> None:
            events.append(event)
            view.update(event)
            if event.kind == "tool_call" and event.on_main:
                seen.append(view.cost + view.pending)

        result = await rt.run(spec, "count", on_event=update)
    assert result.ok
    assert seen[0] > 0 and seen == sorted(seen) and seen[-1] > seen[0]  # moving before any result arrived
    # The pricing is the CLI's own: the usage the fake served, priced here, is the CLI's total to the cent.
    served = [scripted_api.usage(r) or {} for r in scripted_api.requests]
    assert sum(message_cost(model_of(events), u) for u in served) == pytest.approx(result.cost_usd, rel=1e-9)
    # The stream carries each message's input side (output tokens arrive later, and a worker's last message
    # not at all), so the live figure is a floor; the CLI's figure replaces it at each result.
    assert 0 < seen[-1] < result.cost_usd
    assert view.cost == pytest.approx(result.cost_usd) and view.pending == 0
    assert set(view.worker_costs) == {"counter"} and view.worker_costs["counter"] > 0
    text_out = out.getvalue()
    assert "| counter * Bash ls | wc -l" in text_out
    returned = re.search(r"\+ counter: count files returned \(.*, \$(\d+\.\d+) so far for counter\)", text_out)
    assert returned and float(returned.group(1)) == pytest.approx(view.worker_costs["counter"], abs=1e-4)
