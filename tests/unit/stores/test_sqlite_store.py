"""SqliteSessionStore: the SDK protocol, idempotent appends, several writer processes, refusing foreign files (S-18)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import InMemorySessionStore, fold_session_summary
from claude_agent_sdk.testing import run_session_store_conformance
from claude_agent_sdk.types import SessionKey

from flower.errors import StoreError
from flower.stores import _common
from flower.stores import _sqlite_file as sqlite_module
from flower.stores.sqlite import Migration, SqliteSessionStore

KEY: SessionKey = {"project_key": "-work-proj", "session_id": "s-1"}
SUB: SessionKey = {**KEY, "subpath": "subagents/agent-a1"}
from tests.support.transcripts import TRANSCRIPTS


def user(uuid: str | None, text: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "user", "message": {"role": "user", "content": text}, **extra}
    if uuid is not None:
        entry["uuid"] = uuid
    return entry


def assistant(uuid: str, msg_id: str, usage: dict[str, int], *, model: str = "claude-x", **extra: Any) -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": uuid,
        "message": {"id": msg_id, "role": "assistant", "model": model, "content": [], "usage": usage},
        **extra,
    }


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with SqliteSessionStore(tmp_path / "sessions.db") as opened:
        yield opened


@pytest.mark.anyio
async def test_sdk_conformance_suite(tmp_path: Path) -> None:
    """S-18: the SDK's own 14 contracts, each on a fresh file."""
    made: list[SqliteSessionStore] = []

    def make() -> SqliteSessionStore:
        made.append(SqliteSessionStore(tmp_path / f"conf-{len(made)}.db"))
        return made[-1]

    await run_session_store_conformance(make)
    assert len(made) == 15  # the probe plus one per contract: every optional method was exercised
    for opened in made:
        opened.close()


@pytest.mark.anyio
async def test_the_same_entry_object_twice_in_a_batch_is_stored_once(store: SqliteSessionStore) -> None:
    entry = user("u1", "one")
    await store.append(KEY, [entry, entry, user(None, "no uuid"), entry])
    assert await store.load(KEY) == [user("u1", "one"), user(None, "no uuid")]


@pytest.mark.anyio
async def test_append_is_idempotent_on_uuid_against_stored_rows_and_within_a_batch(store: SqliteSessionStore) -> None:
    """S-18: a retried batch and a batch repeating a uuid add each uuid once; uuid-less entries always land."""
    await store.append(KEY, [user("u1", "one"), user(None, "mode-a"), user("u2", "two")])
    [before] = await store.list_sessions(KEY["project_key"])
    [summary_before] = await store.list_session_summaries(KEY["project_key"])

    # The SDK's retry: the same batch again. Stored uuids are skipped; nothing is new, so nothing ticks.
    await store.append(KEY, [user("u1", "one"), user("u2", "two")])
    assert await store.list_sessions(KEY["project_key"]) == [before]
    assert await store.list_session_summaries(KEY["project_key"]) == [summary_before]

    await store.append(KEY, [user("u3", "three"), user("u3", "three again"), user(None, "mode-b"), user("u1", "x")])
    assert await store.load(KEY) == [
        user("u1", "one"),
        user(None, "mode-a"),
        user("u2", "two"),
        user("u3", "three"),
        user(None, "mode-b"),
    ]
    [after] = await store.list_sessions(KEY["project_key"])
    assert after["mtime"] > before["mtime"]


@pytest.mark.anyio
async def test_a_fork_keeps_its_own_copy_of_shared_uuids(store: SqliteSessionStore) -> None:
    """Dedup is per transcript: a forked session repeats its parent's uuids under another key."""
    fork: SessionKey = {"project_key": KEY["project_key"], "session_id": "s-fork"}
    await store.append(KEY, [user("u1", "one")])
    await store.append(fork, [user("u1", "one"), user("u9", "fork only")])
    assert await store.load(KEY) == [user("u1", "one")]
    assert await store.load(fork) == [user("u1", "one"), user("u9", "fork only")]


