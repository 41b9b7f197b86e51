"""Bad input to the workflow commands is one clear line each, and nothing stored changes (issue #13, L-6, L-7)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flower.cli import cli
from flower.flow import engine
from flower.testing import ScriptedAPI, text

pytestmark = [pytest.mark.e2e]

FLOWS = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You answer.", allowed_tools=["Read"])

def boom(ctx):
    raise ValueError("no such key: plan")

def dup():
    return Workflow([Step("a", spec, "x"), Step("a", spec, "y")], name="dup")

raising_when = Workflow([Step("a", spec, "x", when=boom)], name="raising-when")
gate_not_bool = Workflow([Step("a", spec, "GATE-STEP", gate=lambda r, ctx: "yes")], name="gate-not-bool")
good = Workflow([Step("a", spec, "first"), Step("b", spec, "second")], name="good")
number = 42
"""


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    yield
    if engine.current() is not None:
        engine.destroy()


def invoke(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def one_line(result: Result, needle: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flower: ") and needle in lines[0], result.stderr
    assert "Traceback" not in result.output


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix not in (".lock",)}


def test_bad_input_is_one_clear_line_each(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    (tmp_path / "flows.py").write_text(FLOWS)
    env = scripted_api.cli_env(tmp_path / "home")
    ws, runs = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    target = f"{tmp_path / 'flows.py'}"
    common = ("-w", str(ws), "-r", str(runs))

    one_line(invoke(env, "run", f"{target}:dup", *common), "workflow dup has two steps named a")
    one_line(invoke(env, "run", f"{target}:number", *common),
             "flows.py:number is a int, not a Workflow or an AgentSpec (or a callable returning one)")
    assert not runs.exists()  # nothing was created for a workflow that never started

    one_line(invoke(env, "run", f"{target}:raising_when", *common),
             "step a: when raised ValueError: no such key: plan")
    assert scripted_api.requests == []  # no agent ran
    scripted_api.script([text("an answer")])
    one_line(invoke(env, "run", f"{target}:gate_not_bool", *common), "step a: gate returned str 'yes', not a bool")

    one_line(invoke(env, "run", f"{target}:good", *common, "--store", "postgresql://postgres@127.0.0.1:1/flow_x"),
             "127.0.0.1:1")

    other = tmp_path / "other-runs"
    other.mkdir()
    with sqlite3.connect(other / "dbos.sqlite") as db:
        db.execute("create table invoices (id integer primary key, total real)")
        db.execute("insert into invoices (total) values (12.5)")
    before = digest(other)
    one_line(invoke(env, "run", f"{target}:good", "-w", str(ws), "-r", str(other)),
             "dbos.sqlite belongs to another application (tables: invoices)")
    one_line(invoke(env, "runs", "-r", str(other)), "belongs to another application")
    assert digest(other) == {**before, **{k: v for k, v in digest(other).items() if k not in before}}
    assert (other / "dbos.sqlite").read_bytes() and hashlib.sha256((other / "dbos.sqlite").read_bytes()
                                                                   ).hexdigest() == before["dbos.sqlite"]

    one_line(invoke(env, "resume", "no-such-run", "-r", str(runs)), "unknown run no-such-run")
    one_line(invoke(env, "worker", "--store", str(tmp_path / "x.db")), "flower worker needs a PostgreSQL --store")
    listed = json.loads(invoke(env, "runs", "-r", str(runs), "--json").stdout)
    assert [(r["workflow"], r["state"]) for r in listed] == [("raising-when", "failed"), ("gate-not-bool", "failed")]
    one_line(invoke(env, "cancel", listed[0]["run_id"], "-r", str(runs)), "has already ended (failed)")
