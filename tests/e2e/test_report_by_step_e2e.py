"""`flower report --by step` adds up for a parallel fan-out run through the real CLI (issue #28 item 6).

Three fan-out items run at once on the scripted model: item i makes i + 1 API messages (i slow Bash calls,
then its answer), so their sessions overlap in time. Each item gets its own row with its own count, and the
rows sum to the total, which is every request the fake served.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flower.testing import Request, ScriptedAPI, Step, text, tool_use

pytestmark = pytest.mark.e2e

FLOW = """\
from flower import AgentSpec, Step, Workflow

counter = AgentSpec(name="counter", instructions="You count.", allowed_tools=["Bash"])
flow = Workflow([Step("fan", counter, "Count to ITEM-{item}.", over=lambda ctx: [0, 1, 2])], name="fan")
"""


def count_up(request: Request) -> Step:
    """Item i: i Bash calls that take a while, then its answer (the replies so far say where it is)."""
    item = int(request.text.split("ITEM-", 1)[1][0])
    done = sum(1 for m in request.messages if m.get("role") == "assistant")
    if done < item:
        return tool_use("Bash", {"command": f"sleep 0.7; echo {item}-{done}"})
    return text(f"item {item} counted")


def flower(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, env={**env, "COLUMNS": "80"},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)


def test_each_fan_out_item_has_its_own_row_and_the_rows_sum_to_the_total(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.handler = count_up
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    ran = flower(env, workspace, "run", f"{tmp_path / 'flow.py'}:flow")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(scripted_api.main_requests) == 6

    shown = flower(env, workspace, "report", "runs", "--by", "step", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    rows = {row["step"]: row["messages"] for row in data["rows"]}
    assert rows == {"fan[0]": 1, "fan[1]": 2, "fan[2]": 3}
    for key in ("messages", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens"):
        assert sum(row[key] for row in data["rows"]) == data["total"][key], key
    assert sum(row["cost_usd"] for row in data["rows"]) == pytest.approx(data["total"]["cost_usd"], abs=1e-5)
    assert data["total"]["messages"] == len(scripted_api.requests)

    table = flower(env, workspace, "report", "runs", "--by", "step").stdout
    assert [line.split()[0] for line in table.splitlines() if line.startswith(("fan", "total"))] == \
        ["fan[0]", "fan[1]", "fan[2]", "total"]
