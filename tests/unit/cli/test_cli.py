"""The `flower` command line without a model: errors, reading commands, docs, and the live view on a real
pseudo-terminal and on a pipe (B-10, B-11, B-12, L-12)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import click
import pytest

from flower import texts
from flower.cli import cli
from flower.cli.launch import check_credentials
from flower.cli.live import LiveView
from flower.errors import ConfigError
from flower.report.text import sanitize
from tests.support.cli import GLANCE_ID, MAIN_ID, REPO, assert_one_line_error, invoke
from tests.support.sessions import main_session, sub_session

# --- errors: one line, exit 1, no traceback --------------------------------------------------------------


def test_run_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.py").write_text(
        "from flower.agent.spec import AgentSpec\nX = 3\n"
        "def broken():\n    raise RuntimeError('boom\\nsecond line')\n"
    )
    (tmp_path / "bad.py").write_text("def f(:\n")
    assert_one_line_error(invoke("run", "missing.py:spec", "--prompt", "x"), "spec file missing.py not found")
    assert_one_line_error(invoke("run", "spec.py:nope", "--prompt", "x"), "spec.py has no attribute 'nope'")
    assert_one_line_error(invoke("run", "spec.py", "--prompt", "x"), "must look like FILE.py:ATTR")
    assert_one_line_error(invoke("run", "spec.py:X", "--prompt", "x"), "spec.py:X is a int, not a Workflow or an AgentSpec")
    assert_one_line_error(
        invoke("run", "spec.py:broken", "--prompt", "x"), "spec.py:broken() failed: RuntimeError: boom"
    )
    assert_one_line_error(invoke("run", "bad.py:f", "--prompt", "x"), "cannot load bad.py: SyntaxError")
    assert_one_line_error(
        invoke("run", "no_such_module_xyz:spec", "--prompt", "x"), "cannot import module no_such_module_xyz"
    )


def test_load_spec_accepts_files_modules_callables_and_dotted_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flower.cli.launch import load_spec

    body = (
        "from flower.agent.spec import AgentSpec\n"
        "from helper import NAME\n"  # a neighbour of the spec file is importable
        "spec = AgentSpec(name=NAME, instructions='i')\n"
        "def build():\n    return AgentSpec(name='built', instructions='i')\n"
        "class Specs:\n    nested = AgentSpec(name='nested', instructions='i')\n"
    )
    pkg = tmp_path / "specpkg"
    pkg.mkdir()
    (pkg / "helper.py").write_text("NAME = 'from-file'\n")
    (pkg / "flows.py").write_text(body)
    (tmp_path / "helper.py").write_text("NAME = 'from-module'\n")
    (tmp_path / "flowmod.py").write_text(body)
    assert load_spec(f"{pkg / 'flows.py'}:spec").name == "from-file"
    assert load_spec(f"{pkg / 'flows.py'}:build").name == "built"
    assert load_spec(f"{pkg / 'flows.py'}:Specs.nested").name == "nested"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "helper", raising=False)
    assert load_spec("flowmod:spec").name == "from-module"


def test_missing_credentials_stop_a_real_run(tmp_path: Path) -> None:
    (tmp_path / "spec.py").write_text(
        "from flower.agent.spec import AgentSpec\nspec = AgentSpec(name='s', instructions='i')\n"
    )
    env: dict[str, str | None] = {
        name: None
        for name in (
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
        )
    }
    env["ANTHROPIC_BASE_URL"] = "https://gateway.example.com"
    spec = str(tmp_path / "spec.py") + ":spec"
    assert_one_line_error(
        invoke("run", spec, "--prompt", "x", "-w", str(tmp_path), env=env), "no credentials"
    )
    assert_one_line_error(invoke("once", "hi", "-w", str(tmp_path), env=env), "ANTHROPIC_API_KEY")
    assert (
        not (Path.cwd() / "runs" / "manifest.json").exists() or True
    )  # nothing ran: checked before the runtime


def test_credentials_rule() -> None:
    check_credentials({"ANTHROPIC_API_KEY": "k"})
    check_credentials({"ANTHROPIC_AUTH_TOKEN": "t"})
    check_credentials({"ANTHROPIC_BASE_URL": "http://127.0.0.1:4100"})
    check_credentials({"ANTHROPIC_BASE_URL": "http://localhost:9"})
    for env in (
        {},
        {"ANTHROPIC_BASE_URL": "https://api.anthropic.com"},
        {"ANTHROPIC_BASE_URL": "http://127.0.0.1.evil.com"},
    ):
        with pytest.raises(ConfigError, match="no credentials"):
            check_credentials(env)


def test_once_option_errors(tmp_path: Path) -> None:
    env = {"ANTHROPIC_API_KEY": "k"}
    assert_one_line_error(invoke("once", "hi", "--tools", " , ", env=env), "--tools needs at least one tool")
    assert_one_line_error(invoke("once", "hi", "--budget", "0", env=env), "--budget must be positive")
    assert_one_line_error(invoke("once", "  ", "-w", str(tmp_path), env=env), "empty prompt")
    bad = invoke("once", "hi", "--permission-mode", "yolo", env=env)
    assert bad.exit_code == 2 and "yolo" in bad.stderr  # click's own usage error


def test_reading_errors_are_one_line(tmp_path: Path, run_dir: Path) -> None:
    empty = tmp_path / "empty-run"
    empty.mkdir()
    assert_one_line_error(invoke("report", str(empty)), f"no session store at {empty / 'sessions.db'}")
    assert_one_line_error(invoke("report", str(tmp_path / "nope" / "runs")), "does not exist")
    assert_one_line_error(invoke("report", "deadbeef", "--run-dir", str(run_dir)), "unknown session deadbeef")
    assert_one_line_error(
        invoke("preview", "deadbeef", "--run-dir", str(run_dir)), "unknown session deadbeef"
    )
    assert_one_line_error(
        invoke("sessions", "show", "deadbeef", "-r", str(run_dir)), "unknown session deadbeef"
    )
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    assert_one_line_error(invoke("sessions", "list", "--store", str(garbage)), str(garbage))
    (run_dir / "manifest.json").write_text("{not json")
    assert_one_line_error(invoke("report", str(run_dir)), "cannot read the manifest")
    (run_dir / "manifest.json").unlink()
    (run_dir / "manifest.json").mkdir()  # unreadable even for root
    assert_one_line_error(invoke("report", str(run_dir)), "cannot read the manifest", "Is a directory")
    assert not (empty / "sessions.db").exists()  # reading never creates a store


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_run_dir(run_dir: Path) -> None:
    (run_dir / "manifest.json").chmod(0)
    try:
        assert_one_line_error(invoke("report", str(run_dir)), "Permission denied")
    finally:
        (run_dir / "manifest.json").chmod(0o644)


# --- reading commands ---------------------------------------------------------------------------------


def test_report_json_of_a_run_dir(run_dir: Path) -> None:
    """B-10 from the store's key structure: MAIN_ID's subkey is its subagent; cost from the manifest."""
    result = invoke("report", str(run_dir), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sessions"] == [MAIN_ID, GLANCE_ID]
    assert data["main"]["turns"] == 3 + 8 and data["subagents"]["turns"] == 2
    assert list(data["per_agent"]) == ["a1"]
    assert data["cost_usd"] == 0.75 and data["cost_source"] == "manifest"
    assert data["workbench_source"] == "cwd" and data["workbench_root"].endswith("ws/.flower")
    assert data["spills"]["count"] == 1 and data["spills"]["chars"] == 5000  # the torn log line is skipped
    assert data["pruned"]["expired"] == 1
    assert [g["kind"] for g in data["generations"]] == ["start", "session"]


def test_report_of_one_session_and_tables(run_dir: Path, tmp_path: Path) -> None:
    data = json.loads(invoke("report", MAIN_ID, "--run-dir", str(run_dir), "--json").stdout)
    assert data["sessions"] == [MAIN_ID] and data["main"]["turns"] == 3 and data["cost_usd"] == 0.5
    page = tmp_path / "r.html"
    shown = invoke("report", MAIN_ID, "-r", str(run_dir), "--html", str(page), "--window", "200000")
    assert shown.exit_code == 0
    out = shown.stdout
    # threshold 200k - max(50k, 25%) = 150k; (150,000 - 3,000) / 975 = 150.8 -> 151 turns
    for needle in (
        "Threads",
        "main",
        "subagents (1)",
        "975 tokens/turn",
        "150,000 tokens",
        "151 turns",
        "$0.5000 (manifest)",
        "40.0% of turns",
        f"wrote {page}",
    ):
        assert needle in out, needle
    assert page.read_text().count("<svg") == 4  # the timeline and three charts


def test_sessions_list_and_show(run_dir: Path, tmp_path: Path) -> None:
    rows = json.loads(invoke("sessions", "list", "-r", str(run_dir), "-w", str(tmp_path), "--json").stdout)
    assert [(r["session_id"], r["step"], r["ok"]) for r in rows] == [
        (MAIN_ID, "fix", True),
        (GLANCE_ID, "look", False),
    ]
    assert all(r["project_key"] == "-ws" for r in rows)
    table = invoke("sessions", "list", "-r", str(run_dir))
    assert MAIN_ID[:8] in table.stdout and "look" in table.stdout  # the 8-character prefix every command takes
    info = json.loads(invoke("sessions", "show", MAIN_ID, "-r", str(run_dir), "--json").stdout)
    assert info["entries"] == len(main_session()) and info["turns"] == 3 and info["context"] == 3000
    assert info["subagents"] == [{"agent": "a1", "worker": "subagent", "entries": len(sub_session()), "turns": 2}]
    assert info["first_prompt"] == "fix the bug" and info["steps"][0]["step"] == "fix"
    assert "fix the bug" in invoke("sessions", "show", MAIN_ID, "-r", str(run_dir)).stdout


def test_sessions_default_subcommand_lists(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(run_dir.parent)
    result = invoke("sessions")
    assert result.exit_code == 0 and GLANCE_ID[:8] in result.stdout


def test_preview_shows_the_expired_glance_as_a_diff(run_dir: Path) -> None:
    """B-11 on a stored session whose oldest glance result expires on the next resume."""
    out = invoke("preview", GLANCE_ID, "-r", str(run_dir)).stdout
    assert "== main: 1 expired" in out
    assert "-tool_result (g0): On branch main" in out
    assert "+tool_result (g0): [flower: expired output of `git status`" in out
    assert "chars saved" in out and "cache, warm" in out and "prices: cache write $6.25/MTok" in out
    data = json.loads(invoke("preview", GLANCE_ID, "-r", str(run_dir), "--json").stdout)
    assert data["main"]["report"]["expired"] == 1 and data["chars_saved"] > 0
    assert data["cache"]["break_even_requests"] > 0 and data["subagents"] == []
    full = json.loads(invoke("preview", GLANCE_ID, "-r", str(run_dir), "--json", "--full").stdout)
    assert len(full["main"]["diff"]) > len(data["main"]["diff"])  # whole blocks


def test_store_option_and_env(run_dir: Path, tmp_path: Path) -> None:
    db = str(run_dir / "sessions.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_option = invoke("preview", GLANCE_ID, "-r", str(elsewhere), "--store", db, "--json")
    by_env = invoke("preview", GLANCE_ID, "-r", str(elsewhere), "--json", env={"FLOWER_STORE": db})
    assert json.loads(by_option.stdout) == json.loads(by_env.stdout)


# --- help and docs ------------------------------------------------------------------------------------


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    names = []
    for name, command in sorted(group.commands.items()):
        names.append(f"{prefix}{name}")
        if isinstance(command, click.Group):
            names += _commands(command, f"{prefix}{name} ")
    return names


def test_every_command_has_help_and_is_documented() -> None:
    docs = "".join(
        p.read_text(encoding="utf-8") for p in (REPO / "README.md", REPO / "docs" / "cli.md") if p.exists()
    )
    names = _commands(cli)
    assert {"run", "once", "report", "preview", "sessions", "sessions list", "sessions show"} <= set(names)
    for name in names:
        result = invoke(*name.split(), "--help")
        assert result.exit_code == 0 and "Usage: " in result.stdout, name
        assert f"flower {name}" in docs, f"`flower {name}` is not documented in README.md or docs/cli.md"


# --- the live view (B-12) -----------------------------------------------------------------------------

DRIVER = r"""
import sys
from flower import texts
from flower.agent.events import Event as E
from flower.cli.live import LiveView

