"""The command line driven in-process, and a run dir written the way the runtime writes one, for the tests of
the reading commands (report, preview, sessions, config)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from flower.cli import cli
from flower.stores.sqlite import SqliteSessionStore
from tests.support.sessions import glance_session, main_session, sub_session

REPO = Path(__file__).resolve().parents[2]
MAIN_ID = "11111111-1111-4111-8111-111111111111"
GLANCE_ID = "22222222-2222-4222-8222-222222222222"


def invoke(*args: str, env: dict[str, str | None] | None = None, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=input, catch_exceptions=False)


def assert_one_line_error(result: Result, *needles: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flower: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def write_run_dir(tmp_path: Path) -> Path:
    """A run dir written the way the runtime writes one: a store keyed by project/session/subpath, a manifest,
    and a workbench whose location is known only from the entries' cwd."""
    ws = tmp_path / "ws"
    (ws / ".flower" / "spill").mkdir(parents=True)
    (ws / ".flower" / "spill" / "log.jsonl").write_text(
        json.dumps(
            {
                "hash": "h",
                "tool": "Bash",
                "field": "stdout",
                "chars": 5000,
                "agent": "a1",
                "tool_use_id": "t4",
            }
        )
        + "\n{torn line\n",
        encoding="utf-8",
    )
    runs = tmp_path / "runs"
    runs.mkdir()
    with SqliteSessionStore(runs / "sessions.db") as store:
        key = {"project_key": "-ws", "session_id": MAIN_ID}
        store.append_sync(key, [dict(e, cwd=str(ws)) for e in main_session()])
        store.append_sync({**key, "subpath": "subagents/agent-a1"}, sub_session())
        store.append_sync({"project_key": "-ws", "session_id": GLANCE_ID}, glance_session().entries)
    steps = [
        {"run_id": "r1", "step": "fix", "session_id": MAIN_ID, "ok": True, "cost_usd": 0.5, "retired": []},
        {
            "run_id": "r1",
            "step": "look",
            "session_id": GLANCE_ID,
            "ok": False,
            "cost_usd": 0.25,
            "retired": [],
        },
    ]
    (runs / "manifest.json").write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return runs
