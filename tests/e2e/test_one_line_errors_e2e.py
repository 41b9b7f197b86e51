"""Error paths that printed a traceback are one line, and nothing stored is changed (issue #26 item 9).

Each command runs as its own process (`python -m flower ...`), as a user would run it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flower.human.mailbox import open_mailbox
from flower.testing import ScriptedAPI, text

pytestmark = pytest.mark.e2e


def flower(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def one_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("flower: "), done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr
    return done.stderr


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_flower_say_and_answer_with_bytes_that_are_not_utf8_are_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    mailbox = open_mailbox(runs)
    mailbox.post("run-1", "question", "Which port?", ref="q1")
    mailbox.close()
    before = digest(runs / "human.db")
    one_line(flower("say", str(runs), b"caf\xe9 at noon", cwd=tmp_path), "not valid UTF-8", r"b'\xe9'")
    one_line(flower("answer", str(runs), "q1", b"\xff\xfe", cwd=tmp_path), "the answer is not valid UTF-8")
    assert digest(runs / "human.db") == before


def test_a_human_db_of_another_program_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    with sqlite3.connect(runs / "human.db") as db:
        db.execute("CREATE TABLE contacts (name TEXT)")
        db.execute("INSERT INTO contacts VALUES ('Ada')")
    db.close()
    before = digest(runs / "human.db")
    for command in (["say", str(runs), "hello"], ["asks", str(runs)], ["answer", str(runs), "yes"]):
        one_line(flower(*command, cwd=tmp_path), "human.db is an SQLite database of something else",
                 "tables: contacts", "refusing")
    assert digest(runs / "human.db") == before
    with sqlite3.connect(runs / "human.db") as db:
        assert [name for (name,) in db.execute("SELECT name FROM sqlite_master")] == ["contacts"]
    db.close()


def test_flower_runs_on_an_empty_system_database_says_there_are_no_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "dbos.sqlite").touch()
    done = flower("runs", "-r", str(runs), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"no workflow runs in {runs.resolve()}\n"


LOSE_THE_WAL = """
import shutil, sys
from pathlib import Path
from flower.flow import engine

live, copy = Path(sys.argv[1]), Path(sys.argv[2])
engine.launch(live)  # DBOS creates its tables; they sit in the WAL until a checkpoint
copy.mkdir()
shutil.copy(live / "dbos.sqlite", copy / "dbos.sqlite")  # the WAL stays behind: lost
engine.destroy()
"""


def test_flower_runs_on_a_system_database_whose_wal_is_gone_says_there_are_no_runs(tmp_path: Path) -> None:
    made = subprocess.run([sys.executable, "-c", LOSE_THE_WAL, str(tmp_path / "live"), str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert not (tmp_path / "runs" / "dbos.sqlite-wal").exists()
    done = flower("runs", "-r", str(tmp_path / "runs"), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("no workflow runs in ")


def test_flower_runs_on_a_damaged_system_database_is_one_line(tmp_path: Path) -> None:
    """Tables there, a page of workflow_status trashed: the reading command names the database."""
    runs = tmp_path / "runs"
    made = subprocess.run([sys.executable, "-c", LOSE_THE_WAL, str(tmp_path / "live"), str(runs)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    live = tmp_path / "live" / "dbos.sqlite"
    with sqlite3.connect(live) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        roots = [r for (r,) in db.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = 'workflow_status'")]
    db.close()
    data = bytearray(live.read_bytes())
    for root in roots:  # the table and its indexes: any query of the runs meets a trashed page
        data[(root - 1) * 4096:root * 4096] = b"\xde\xad" * 2048
    (runs / "dbos.sqlite").write_bytes(bytes(data))
    one_line(flower("runs", "-r", str(runs), cwd=tmp_path), "dbos.sqlite")


FLOW = """\
from flower import AgentSpec, Step, Workflow

good = Workflow([Step("a", AgentSpec(name="agent", instructions="You answer."), "first")], name="good")
"""


@pytest.mark.postgres
def test_a_store_dsn_naming_a_database_that_does_not_exist_is_refused_not_created(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    import os
    import secrets

    import psycopg

    admin = os.environ.get("FLOWER_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        psycopg.connect(admin, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL unreachable at {admin}: {exc}")
    typo = f"flower_tset_{secrets.token_hex(3)}"  # "test", mistyped
    dsn = admin.rsplit("/", 1)[0] + "/" + typo
    (tmp_path / "flows.py").write_text(FLOW)
    (tmp_path / "ws").mkdir()
    env = {**scripted_api.cli_env(tmp_path / "home"), "PATH": os.environ["PATH"]}
    done = subprocess.run([sys.executable, "-m", "flower", "run", f"{tmp_path / 'flows.py'}:good", "-w",
                           str(tmp_path / "ws"), "-r", str(tmp_path / "runs"), "--store", dsn], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    one_line(done, f"PostgreSQL database '{typo}' does not exist", "createdb")
    try:
        with psycopg.connect(admin) as conn:
            assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (typo,)).fetchall() == []
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{typo}" WITH (FORCE)')
    assert scripted_api.requests == []


TWO_STEPS = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You answer.")
good = Workflow([Step("a", spec, "first"), Step("b", spec, "second")], name="good")
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """A real filesystem of a given size (tmpfs, needs root); unmounted afterwards."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        where = tmp_path / f"disk-{size}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", str(where)], check=False)


