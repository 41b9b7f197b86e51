"""Hook inputs shaped exactly as the CLI sends them (docs/sdk-notes.md#hook-inputs), for tests that call
callbacks directly.

Main-thread calls carry no `agent_id`; subagent calls add `agent_id` and `agent_type`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SUBAGENT_ID = "a19c5ae96aadff623"


def hook_input(event: str, tool: str, tool_input: dict[str, Any], cwd: str | Path = "/run/cwd",
               agent: str | None = None, agent_type: str = "worker", **more: Any) -> dict[str, Any]:
    """One hook input; `more` adds event fields such as `tool_response` and `duration_ms`."""
    data: dict[str, Any] = {
        "session_id": "4995d940-f176-4116-b10a-cab50d5a9d18",
        "transcript_path": str(Path(cwd) / "main.jsonl"),
        "cwd": str(cwd),
        "prompt_id": "379d5dd8-a717-432b-97d8-c848bc258606",
        "permission_mode": "default",
        "effort": {"level": "medium"},
    }
    if agent is not None:
        data.update(agent_id=agent, agent_type=agent_type)
    data.update(hook_event_name=event, tool_name=tool, tool_input=tool_input, tool_use_id="toolu_fake001_80c3fb80",
                **more)
    return data
