"""Back-filling a store from the CLI's transcript, and reading a back-filled history in chain order
(issue #26 item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flower.stores._order import chain_order
from flower.stores.backfill import backfill, read_entries, transcript_files
from flower.stores.rewrite import RewritingSessionStore
from flower.stores.sqlite import SqliteSessionStore

pytestmark = pytest.mark.anyio

KEY = {"project_key": "-ws", "session_id": "s1"}


def entry(uuid: str, parent: str | None, kind: str = "user") -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "message": {"role": kind, "content": uuid}}


CHAIN = [entry("u1", None), entry("a1", "u1", "assistant"), entry("u2", "a1"), entry("a2", "u2", "assistant")]


def test_chain_order_puts_back_filled_entries_after_their_parents() -> None:
    u1, a1, u2, a2 = CHAIN
    late = entry("u3", "a2")
    stored = [{"type": "last-prompt"}, u1, u2, a2, late, a1]  # a1 was back-filled after later entries
    assert [e.get("uuid") for e in chain_order(stored)] == [None, "u1", "a1", "u2", "a2", "u3"]


@pytest.mark.parametrize("entries", [
    CHAIN,
    [entry("x", "gone"), *CHAIN],  # a parent the list does not hold
    [entry("p", "q"), entry("q", "p")],  # a damaged chain: a cycle
    [{"type": "cost-state"}, "not a dict", *CHAIN],
])
def test_chain_order_keeps_a_list_in_order_and_every_entry_once(entries: list[Any]) -> None:
    out = chain_order(entries)
    assert out == entries


@pytest.mark.parametrize("entries", [
    [entry("a", None), entry("b", "a"), entry("c", "b"), entry("b", "a")],  # the CLI wrote one entry twice
    [entry("p", "q"), entry("c", "q"), entry("q", "p"), entry("d", "p")],  # a cycle, with children
    [entry("e", "e"), entry("e", None), entry("c", "e")],  # a copy naming itself before the root copy
])
def test_chain_order_reads_a_duplicated_uuid_as_its_first_copy_and_leaves_a_cycle_where_it_stands(
    entries: list[Any],
) -> None:
    assert chain_order(entries) == entries


def test_chain_order_moves_a_child_after_the_first_copy_of_a_duplicated_parent() -> None:
    stored = [entry("c", "b"), entry("a", None), entry("b", "a"), entry("b", "a")]
    assert [e["uuid"] for e in chain_order(stored)] == ["a", "b", "c", "b"]


_UUIDS = st.sampled_from(["a", "b", "c", "d", "e"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(_UUIDS, st.one_of(st.none(), _UUIDS, st.just("gone"))).map(lambda t: entry(*t)),
    st.just({"type": "cost-state"}), st.just("not a dict"), st.just({"uuid": "a", "parentUuid": {"x": 1}}),
), max_size=12))
@example([entry("a", "a"), {"uuid": "a", "parentUuid": {"x": 1}}, entry("a", None)])
def test_chain_order_is_a_fixed_point_whatever_the_parent_chain(entries: list[Any]) -> None:
    """Duplicated uuids, cycles, self-parents, missing and odd parents: one pass is all a rewrite needs."""
    once = chain_order(entries)
    assert sorted(map(id, once)) == sorted(map(id, entries))  # every entry exactly once
    assert chain_order(once) == once


def test_read_entries_skips_torn_lines_api_requests_and_entries_without_uuid(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    lines = [json.dumps(CHAIN[0]), json.dumps({"type": "api-request", "uuid": "r"}), json.dumps({"type": "mode"}),
             json.dumps(CHAIN[1]), '{"type": "user", "uu']
    path.write_text("\n".join(lines))
    assert read_entries(path) == CHAIN[:2]


def write_transcripts(projects: Path, main: list[Any], sub: list[Any]) -> None:
    folder = projects / "-ws"
    (folder / "s1" / "subagents").mkdir(parents=True)
    (folder / "s1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in main))
    (folder / "s1" / "subagents" / "agent-a7.jsonl").write_text("".join(json.dumps(e) + "\n" for e in sub))
    (folder / "s1" / "subagents" / "agent-a7.meta.json").write_text("{}")


async def test_backfill_appends_only_what_the_store_lacks_in_order(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    sub = [entry("s-u1", None), entry("s-a1", "s-u1", "assistant")]
    write_transcripts(projects, CHAIN, sub)
    assert [s for s, _ in transcript_files(projects, KEY)] == [None, "subagents/agent-a7"]  # type: ignore[arg-type]
    base = SqliteSessionStore(tmp_path / "sessions.db")
    store = RewritingSessionStore(base, workspace=tmp_path)
    await base.append(KEY, [CHAIN[0], CHAIN[3]])  # type: ignore[arg-type, list-item]
    assert await backfill(store, projects, KEY) == {"main": 2, "subagents/agent-a7": 2}  # type: ignore[arg-type]
    assert [e["uuid"] for e in await base.load(KEY) or []] == ["u1", "a2", "a1", "u2"]  # type: ignore[arg-type]
    assert [e["uuid"] for e in await store.load(KEY) or []] == ["u1", "a1", "u2", "a2"]  # type: ignore[arg-type]
    assert await backfill(store, projects, KEY) == {}  # type: ignore[arg-type]  # nothing twice
    subkey = {**KEY, "subpath": "subagents/agent-a7"}
    assert [e["uuid"] for e in await base.load(subkey) or []] == ["s-u1", "s-a1"]  # type: ignore[arg-type]


async def test_backfill_never_stores_what_only_the_rewritten_copy_holds(tmp_path: Path) -> None:
    """A resumed session's transcript starts with the rewritten copy the SDK materialized: a healed result
    (a synthetic entry) in it is not the CLI's, and stays out of the store."""
    call = {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
            "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                                          "input": {"command": "ls"}}]}}
    base = SqliteSessionStore(tmp_path / "sessions.db")
    store = RewritingSessionStore(base, workspace=tmp_path)
    await base.append(KEY, [CHAIN[0], call])  # type: ignore[arg-type, list-item]
    handed = await store.load(KEY) or []  # type: ignore[arg-type]
    assert len(handed) == 3  # the orphan call got a synthetic result on the way out
    projects = tmp_path / "projects"
    write_transcripts(projects, [*handed, entry("u9", handed[-1]["uuid"])], [])
    assert await backfill(store, projects, KEY) == {"main": 1}  # type: ignore[arg-type]
    assert [e["uuid"] for e in await base.load(KEY) or []] == ["u1", "a1", "u9"]  # type: ignore[arg-type]