def test_a_full_disk_in_the_run_dir_is_one_line_wherever_the_run_meets_it(
    tmp_path: Path, small_disk: Callable[[str], Path]
) -> None:
    """The run dir on disks of 300 KB to 1.4 MB: the disk fills while DBOS starts, while the store mirrors the
    transcript, while the manifest is written or while DBOS checkpoints a step; each time one line."""
    import os

    (tmp_path / "flows.py").write_text(TWO_STEPS)
    (tmp_path / "ws").mkdir()
    for size in ("300k", "700k", "1000k", "1400k"):
        api = ScriptedAPI().start()  # one per disk: how many steps a run uses before the disk fills varies
        try:
            api.script([text("a long answer " * 20000), text("second " * 20000)])
            env = {**api.cli_env(tmp_path / "home"), "PATH": os.environ["PATH"]}
            runs = small_disk(size) / "runs"
            done = subprocess.run([sys.executable, "-m", "flower", "run", f"{tmp_path / 'flows.py'}:good", "-w",
                                   str(tmp_path / "ws"), "-r", str(runs)], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        finally:
            api.stop()
        # The SDK's own mirror says once per lost batch that the store refused it; flower's line is the last.
        ours = [line for line in done.stderr.splitlines() if not line.startswith("[TranscriptMirrorBatcher]")]
        assert "Traceback" not in done.stderr and len(ours) == 1, (size, done.stderr[-3000:])
        assert done.returncode == 1 and ours[0].startswith("flower: "), (size, done.stderr)
        assert ours[0].endswith(": free some space, then run the same command again"), (size, ours[0])


def test_a_store_with_bytes_rotted_inside_a_page_is_refused_before_anything_is_appended(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    """A real run's store, two bytes of a stored reply changed on disk (SQLite's quick_check still says ok):
    the next run that would append to it, and the reading commands, refuse it in one line."""
    import os

    ws, runs = tmp_path / "ws", tmp_path / "runs"
    ws.mkdir()
    env = {**scripted_api.cli_env(tmp_path / "home"), "PATH": os.environ["PATH"]}

    def once(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "flower", "once", *args, "-w", str(ws), "-r", str(runs)],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
                              stdin=subprocess.DEVNULL)

    scripted_api.script([text("PAINTED " + "z" * 3000)])
    assert once("paint the shed").returncode == 0
    store = runs / "sessions.db"
    with sqlite3.connect(store) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (session,) = db.execute("SELECT DISTINCT session_id FROM transcripts WHERE subpath = ''").fetchone()
    db.close()
    data = bytearray(store.read_bytes())
    at = data.find(b"z" * 2000)
    assert at > 0
    data[at + 1000:at + 1002] = b"yy"  # inside a page, inside the reply's text: valid UTF-8, valid JSON
    store.write_bytes(bytes(data))
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    db.close()
    before, asked = digest(store), len(scripted_api.requests)
    one_line(once("--resume", session, "paint it again"), "sessions.db is corrupted", "does not match its checksum")
    one_line(flower("sessions", "-r", str(runs), cwd=tmp_path), "sessions.db is corrupted")
    assert digest(store) == before and len(scripted_api.requests) == asked


def test_leaving_the_parallel_steps_to_workers_without_a_fleet_is_one_line_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "flow.py").write_text(
        "from flower import AgentSpec, Step, Workflow\n"
        "spec = AgentSpec(name='a', instructions='x')\n"
        "wf = Workflow([Step('each', spec, 'on {item}', over=['a', 'b'])], name='wf')\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing may be asked of a model
    runs = tmp_path / "runs"
    one_line(flower("run", "flow.py:wf", "-r", str(runs), "--on-workers", cwd=tmp_path),
             "leaving the parallel steps to workers needs a fleet's PostgreSQL --store")
    assert not (runs / "dbos.sqlite").exists()


def test_leaving_a_session_resume_to_workers_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An AgentSpec's `--resume`/`-c` runs no workflow: `--on-workers` would be dropped silently there."""
    (tmp_path / "spec.py").write_text("from flower import AgentSpec\nspec = AgentSpec(name='a', instructions='x')\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    one_line(flower("run", "spec.py:spec", "-p", "go on", "--resume", "0123abcd", "--on-workers", cwd=tmp_path),
             "--on-workers leaves a workflow's parallel steps to workers")