@pytest.mark.anyio
async def test_summary_folds_only_newly_stored_main_entries(store: SqliteSessionStore) -> None:
    """A replay of an older batch must not fold its older values back over newer ones; subagents never fold."""
    first = [user("u1", "first prompt", timestamp="2026-01-01T00:00:00.000Z", customTitle="old title")]
    second = [user("u2", "later", timestamp="2026-01-01T00:00:05.000Z", customTitle="new title")]
    await store.append(KEY, first)
    await store.append(KEY, second)
    await store.append(KEY, first)  # retried late
    await store.append(SUB, [user("s1", "sub", customTitle="subagent title")])

    [summary] = await store.list_session_summaries(KEY["project_key"])
    expected = fold_session_summary(fold_session_summary(None, KEY, first), KEY, second)
    assert summary["data"] == expected["data"]
    assert summary["data"]["custom_title"] == "new title"
    [listed] = await store.list_sessions(KEY["project_key"])
    assert summary["mtime"] == listed["mtime"]


@pytest.mark.anyio
async def test_entries_round_trip_deep_equal_including_awkward_text(store: SqliteSessionStore) -> None:
    """Verbatim storage: NUL escapes, lone surrogates (JavaScript strings can hold them), CJK, floats, nesting."""
    awkward = [
        user("a1", "nul \x00 inside", toolUseResult={"stdout": "bin\x00ary"}),
        user("a2", "lone \ud83d surrogate"),
        user("a3", "中文 текст émoji 🌸", cost=0.1 + 0.2, big=2**62, nested={"deep": [[{"x": None}]]}),
    ]
    await store.append(KEY, awkward)
    assert await store.load(KEY) == awkward


@pytest.mark.anyio
async def test_real_transcript_round_trips(store: SqliteSessionStore) -> None:
    """A real Claude Code transcript from ../shared/data comes back deep-equal and in order."""
    path = next(iter(sorted(TRANSCRIPTS.glob("spotter/test/fixtures/transcripts/*.jsonl"))), None)
    if path is None:
        pytest.skip(f"no transcripts under {TRANSCRIPTS}")
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for start in range(0, len(entries), 100):
        await store.append(KEY, entries[start : start + 100])
    loaded = await store.load(KEY)
    assert loaded is not None
    assert len(loaded) == len(entries) - _duplicate_uuids(entries)
    assert loaded == _first_of_each_uuid(entries)


