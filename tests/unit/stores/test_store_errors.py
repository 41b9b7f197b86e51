"""The stores' error paths: a stored row that is not JSON, an append of a non-object (issue #16 item 12, S-18, B-9).

Stored data is never changed; each failure is one `FlowerError` naming store, session and row, and the
reading commands print it as one line.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flower.errors import StoredDataError, StoreError
from flower.stores.rewrite import RewritingSessionStore
from flower.stores.sqlite import SqliteSessionStore
from tests.support.cli import MAIN_ID, assert_one_line_error, invoke

KEY = {"project_key": "-p", "session_id": "s1"}


def entries(n: int) -> list[dict]:
    return [{"type": "user" if i % 2 else "assistant", "uuid": f"u{i}", "message": {"content": f"m{i}"}}
            for i in range(n)]


def break_row(db: Path, seq: int, payload: str = '{"type": "user", "uuid": "torn') -> None:
    """A row as another program (or a flower before entry checksums) may write it: no checksum, so the open
    check lets it through and reading it back meets it."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET payload = ?, crc = NULL WHERE seq = ?", (payload, seq))


def test_a_non_json_row_names_store_session_and_row_and_stays_as_stored(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteSessionStore(db) as store:
        store.append_sync(KEY, entries(4))
    break_row(db, 3)
    with SqliteSessionStore(db) as store, pytest.raises(StoredDataError) as caught:
        store.load_sync(KEY)
    message = str(caught.value)
    assert "\n" not in message and str(db) in message and "-p/s1" in message and "row 3" in message
    with sqlite3.connect(db) as conn:  # stored data never changed
        assert conn.execute("SELECT payload FROM entries WHERE seq = 3").fetchone()[0].endswith('"torn')
    assert isinstance(caught.value, StoreError)


def test_the_rewriting_wrapper_and_last_context_raise_the_same_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SqliteSessionStore(db) as store:
        store.append_sync(KEY, entries(4))
    break_row(db, 1, "\x00not json")
    with RewritingSessionStore(SqliteSessionStore(db), workspace=tmp_path) as store:
        with pytest.raises(StoredDataError, match="row 1"):
            store.load_sync(KEY)
        with pytest.raises(StoredDataError, match="row 1"):
            store.last_context(KEY)


@pytest.mark.parametrize("bad", [42, "text", None, ["a"], {"type": "user", "x": {1, 2}}])
def test_append_of_a_non_object_is_one_error_and_nothing_is_appended(tmp_path: Path, bad: object) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store:
        with pytest.raises(StoreError, match="entry 1 .*nothing appended") as caught:
            store.append_sync(KEY, [entries(1)[0], bad])  # type: ignore[list-item]
        assert "\n" not in str(caught.value)
        assert store.load_sync(KEY) is None  # not half a batch


@pytest.mark.parametrize(
    "command",
    [
        ("report", "{runs}"),
        ("report", MAIN_ID, "-r", "{runs}"),
        ("preview", MAIN_ID, "-r", "{runs}"),
        ("sessions", "show", MAIN_ID, "-r", "{runs}"),
    ],
)
def test_reading_commands_print_one_line_for_a_non_json_row(run_dir: Path, command: tuple[str, ...]) -> None:
    with sqlite3.connect(run_dir / "sessions.db") as conn:
        (seq,) = conn.execute("SELECT MIN(seq) FROM entries").fetchone()
    break_row(run_dir / "sessions.db", seq)
    result = invoke(*(part.format(runs=run_dir) for part in command))
    assert_one_line_error(result, "is not JSON", f"row {seq}", MAIN_ID)


@pytest.mark.parametrize("payload", ["42", '"text"', "[1, 2]", '{"type": "assistant", "message": "a string"}',
                                     '{"type": "user", "parentUuid": {"x": 1}, "uuid": "odd"}'])
def test_reading_commands_survive_odd_but_valid_json_rows(run_dir: Path, payload: str) -> None:
    """Item 11 at the reading end: a row of an odd shape is left as stored and the report still runs."""
    with sqlite3.connect(run_dir / "sessions.db") as conn:
        (seq,) = conn.execute("SELECT MIN(seq) + 1 FROM entries").fetchone()
    break_row(run_dir / "sessions.db", seq, payload)
    for command in (("report", str(run_dir)), ("preview", MAIN_ID, "-r", str(run_dir)),
                    ("sessions", "show", MAIN_ID, "-r", str(run_dir))):
        result = invoke(*command)
        assert result.exit_code == 0, (command, result.output)
