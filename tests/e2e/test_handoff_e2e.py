"""A person hands a long run over from another terminal: `flower handoff RUN --goal TEXT` (issue #27).

The letter goes through the run's mailbox; the run's human channel takes it at the next main-thread tool
boundary and the session writes its handoff for that focus, far below any threshold.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flower.agent.events import Event
from flower.agent.roles import coordinator, worker
from flower.human.channel import HumanChannel
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, Usage, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

DOC = "## Doing\nSurveying the parser.\n## Next\n1. Port the lexer.\n"


async def test_flower_handoff_from_another_process_hands_over_with_its_focus(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([
        tool_use("Bash", {"command": "ls"}, usage=Usage(input_tokens=6_000)), text(DOC),
        text("done", usage=Usage(input_tokens=6_500)),
    ])
    runs = tmp_path / "runs"
    lead = coordinator("lead", "Goal: survey.", {"hands": worker("does the work", "You work.")},
                       channel=HumanChannel(timeout_s=5))
    rt = Runtime(workspace, run_dir=runs, env=scripted_api.cli_env(tmp_path / "home"),
                 handoff=HandoffPolicy(window=1_000_000))
    said: list[str] = []

    def on_event(event: Event) -> None:
        if event.kind == "tool_call" and not said:
            asked = subprocess.run([sys.executable, "-m", "flower", "handoff", str(runs), "--goal",
                                    "port the lexer next"], capture_output=True, text=True, timeout=60)
            said.append(asked.stdout + asked.stderr)

    result = await rt.run(lead, "Survey the parser.", on_event=on_event)
    assert said and said[0].startswith(f"asked {runs} to hand over at its next tool boundary"), said
    assert result.ok and result.text == "done", result.error
    assert len(result.handoffs) == 1
    asked = scripted_api.main_requests[1].text
    assert "## Doing" in asked and "port the lexer next" in asked