def _first_of_each_uuid(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    kept = []
    for entry in entries:
        uuid = entry.get("uuid")
        if isinstance(uuid, str) and uuid:
            if uuid in seen:
                continue
            seen.add(uuid)
        kept.append(entry)
    return kept


def _duplicate_uuids(entries: list[dict[str, Any]]) -> int:
    return len(entries) - len(_first_of_each_uuid(entries))


@pytest.mark.anyio
async def test_delete_main_cascades_to_subagents_and_summary_only(store: SqliteSessionStore) -> None:
    other: SessionKey = {"project_key": KEY["project_key"], "session_id": "s-2"}
    other_sub: SessionKey = {**other, "subpath": "subagents/agent-b"}
    await store.append(KEY, [user("m1", "main")])
    await store.append(SUB, [user("s1", "sub")])
    await store.append({**KEY, "subpath": "subagents/agent-a2"}, [user("s2", "sub2")])
    await store.append(other, [user("o1", "other")])
    await store.append(other_sub, [user("o2", "other sub")])

    await store.delete(KEY)

    assert await store.load(KEY) is None
    assert await store.load(SUB) is None
    assert await store.list_subkeys(KEY) == []
    assert [s["session_id"] for s in await store.list_session_summaries(KEY["project_key"])] == ["s-2"]
    assert await store.load(other) == [user("o1", "other")]
    assert await store.load(other_sub) == [user("o2", "other sub")]
    assert await store.list_subkeys(other) == ["subagents/agent-b"]
    # Appending again after a delete starts a fresh transcript (old uuids are gone with it).
    await store.append(KEY, [user("m1", "main again")])
    assert await store.load(KEY) == [user("m1", "main again")]


@pytest.mark.anyio
async def test_list_subkeys_in_creation_order_and_subpath_keys_are_independent(store: SqliteSessionStore) -> None:
    await store.append(KEY, [user("m1", "main")])
    await store.append({**KEY, "subpath": "subagents/agent-z"}, [user("z", "z")])
    await store.append({**KEY, "subpath": "subagents/agent-a"}, [user("a", "a")])
    assert await store.list_subkeys(KEY) == ["subagents/agent-z", "subagents/agent-a"]
    # The SDK calls an empty subpath invalid; flower reads it as the main transcript.
    assert await store.load({**KEY, "subpath": ""}) == [user("m1", "main")]


def test_sync_helpers(store: SqliteSessionStore) -> None:
    """has_session / find_session / load_sync answer from a session id alone (report, preview)."""
    store.append_sync(KEY, [user("m1", "main")])
    store.append_sync(SUB, [user("s1", "sub")])
    assert store.has_session("s-1")
    assert store.has_session("s-1", KEY["project_key"])
    assert not store.has_session("s-1", "-elsewhere")
    assert not store.has_session("s-404")
    assert store.find_session("s-1") == KEY
    assert store.find_session("s-404") is None
    assert store.find_session("subagents/agent-a1") is None
    assert store.load_sync(SUB) == [user("s1", "sub")]
    assert store.load_sync({"project_key": "-nope", "session_id": "s-1"}) is None


def test_last_context_counts_one_api_message_once(store: SqliteSessionStore) -> None:
    """S-24: one reply spread over three entries repeating its usage is counted once, not three times."""
    first = {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5, "output_tokens": 3}
    last = {"input_tokens": 7, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300, "output_tokens": 40}
    store.append_sync(
        KEY,
        [
            user("u1", "go"),
            assistant("a1", "msg_1", first),
            user("r1", "result"),
            assistant("a2", "msg_2", last),  # thinking
            assistant("a3", "msg_2", last),  # text
            assistant("a4", "msg_2", last),  # tool_use
            user("r2", "result"),
            # Neither a synthetic reply, an inline sidechain turn nor an API error is the main thread's context.
            assistant("a5", "synthetic-1", {"input_tokens": 0}, model="<synthetic>"),
            assistant("a6", "msg_side", {"input_tokens": 99999}, isSidechain=True),
            assistant("a7", "msg_err", {"input_tokens": 88888}, isApiErrorMessage=True),
        ],
    )
    assert store.last_context(KEY) == 7 + 2000 + 300
    assert store.last_context({"project_key": "-nope", "session_id": "x"}) is None
    store.append_sync(SUB, [user("s1", "no assistant yet")])
    assert store.last_context(SUB) is None


def test_last_context_counts_one_api_message_not_its_entries() -> None:
    """Usage is per API message; parallel tool results between a reply's entries do not split it."""
    partial = {"input_tokens": 10, "output_tokens": 1}
    final = {"input_tokens": 10, "output_tokens": 50}
    entries = [
        assistant("a1", "msg_1", partial),
        user("r1", "result of the first parallel call"),
        assistant("a2", "msg_1", final),
        assistant("a3", "msg_2", {"input_tokens": 70}),
        assistant("a4", "syn", {"input_tokens": 0}, model="<synthetic>"),
        assistant("a5", "msg_side", {"input_tokens": 5}, isSidechain=True),
    ]
    assert _common.last_context(reversed(entries)) == 70
    assert _common.last_context(reversed(entries[:3])) == 10  # msg_1 once, not 10 + 10


@pytest.mark.anyio
async def test_the_clock_is_shared_by_every_store_on_a_file(tmp_path: Path) -> None:
    """mtime is strictly increasing across stores (processes) writing one file, and across sessions."""
    path = tmp_path / "shared.db"
    with SqliteSessionStore(path) as one, SqliteSessionStore(path) as two:
        for n in range(20):
            writer = one if n % 2 else two
            await writer.append({"project_key": "p", "session_id": f"s{n}"}, [user(f"u{n}", "x")])
        mtimes = {s["session_id"]: s["mtime"] for s in await one.list_sessions("p")}
    ordered = [mtimes[f"s{n}"] for n in range(20)]
    assert ordered == sorted(set(ordered))


# -- several OS processes on one file ------------------------------------------------------------------


def _writer(path: str, writer: int, count: int, start: Any) -> None:
    """Append `count` entries in irregular batches, replaying some batches as the SDK's retry would."""
    import random

    from flower.stores.sqlite import SqliteSessionStore

    rng = random.Random(writer)
    store = SqliteSessionStore(path)
    start.wait()
    n = 0
    while n < count:
        size = min(rng.randint(1, 60), count - n)
        batch = [
            {"type": "user", "uuid": f"w{writer}-{i}", "writer": writer, "n": i, "customTitle": f"w{writer}-{i}"}
            for i in range(n, n + size)
        ]
        store.append_sync(KEY, batch)
        if rng.random() < 0.2:
            store.append_sync(KEY, batch[: rng.randint(1, size)])
        n += size
    store.close()


def test_four_processes_appending_concurrently_lose_nothing_and_keep_each_writers_order(tmp_path: Path) -> None:
    """S-18: 4 spawned processes x 2,000 entries into one session of one file."""
    path = str(tmp_path / "multi.db")
    SqliteSessionStore(path).close()  # create the schema once; racing creators are covered below
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)  # every writer has imported and opened the store before any writes
    procs = [ctx.Process(target=_writer, args=(path, w, 2000, start)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=240)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]

    with SqliteSessionStore(path) as store:
        loaded = store.load_sync(KEY)
        assert loaded is not None
        assert len(loaded) == 8000
        for w in range(4):
            assert [e["n"] for e in loaded if e["writer"] == w] == list(range(2000))
        interleaved = sum(1 for a, b in zip(loaded, loaded[1:]) if a["writer"] != b["writer"])
        assert interleaved > 3  # the writers really ran at the same time
        # Every batch was folded, in commit order: the summary equals one fold over the whole transcript.
        [summary] = asyncio.run(store.list_session_summaries(KEY["project_key"]))
        assert summary["data"] == fold_session_summary(None, KEY, loaded)["data"]
        assert summary["data"]["custom_title"] == loaded[-1]["customTitle"]


