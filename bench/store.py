"""Session store costs (S-18, B-9): append throughput, load time and peak memory, side by side in one run.

* Append: entries/s, in the batch sizes the SDK's `TranscriptMirrorBatcher` produces: one flush per turn
  (about 25 entries in the recorded sessions, docs/sdk-notes.md#session-stores) and the eager-flush cap (500
  entries or 1 MiB). Floor: the SDK's `InMemorySessionStore`; reference: a bare `sqlite3` executemany of the
  same JSON texts (no dedup, no summary, one transaction per batch). `ratio` = throughput / the in-memory
  store's.
* Load: seconds to load 10k and 100k entries of one session; floor: `json.loads` of the same JSONL bytes
  already in memory. `ratio` = time / that floor.
* Peak memory of one load (tracemalloc, MB), `ratio` against the `json.loads` floor.

Entries are real transcript lines from ../shared/data/transcripts (lines over 100 KB — inline base64
images — left out), cycled with fresh uuids. PostgreSQL rows need the server at 127.0.0.1:5432
(`FLOWER_BENCH_PG_DSN`); without it they are reported as skipped. `tiny`: 200 entries, SQLite only.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sqlite3
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.types import SessionKey, SessionStore

from flower.stores._common import dump_entry
from flower.stores.sqlite import SqliteSessionStore
from tests.support.transcripts import TRANSCRIPTS  # the one place that locates them

BENCH = "store"
DSN = os.environ.get("FLOWER_BENCH_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")
TURN_BATCH = 25
EAGER_BATCH, EAGER_BYTES = 500, 1 << 20  # claude_agent_sdk/_internal/transcript_mirror_batcher.py


def _corpus(limit: int = 20_000) -> list[dict[str, Any]]:
    corpus: list[dict[str, Any]] = []
    for path in sorted(TRANSCRIPTS.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if len(line) > 100_000:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("type"), str):
                corpus.append(entry)
                if len(corpus) >= limit:
                    return corpus
    if not corpus:
        raise RuntimeError(f"no transcript entries under {TRANSCRIPTS}")
    return corpus


def _entries(corpus: list[dict[str, Any]], n: int, tag: str) -> list[dict[str, Any]]:
    """n entries cycling the corpus; those that had a uuid get a fresh unique one (shallow copies)."""
    out = []
    for i in range(n):
        entry = dict(corpus[i % len(corpus)])
        if "uuid" in entry:
            entry["uuid"] = f"{tag}-{i}"
        out.append(entry)
    return out


def _batches(entries: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Consecutive batches of at most `size` entries and (like the SDK's eager flush) about 1 MiB."""
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    weight = 0
    for entry in entries:
        cost = len(dump_entry(entry))
        if current and (len(current) >= size or weight + cost > EAGER_BYTES):
            batches.append(current)
            current, weight = [], 0
        current.append(entry)
        weight += cost
    if current:
        batches.append(current)
    return batches


def _row(case: str, value: float, unit: str, ratio: float | None, note: str) -> dict[str, Any]:
    return {"bench": BENCH, "case": case, "value": value, "unit": unit, "ratio": ratio, "note": note}


# -- the stores under test ------------------------------------------------------------------------------


