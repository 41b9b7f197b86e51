"""Session id prefixes in every reading command (issue #18): a unique prefix names its session; an
ambiguous one lists the candidates on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.report.rundata import open_store, resolve_session
from flower.stores.sqlite import SqliteSessionStore
from tests.support.cli import GLANCE_ID, MAIN_ID, assert_one_line_error, invoke
from tests.support.sessions import glance_session

TWIN_ID = "11112222-0000-4000-8000-000000000000"


def test_a_unique_prefix_names_its_session(run_dir: Path) -> None:
    runs = str(run_dir)
    report = json.loads(invoke("report", MAIN_ID[:8], "-r", runs, "--json").stdout)
    assert report["sessions"] == [MAIN_ID] and report["target"] == MAIN_ID
    assert json.loads(invoke("sessions", "show", "2222", "-r", runs, "--json").stdout)["session_id"] == GLANCE_ID
    preview = json.loads(invoke("preview", "2222", "-r", runs, "--json").stdout)
    assert preview["session_id"] == GLANCE_ID
    items = json.loads(invoke("logs", "11", "-r", runs, "--json").stdout)
    assert items[0]["detail"]["session_id"] == MAIN_ID


def test_an_ambiguous_prefix_lists_the_candidates(run_dir: Path) -> None:
    with SqliteSessionStore(run_dir / "sessions.db") as store:
        store.append_sync({"project_key": "-other", "session_id": TWIN_ID}, glance_session().entries)
    for command in (("logs",), ("report",), ("preview",), ("sessions", "show")):
        result = invoke(*command, "1111", "-r", str(run_dir))
        assert_one_line_error(result, "session prefix 1111 is ambiguous", MAIN_ID, TWIN_ID)
    assert json.loads(invoke("sessions", "show", "11111111", "-r", str(run_dir), "--json").stdout)[
        "session_id"] == MAIN_ID
    assert_one_line_error(invoke("logs", "3333", "-r", str(run_dir)), "unknown session 3333")


def test_resolve_session_takes_a_full_id_as_it_is(run_dir: Path) -> None:
    store = open_store(None, run_dir)
    try:
        assert resolve_session(store, MAIN_ID, run_dir) == MAIN_ID
        with pytest.raises(Exception, match="empty session id"):
            resolve_session(store, " ", run_dir)
    finally:
        store.close()