def _opener(path: str, start: Any) -> None:
    from flower.stores.sqlite import SqliteSessionStore

    start.wait()
    SqliteSessionStore(path).append_sync({"project_key": "p", "session_id": "s"}, [{"type": "x"}])


def test_processes_racing_to_create_a_new_file_migrate_it_once(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)
    procs = [ctx.Process(target=_opener, args=(path, start)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version, name FROM flower_schema").fetchall() == [(1, "initial schema"),
                                                                                      (2, "entry checksums")]
        assert conn.execute("SELECT COUNT(*) FROM entries").fetchone() == (4,)


# -- refusing what is not a flower store ---------------------------------------------------------------


def _refused(path: Path) -> str:
    before = path.read_bytes()
    with pytest.raises(StoreError) as info:
        SqliteSessionStore(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert path.read_bytes() == before, "a refused file must not be modified"
    assert not Path(f"{path}-wal").exists()
    return message


def test_garbage_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 200)
    assert "not a usable flower session store" in _refused(path)


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.close()
    assert "not a flower session store (tables: invoices)" in _refused(path)


def test_corrupt_flower_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broken.db"
    with SqliteSessionStore(path) as opened:
        opened.append_sync(KEY, [user(f"u{i}", "x" * 500) for i in range(200)])
    # Zero the b-tree pages after the header: the schema page itself is unreadable now.
    data = bytearray(path.read_bytes())
    data[100:4096] = bytes(4096 - 100)
    path.write_bytes(bytes(data))
    assert "malformed" in _refused(path)


def test_bytes_rotted_inside_an_entry_are_refused_by_its_checksum(tmp_path: Path) -> None:
    """SQLite's quick_check sees page structure only: a damaged byte inside a payload passes it (issue #26)."""
    path = tmp_path / "rot.db"
    with SqliteSessionStore(path) as opened:
        opened.append_sync(KEY, [user(f"u{i}", "x" * 2000) for i in range(50)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    at = data.find(b"x" * 1500, 20 * 4096)
    data[at + 500:at + 502] = b"yy"  # still valid UTF-8 and JSON: only the checksum can tell
    path.write_bytes(bytes(data))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()
    message = _refused(path)
    assert "is corrupted (entry row " in message and "does not match its checksum" in message
    with pytest.raises(StoreError, match="does not match its checksum"):
        SqliteSessionStore(path, readonly=True)


def test_a_version_1_file_without_checksums_opens_and_is_migrated(tmp_path: Path) -> None:
    from flower.stores._sqlite_file import MIGRATIONS

    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:  # as flower wrote it before migration 2
        conn.execute("CREATE TABLE flower_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                     "applied_ms INTEGER NOT NULL)")
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement)
        conn.execute("INSERT INTO flower_schema VALUES (1, 'initial schema', 0)")
        conn.execute("INSERT INTO transcripts (project_key, session_id, subpath, mtime) VALUES (?, ?, '', 1)",
                     (KEY["project_key"], KEY["session_id"]))
        conn.execute("INSERT INTO entries (transcript, uuid, type, payload) VALUES (1, 'u1', 'user', ?)",
                     (json.dumps(user("u1", "old"), separators=(",", ":")),))
    conn.close()
    with SqliteSessionStore(path, readonly=True) as reader:  # read-only: checked by structure, not migrated
        assert reader.load_sync(KEY) == [user("u1", "old")]
    with SqliteSessionStore(path) as opened:
        opened.append_sync(KEY, [user("u2", "new")])
        assert opened.load_sync(KEY) == [user("u1", "old"), user("u2", "new")]
    with sqlite3.connect(path) as conn:
        assert [c is None for (c,) in conn.execute("SELECT crc FROM entries ORDER BY seq")] == [True, False]
    conn.close()


def test_corruption_found_later_is_a_store_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rot.db"
    with SqliteSessionStore(path) as opened:
        opened.append_sync(KEY, [user(f"u{i}", "x" * 2000) for i in range(200)])
    store = SqliteSessionStore(path)
    with open(path, "r+b") as handle:  # rot the data pages behind the open store's back
        handle.seek(8 * 4096)
        handle.write(b"\xff" * (40 * 4096))
    store._connection().execute("PRAGMA shrink_memory")  # drop the pages the open's quick_check cached
    with pytest.raises(StoreError, match="rot.db"):
        store.load_sync(KEY)
    store.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SqliteSessionStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO flower_schema (version, name, applied_ms) VALUES (99, 'future', 0)")
    conn.close()
    assert "schema version 99, newer than this flower (2)" in _refused(path)


def test_closed_store_says_so(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "c.db")
    store.close()
    with pytest.raises(StoreError, match="c.db is closed"):
        store.load_sync(KEY)


# -- migrations ----------------------------------------------------------------------------------------


def test_migrations_are_recorded_and_an_old_file_is_migrated_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    with SqliteSessionStore(path) as opened:
        opened.append_sync(KEY, [user("u1", "kept")])
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version, name FROM flower_schema").fetchall() == [(1, "initial schema"),
                                                                                      (2, "entry checksums")]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()

    # A later flower adds migration 3; opening the version-2 file applies exactly that one.
    extra = Migration(3, "entry sizes", ("ALTER TABLE entries ADD COLUMN size INTEGER",))
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", (*sqlite_module.MIGRATIONS, extra))
    monkeypatch.setattr(sqlite_module, "SCHEMA_VERSION", 3)
    with SqliteSessionStore(path) as opened:
        assert opened.load_sync(KEY) == [user("u1", "kept")]
    with SqliteSessionStore(path):  # a second open finds nothing left to do
        pass
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version, name FROM flower_schema ORDER BY version").fetchall() == [
            (1, "initial schema"),
            (2, "entry checksums"),
            (3, "entry sizes"),
        ]
        assert "size" in [row[1] for row in conn.execute("PRAGMA table_info(entries)")]
    conn.close()