class _RawSqlite:
    """The reference: one plain table, one executemany per batch, nothing else."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS e (k TEXT, payload TEXT)")

    async def append(self, key: SessionKey, entries: list[dict[str, Any]]) -> None:
        rows = [(key["session_id"], dump_entry(e)) for e in entries]
        self.conn.execute("BEGIN")
        self.conn.executemany("INSERT INTO e VALUES (?, ?)", rows)
        self.conn.execute("COMMIT")


def _pg_factory(schema: str) -> Callable[[], Any] | None:
    try:
        import psycopg

        psycopg.connect(DSN, connect_timeout=3).close()
    except Exception:  # noqa: BLE001 - any failure means: no server for this run
        return None
    from flower.stores.postgres import PostgresSessionStore

    return lambda: PostgresSessionStore(DSN, schema=schema)


def _drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


# -- measurements --------------------------------------------------------------------------------------


async def _append_rate(store: Any, entries: list[dict[str, Any]], batch: int, reps: int, tag: str) -> float:
    """Median entries/s over `reps` fresh sessions (each rep appends every batch of `entries`)."""
    batches = _batches(entries, batch)
    rates = []
    for rep in range(reps):
        key: SessionKey = {"project_key": "bench", "session_id": f"{tag}-append-{batch}-{rep}"}
        start = time.perf_counter()
        for chunk in batches:
            await store.append(key, chunk)
        rates.append(len(entries) / (time.perf_counter() - start))
    return statistics.median(rates)


async def _timed(load: Callable[[], Awaitable[Any]], reps: int) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        result = await load()
        samples.append(time.perf_counter() - start)
        del result
    return statistics.median(samples)


async def _peak_mb(load: Callable[[], Awaitable[Any]]) -> float:
    tracemalloc.start()
    try:
        result = await load()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return peak / 1e6


async def _json_floor(lines: list[str]) -> list[Any]:
    return [json.loads(line) for line in lines]


async def _append_rows(stores: dict[str, Any], entries: list[dict[str, Any]], reps: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for batch in (TURN_BATCH, EAGER_BATCH):
        floor = await _append_rate(InMemorySessionStore(), entries, batch, reps, "mem")
        rows.append(_row(f"append, batches of {batch}: InMemorySessionStore", floor, "entries/s", 1.0, "floor"))
        for name, store in stores.items():
            rate = await _append_rate(store, entries, batch, reps, name)
            rows.append(_row(f"append, batches of {batch}: {name}", rate, "entries/s", rate / floor,
                             f"{len(entries)} entries, median of {reps}"))
    return rows


async def _load_rows(stores: dict[str, SessionStore], entries: list[dict[str, Any]], reps: int) -> list[dict[str, Any]]:
    """Load one session of len(entries) entries; contenders take turns within each repetition."""
    n = len(entries)
    lines = [dump_entry(e) for e in entries]  # the same bytes, already split: the floor is parsing alone
    mb = sum(len(line.encode()) + 1 for line in lines) / 1e6
    key: SessionKey = {"project_key": "bench", "session_id": f"load-{n}"}
    for name, store in stores.items():
        for chunk in _batches(entries, EAGER_BATCH):
            await store.append(key, chunk)
        loaded = await store.load(key)
        assert loaded is not None and len(loaded) == n, f"{name} lost entries"
        del loaded
    floor = "json.loads per line"
    contenders: dict[str, Callable[[], Awaitable[Any]]] = {floor: lambda: _json_floor(lines)}
    for name, store in stores.items():
        contenders[name] = lambda store=store: store.load(key)  # type: ignore[misc]
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(reps):
        for name, load in contenders.items():
            samples[name].append(await _timed(load, 1))
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    peaks = {name: await _peak_mb(load) for name, load in contenders.items()}
    rows = []
    for name in contenders:
        note = f"{mb:.1f} MB of JSONL, median of {reps}" if name == floor else f"median of {reps}"
        rows.append(_row(f"load {n}: {name}", seconds[name], "s", seconds[name] / seconds[floor], note))
    for name in contenders:
        rows.append(_row(f"peak memory, load {n}: {name}", peaks[name], "MB", peaks[name] / peaks[floor], "tracemalloc"))
    return rows


async def _run(tiny: bool, tmp: Path, schema: str) -> list[dict[str, Any]]:
    corpus = _corpus(2_000 if tiny else 20_000)
    make_pg = None if tiny else _pg_factory(schema)
    stores: dict[str, Any] = {"SqliteSessionStore": SqliteSessionStore(tmp / "flower.db")}
    if make_pg is not None:
        stores["PostgresSessionStore"] = make_pg()
    references = {"raw sqlite3 executemany": _RawSqlite(tmp / "raw.db")}
    rows: list[dict[str, Any]] = []
    try:
        n_append, reps = (200, 3) if tiny else (5_000, 5)
        rows += await _append_rows({**stores, **references}, _entries(corpus, n_append, "a"), reps)
        for n, load_reps in ([(200, 5)] if tiny else [(10_000, 5), (100_000, 3)]):
            rows += await _load_rows(stores, _entries(corpus, n, f"l{n}"), load_reps)
        if make_pg is None and not tiny:
            rows.append(_row("PostgresSessionStore", 0.0, "skipped", None, f"no server at {DSN}"))
        rows += _open_rows(tmp / "flower.db", rows, 3 if tiny else 5)
    finally:
        for store in stores.values():
            await store.aclose()
    return rows


def _open_rows(path: Path, rows: list[dict[str, Any]], reps: int) -> list[dict[str, Any]]:
    """Opening the store file with its integrity check (`PRAGMA quick_check(1)`, issue #16 item 13), first
    in a process and again (cached); ratio against loading the biggest session of the same file."""
    from flower.stores import _sqlite_file as sqlite_module

    loads = [r for r in rows if r["case"].startswith("load ") and r["case"].endswith(": SqliteSessionStore")]
    base = loads[-1]["value"] if loads else None
    mb = path.stat().st_size / 1e6
    first, again = [], []
    for _ in range(reps):
        sqlite_module._CHECKED.clear()
        for bucket in (first, again):
            start = time.perf_counter()
            SqliteSessionStore(path, readonly=True).close()
            bucket.append(time.perf_counter() - start)
    out = []
    for case, samples in (("open + quick_check, first in process", first), ("open, already checked", again)):
        value = statistics.median(samples)
        out.append(_row(f"{case} ({mb:.0f} MB file)", value, "s", value / base if base else None,
                        "ratio: against the biggest load"))
    return out


def run(tiny: bool = False) -> list[dict[str, Any]]:
    schema = f"flower_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return asyncio.run(_run(tiny, Path(tmp), schema))
        finally:
            if not tiny and _pg_factory(schema) is not None:
                _drop_schema(schema)


if __name__ == "__main__":
    for row in run(tiny=os.environ.get("TINY") == "1"):
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        print(f"{row['case']:<58} {row['value']:>12.4g} {row['unit']:<10} {ratio:>8}  {row['note']}")
