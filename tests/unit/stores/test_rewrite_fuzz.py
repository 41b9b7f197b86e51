"""The rewrite layer never raises on stored data (issue #16 item 11, S-19, S-20).

Hypothesis takes one of the real transcripts in ../shared/data/transcripts (60 of them, CLI 1.0 to 2.1) and
plants shapes a store can hand back but the CLI never writes: a `parentUuid` or `leafUuid` that is a dict,
list or number, a tool_use id with a lone surrogate (orphaned or not), an entry whose `message` is a string,
non-dict entries between a message's entries, odd `content`, blocks, uuids and message ids; and an entry
written twice (the CLI does), appended late (a back-fill) or naming itself as parent. `rewrite()` must return
(skipping what it cannot understand, and saying so), never mutate its input, and stay idempotent.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flower.stores.jsonl import read_jsonl
from flower.stores.rewrite import EphemeralPolicy, RewritingSessionStore, TrimPolicy, rewrite
from tests.support.transcripts import real_transcripts

PATHS = real_transcripts()
pytestmark = pytest.mark.skipif(not PATHS, reason="the real transcripts (../shared/data/transcripts) are absent")

ODD_VALUES = [{"x": 1}, ["a", "b"], 7, 1.5, True, "", "\ud800", None]
MUTATIONS = [
    "parent", "leaf", "surrogate_use", "surrogate_orphan", "message_str", "insert_non_dict", "content_odd",
    "block_odd", "uuid_odd", "message_id_odd", "input_odd", "result_id_odd", "drop_message", "removed_odd_parent",
    "type_swap", "use_id_odd", "result_content_odd", "flags_odd", "duplicate", "move_late", "self_parent",
]


@functools.cache
def load(index: int) -> tuple[Any, ...]:
    return tuple(read_jsonl(PATHS[index]).entries)


def _blocks(entry: Any) -> list[Any] | None:
    message = entry.get("message") if isinstance(entry, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else None


def _with_block(entries: list[Any], position: int, number: int, block: Any) -> None:
    """Replace one block, copying down the path (the source transcript is shared between examples)."""
    entry = dict(entries[position])
    message = dict(entry["message"])
    content = list(message["content"])
    content[number] = block
    message["content"] = content
    entry["message"] = message
    entries[position] = entry


def mutate(entries: list[Any], kind: str, where: float, odd: Any) -> None:
    """Plant one shape of `kind` near the relative position `where`."""
    if not entries:
        return
    start = min(int(where * len(entries)), len(entries) - 1)
    order = list(range(start, len(entries))) + list(range(start))
    dicts = [i for i in order if isinstance(entries[i], dict)]
    if kind in ("insert_non_dict", "duplicate", "move_late", "self_parent"):
        _list_shape(entries, kind, start, where, odd)
        return
    if kind == "removed_odd_parent":  # an API error entry (always removed) with an odd parent, and a child
        error = {"type": "assistant", "isApiErrorMessage": True, "uuid": f"planted-{start}", "parentUuid": odd,
                 "message": {"id": f"synth-{start}", "model": "<synthetic>", "role": "assistant",
                             "content": [{"type": "text", "text": "API Error: 500"}]}}
        entries.insert(start, error)
        for j in range(start + 1, len(entries)):
            if isinstance(entries[j], dict):
                entries[j] = {**entries[j], "parentUuid": error["uuid"]}
                break
        return
    if not dicts:
        return
    i = dicts[0]
    if kind == "parent":
        entries[i] = {**entries[i], "parentUuid": odd}
    elif kind == "leaf":
        entries[i] = {**entries[i], "type": "summary", "leafUuid": odd}
    elif kind == "uuid_odd":
        entries[i] = {**entries[i], "uuid": odd}
    elif kind == "message_str":
        for j in dicts:
            if entries[j].get("type") == "assistant":
                entries[j] = {**entries[j], "message": "a string, not a message"}
                return
    elif kind == "type_swap":  # a user entry claiming to be an assistant one, or the other way round
        kind_now = entries[i].get("type")
        swapped = {"user": "assistant", "assistant": "user"}.get(kind_now, "assistant") if isinstance(
            kind_now, str) else "user"
        entries[i] = {**entries[i], "type": swapped if odd is None else odd}
    elif kind == "flags_odd":  # the markers the rewrites read, with odd values
        entries[i] = {**entries[i], "isSidechain": odd, "agentId": odd, "isMeta": odd, "toolDenialKind": odd,
                      "isApiErrorMessage": odd, "requestId": odd}
    elif kind == "drop_message":
        entries[i] = {k: v for k, v in entries[i].items() if k != "message"}
    elif kind == "message_id_odd":
        for j in dicts:
            if isinstance(entries[j].get("message"), dict) and entries[j].get("type") == "assistant":
                entries[j] = {**entries[j], "message": {**entries[j]["message"], "id": odd}}
                return
    elif kind == "content_odd":
        for j in dicts:
            if isinstance(entries[j].get("message"), dict):
                entries[j] = {**entries[j], "message": {**entries[j]["message"], "content": odd}}
                return
    else:
        for j in dicts:
            for number, block in enumerate(_blocks(entries[j]) or []):
                if not isinstance(block, dict):
                    continue
                if kind == "block_odd":
                    _with_block(entries, j, number, odd)
                    return
                if block.get("type") == "tool_use" and kind in ("surrogate_use", "surrogate_orphan", "input_odd"):
                    if kind == "input_odd":
                        _with_block(entries, j, number, {**block, "input": odd, "name": odd})
                        return
                    old = block.get("id")
                    new = f"toolu_\ud800{old}"
                    _with_block(entries, j, number, {**block, "id": new})
                    if kind == "surrogate_use":  # the result follows, so the pair stays a pair
                        _rename_result(entries, j, old, new)
                    return
                if block.get("type") == "tool_result" and kind == "result_id_odd":
                    _with_block(entries, j, number, {**block, "tool_use_id": odd})
                    return
                if block.get("type") == "tool_result" and kind == "result_content_odd":
                    _with_block(entries, j, number, {**block, "content": [odd, {"type": "text", "text": odd}]})
                    return
                if block.get("type") == "tool_use" and kind == "use_id_odd":
                    _with_block(entries, j, number, {**block, "id": odd})
                    return


def _list_shape(entries: list[Any], kind: str, start: int, where: float, odd: Any) -> None:
    if kind == "insert_non_dict":
        entries.insert(start, odd if not isinstance(odd, dict) else [odd])
    elif kind == "duplicate":  # the CLI wrote one entry twice (seen in the real transcripts)
        entries.insert(start + 1 + int(where * 7) % 5, entries[start])
    elif kind == "move_late":  # appended after later entries (a back-fill after a dropped mirror batch)
        moved = entries.pop(start)
        entries.insert(min(len(entries), start + 1 + int(where * 97) % 13), moved)
    elif isinstance(entries[start], dict):  # an entry naming itself as parent
        entries[start] = {**entries[start], "parentUuid": entries[start].get("uuid")}


def _rename_result(entries: list[Any], after: int, old: Any, new: str) -> None:
    for k in range(after + 1, len(entries)):
        for number, block in enumerate(_blocks(entries[k]) or []):
            if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") == old:
                _with_block(entries, k, number, {**block, "tool_use_id": new})
                return


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(
    index=st.integers(0, max(0, len(PATHS) - 1)),
    planted=st.lists(
        st.tuples(st.sampled_from(MUTATIONS), st.floats(0, 1), st.sampled_from(ODD_VALUES)), min_size=1, max_size=6
    ),
    trim=st.booleans(),
)
@example(index=57, planted=[("removed_odd_parent", 0.75, {"x": 1})], trim=False)  # an API error between two
# results of one interrupted turn: the interrupt pass must see the turn as it is after the error is removed
@example(index=24, planted=[("removed_odd_parent", 0.375, {"x": 1})] * 3, trim=False)  # three API errors
# sharing one uuid, one naming itself as parent, in a transcript where the CLI wrote one entry twice: chain
# order must read a duplicated uuid as its first copy and leave a cycle where it stands, or a rewrite moves on
@example(index=10, planted=[("leaf", 0.5, None), ("duplicate", 0.3125, None)], trim=False)  # an orphan healed
@example(index=3, planted=[("duplicate", 0.5, None), ("surrogate_use", 0.0, None)], trim=False)  # after the
# later copy of a duplicated entry: only the children stored after that copy move under the healing entry
def test_rewrite_never_raises_on_stored_data(
    index: int, planted: list[tuple[str, float, Any]], trim: bool, tmp_path: Path
) -> None:
    entries = list(load(index))
    for kind, where, odd in planted:
        mutate(entries, kind, where, odd)
    frozen = copy.deepcopy(entries)
    options: dict[str, Any] = {
        "workspace": tmp_path,
        "ephemeral": EphemeralPolicy(keep_recent=1),
        "trim": TrimPolicy(keep_recent=2, min_chars=500) if trim else False,
        "keep_denials": 0,
    }
    out, report = rewrite(entries, **options)
    assert entries == frozen  # the input is untouched
    assert report.entries_in == len(entries) and report.entries_out == len(out)
    again, second = rewrite(out, **options)
    assert again == out  # idempotent, whatever was planted
    assert second.skipped <= report.skipped + len(planted)


def test_known_shapes_from_the_issue_are_skipped_and_reported(tmp_path: Path) -> None:
    """The four reproduced shapes, on one real transcript, each alone: no exception, a report."""
    base = list(load(0))
    for kind, odd in (("parent", {"x": 1}), ("parent", ["a"]), ("surrogate_orphan", None),
                      ("message_str", None), ("insert_non_dict", 42)):
        for where in (0.1, 0.5, 0.9):
            entries = list(base)
            mutate(entries, kind, where, odd)
            out, _ = rewrite(entries, workspace=tmp_path)
            assert out


def test_the_store_reports_what_it_skipped(tmp_path: Path) -> None:
    """`load()` of entries whose odd shapes a stage could not handle returns them and says so."""
    from flower.stores.sqlite import SqliteSessionStore

    key = {"project_key": "-p", "session_id": "s"}
    entries = list(load(0))
    mutate(entries, "surrogate_orphan", 0.5, None)
    with RewritingSessionStore(SqliteSessionStore(tmp_path / "s.db"), workspace=tmp_path) as store:
        store.append_sync(key, entries)
        loaded = store.load_sync(key)
    assert loaded is not None and len(loaded) >= len(entries) - 5


# --- the four reproduced shapes, built exactly -------------------------------------------------------------

from tests.support.transcripts import Transcript, bash, text


def _orphan_then(shape: str) -> list[Any]:
    """A prompt, one assistant message of a call then text (two entries, one message id) whose call never
    got a result (an orphan the rewrite heals), an API error, and what follows; `shape` spoils one part."""
    t = Transcript()
    t.prompt("go")
    _, sibling = t.assistant(bash("toolu_\ud800orphan" if shape == "surrogate" else "toolu_orphan", "ls"),
                             text("and more"), msg_id="m1")
    error = t.api_error()
    after = t.prompt("again")
    entries: list[Any] = list(t.entries)
    at = entries.index(sibling)
    if shape == "sibling_message_str":
        entries[at] = {**sibling, "message": "a string"}  # its requestId still names the reply
    elif shape == "non_dict_between":
        entries.insert(at, 42)
    elif shape in ("parent_dict", "parent_list"):
        odd = {"x": 1} if shape == "parent_dict" else ["a"]
        entries[entries.index(error)] = {**error, "parentUuid": odd}  # the API error entry is removed
    assert after in entries
    return entries


@pytest.mark.parametrize("shape", ["surrogate", "sibling_message_str", "non_dict_between", "parent_dict",
                                   "parent_list"])
def test_each_shape_from_the_issue_rewrites_without_raising(shape: str) -> None:
    entries = _orphan_then(shape)
    out, report = rewrite(entries)
    again, _ = rewrite(out)
    assert again == out
    assert report.orphans_healed + report.skipped >= 1  # healed, or skipped and said so
    assert report.api_errors_dropped == 1