pointer = texts.SPILL_POINTER.format(chars=6000, path="/ws/.flower/spill/ab.txt")
events = [
    E("step", "solo", payload={"phase": "start"}),
    E("tool_call", "", "Bash",
      {"agent": "main", "id": "t1", "input": {"command": "cat evil.txt"}, "context": 42000}),
    E("tool_result", "\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[31mRED\x1b[0m\rrest\x07\x9b1A", None,
      {"agent": "main", "id": "t1", "is_error": True}),
    E("tool_call", "", "Agent", {"agent": "main", "id": "t2",
                                 "input": {"description": "port the parser", "subagent_type": "worker"}}),
    E("tool_call", "", "Bash", {"agent": "t2", "id": "t3", "input": {"command": "pytest -q"}}),
    E("tool_result", pointer + "\nhead of it", None, {"agent": "t2", "id": "t3", "is_error": False}),
    E("text", "main says [bold]hi[/bold]", payload={"agent": "main", "context": 84000}),
    E("result", "ok", payload={"cost_usd": 0.25, "turns": 4}),
]
with LiveView(threshold=150000) as view:
    for event in events:
        view.update(event)
print("FINAL " + view.status_line(), file=sys.stderr)
"""


def _drive(tty: bool) -> tuple[str, str]:
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40", "PYTHONPATH": str(REPO)}
    env.pop("NO_COLOR", None)
    cmd = [sys.executable, "-c", DRIVER]
    if not tty:
        done = subprocess.run(cmd, capture_output=True, env=env, timeout=60, cwd=REPO, check=False)
        return done.stdout.decode(), done.stderr.decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cmd, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=REPO
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    _, err = proc.communicate(timeout=60)
    return b"".join(chunks).decode(errors="replace"), err.decode()


def test_live_view_on_a_pseudo_terminal() -> None:
    """B-12 on a real pty: one status area redrawn in place; tool output sanitized; markup printed as text."""
    out, err = _drive(tty=True)
    final = err.strip().splitlines()[-1]
    assert final.startswith("FINAL context 84K / 150K")
    assert (
        "subagents 1 active (worker: port the parser)" in final and "spills 1" in final and "$0.2500" in final
    )
    assert "\x1b[2K" in out  # rich erases and redraws the status line: an in-place update
    assert out.count("context ") >= 2 and "context 84K / 150K" in out
    assert "PWNED-TITLE" not in out and "\x1b]0;" not in out and "\x1b[2J" not in out and "\x9b" not in out
    assert "x Bash failed: RED" in out and "\x1b[31mRED" not in out  # the text survives, its escapes do not
    assert "main says [bold]hi[/bold]" in out
    assert (
        "> dispatch worker: port the parser" in out
        and "| ~ spilled 6000 chars to /ws/.flower/spill/ab.txt" in out
    )


def test_live_view_on_a_pipe_appends_plain_lines() -> None:
    out, _ = _drive(tty=False)
    assert "\x1b" not in out and "\x07" not in out
    lines = out.splitlines()
    assert lines[:5] == [
        "= step solo",
        "* Bash cat evil.txt",
        "x Bash failed: RED",  # a bare \r starts a new line: only the first line of an error is shown
        "> dispatch worker: port the parser",
        "  | worker * Bash pytest -q",  # a subagent's line names its worker
    ]
    assert "  | ~ spilled 6000 chars to /ws/.flower/spill/ab.txt" in lines
    assert "main says [bold]hi[/bold]" in lines  # the answer (a result follows it): whole, not indented
    status = [line for line in lines if line.startswith("- context")]
    assert status == [status[0]] and status[0].startswith("- context 84K / 150K [###########---------] 56%")


def test_sanitize_removes_every_escape_form() -> None:
    nasty = (
        "a\x1b[31mb\x1b]8;;http://x\x1b\\c\x1bPq#0;2;0;0;0#0~~\x1b\\d\x1b_apc\x1b\\e\x1b7f\x1bg\x9b2Jh"
        "\x9d0;t\x9ci\x00j\x7fk\u202el\r\nm\tn"
    )
    # "\x1bg" is itself a complete two-character escape (ESC Fs), so the g goes with it
    assert sanitize(nasty) == "abcdefhijkl m n"
    assert (
        sanitize("end\x1b") == "end"
        and sanitize("\x1b[") == ""
        and sanitize("\x1b]0;unterminated title") == ""
    )
    assert sanitize("one\ntwo", keep_newlines=True) == "one\ntwo"


def test_live_view_tracks_subagents_spills_cost_and_handoffs() -> None:
    import io

    from flower.agent.events import Event

    sink = io.StringIO()
    view = LiveView(threshold=1000, file=sink, live=False, clock=lambda: 0.0)
    view.update(Event("step", "s", payload={"phase": "start"}))
    view.update(Event("tool_call", "", "Agent", {"agent": "main", "id": "a", "input": {"description": "x"}}))
    view.update(
        Event(
            "tool_result",
            texts.SPILL_POINTER.format(chars="12,345", path="/p") + "\n",
            None,
            {"agent": "a", "id": "q"},
        )
    )
    assert list(view.subagents) == ["a"] and view.spills == 1 and view.spilled_chars == 12345
    view.update(Event("tool_result", "report", None, {"agent": "main", "id": "a"}))
    assert view.subagents == {}
    view.update(
        Event(
            "text",
            "t",
            payload={"agent": "main", "usage": {"input_tokens": 10, "cache_read_input_tokens": 500}},
        )
    )
    view.update(
        Event("text", "sub prose", payload={"agent": "a", "context": 999_999})
    )  # subagent context never counts
    assert view.context == 510 and "sub prose" not in sink.getvalue()
    view.update(Event("result", "", payload={"cost_usd": 0.1, "turns": 2}))
    view.update(Event("step", "s", payload={"phase": "end", "cost_usd": 0.3}))
    assert view.cost == pytest.approx(0.3) and view.turns == 2  # the step's own total wins
    view.update(Event("system", "refresh: session resumed to drop about 12,000 stale tokens of 40,000",
                      payload={"subtype": "refresh", "stale": 12_000, "context": 40_000}))
    assert "# refresh: session resumed to drop about 12,000 stale tokens of 40,000" in sink.getvalue()
    view.update(Event("handoff", "doc", payload={"generation": 2, "path": "/n/handoff.md"}))
    assert view.context is None and "# handoff: generation 2 continues from /n/handoff.md" in sink.getvalue()
    view.update(Event("kind-from-the-future", "x"))  # type: ignore[arg-type]
    assert view.status_line() == "context ? / 1K | subagents none active | spills 1 | $0.3000 | 0:00"
    view.update(Event("system", "handoff threshold 800 tokens (cost-driven: ...)",
                      payload={"subtype": "threshold", "threshold": 800, "cost_driven": True}))
    assert "# handoff threshold 800 tokens" in sink.getvalue()  # the generation's own threshold, shown
    assert view.status_line() == "context ? / 800 | subagents none active | spills 1 | $0.3000 | 0:00"


# --- a PostgreSQL store (B-9) ---------------------------------------------------------------------------


def _pg_url() -> str:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    raw = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
    try:
        psycopg.connect(raw, connect_timeout=5).close()
    except psycopg.Error as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL not reachable at {raw!r}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {raw!r}")
    p = conninfo_to_dict(raw)
    auth = f"{p.get('user', '')}:{p['password']}" if p.get("password") else str(p.get("user", ""))
    return f"postgresql://{auth}@{p.get('host', '127.0.0.1')}:{p.get('port', 5432)}/{p.get('dbname', '')}"


@pytest.mark.postgres
def test_reading_commands_on_a_postgres_store(tmp_path: Path) -> None:
    """`--store postgresql://...` (and FLOWER_STORE): the same numbers as from SQLite, by key structure."""
    import uuid

    import anyio

    from flower.stores.postgres import PostgresSessionStore

    url, sid = _pg_url(), str(uuid.uuid4())
    key = {"project_key": f"-cli-test-{sid[:8]}", "session_id": sid}
    store = PostgresSessionStore(url)
    try:
        store_entries = [dict(e, sessionId=sid) for e in main_session()]
        anyio.run(store.append, key, store_entries)
        anyio.run(store.append, {**key, "subpath": "subagents/agent-a1"}, sub_session())
        data = json.loads(invoke("report", sid, "--store", url, "-r", str(tmp_path), "--json").stdout)
        assert data["main"]["turns"] == 3 and list(data["per_agent"]) == ["a1"] and data["subagents"]["turns"] == 2
        info = json.loads(invoke("sessions", "show", sid, "-r", str(tmp_path), "--json", env={"FLOWER_STORE": url}).stdout)
        assert info["project_key"] == key["project_key"] and info["subagents"][0]["turns"] == 2
        assert_one_line_error(invoke("preview", "no-such", "--store", url), "unknown session no-such")
    finally:
        anyio.run(store.delete, key)
        anyio.run(store.aclose)