@pytest.mark.anyio
async def test_same_answers_as_the_sdk_in_memory_store(store: SqliteSessionStore) -> None:
    """Side by side with the reference store on a mixed sequence (summaries compared by data)."""
    reference = InMemorySessionStore()
    batches: list[tuple[SessionKey, list[dict[str, Any]]]] = [
        (KEY, [user("u1", "hello", timestamp="2026-01-01T00:00:00Z", cwd="/w", gitBranch="main")]),
        (SUB, [user("s1", "sub")]),
        (KEY, [{"type": "last-prompt", "lastPrompt": "hello"}, {"type": "tag", "tag": "t1"}]),
        ({"project_key": "p2", "session_id": "s9"}, [user("x", "elsewhere")]),
    ]
    for key, batch in batches:
        await store.append(key, batch)
        await reference.append(key, batch)
    for key in (KEY, SUB, {"project_key": "p2", "session_id": "s9"}):
        assert await store.load(key) == await reference.load(key)  # type: ignore[arg-type]
    ours = await store.list_session_summaries(KEY["project_key"])
    theirs = await reference.list_session_summaries(KEY["project_key"])
    assert [(s["session_id"], s["data"]) for s in ours] == [(s["session_id"], s["data"]) for s in theirs]
    assert await store.list_subkeys(KEY) == await reference.list_subkeys(KEY)


def test_project_keys_lists_every_project(tmp_path: Path) -> None:
    with SqliteSessionStore(tmp_path / "s.db") as store:
        for project in ("-b-repo", "-a-repo", "-b-repo"):
            store.append_sync({"project_key": project, "session_id": f"s{project}"}, [{"type": "x", "uuid": project}])
        assert store.project_keys() == ["-a-repo", "-b-repo"]
