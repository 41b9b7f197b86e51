"""Endurance: a long run against a plain agent that auto-compacts, through the real CLI (P-1, S-22..S-24).

One scripted task, run twice on the same scripted model (`flower.testing.ScriptedAPI`, handler form) and
the same plan, with a 200k-token window as for real models:

(a) plain SDK: one agent does everything on its main thread, the CLI's auto-compact ON
    (`CLAUDE_CODE_AUTO_COMPACT_WINDOW`); the fake answers each compaction request with a summary of
    about 3k tokens;
(b) flower: `Runtime` + `coordinator()` with one worker type, every layer on (refreshes included: the live
    session is resumed through the rewriting store when its stale results pay for the cache they break),
    generations at the window (75% of it);
(c) the same flower run with a cost-driven handoff threshold (40k and 30k tokens): a handoff whenever the
    main context reaches it, whatever the window (`HandoffPolicy(at=...)`).

The plan (deterministic, `plan()`): `turns` units. Nine in ten are glances: a Read of a small note (300 to
1,500 chars) that both variants make on their main thread. One in ten is a work unit: three generator
commands with outputs of 2,000 to 60,000 chars (one in five fails with exit 1). The plain agent runs them
on its main thread; flower's coordinator dispatches a worker that runs them and hands back a short reply.
So flower's main thread makes `turns` turns and the plain one `turns` + 2 per work unit.

Measured, side by side: main-thread input tokens summed over the run (input + cache read + cache
creation, as the fake reported them: the cost driver) and their ratio; the same priced as the API prices
them (cache read 0.1x, cache write 1.25x the input price); the cache-read share; peak and
median main context; compactions vs handoffs; seconds per main turn in the first vs the last 10% of
turns; the RSS of the flower process (a child of the bench, so the fake is not counted) in the first vs the last 10%; store bytes per
turn by quarter; the chars kept off the main thread (spilled, and worker outputs that never reached it) and
the tokens the refreshes dropped from it (expired results).

    python -m bench --only endurance          # 1,000 flower main turns
    python -m bench.endurance --tiny          # 60 turns, a 100k window (the CLI's minimum for compaction)
    python -m bench.endurance --long          # 10,000 turns
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions

from bench._table import row
from flower import texts
from flower.agent.roles import coordinator, worker
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.runtime import Runtime
from flower.testing import Request, ScriptedAPI, Step, collect, text, tool_use

BENCH = "endurance"
PRICE_READ, PRICE_WRITE = 0.1, 1.25
"""The API's prices of a cache read and a cache write (5-minute), as multiples of the input price."""
AT = (40_000, 30_000)
"""The cost-driven handoff thresholds of variant (c), in tokens."""
COMPACT_MARKER = "Your task is to create a detailed summary of the conversation"
HANDOFF_MARKER = texts.HANDOFF_REQUEST.splitlines()[0]
PROMPT = "Work through the backlog in notes/: glance at each note, run the generators for each work item."
GENERATOR = """\
import sys
size, fail = int(sys.argv[1]), sys.argv[2] == "1"
line = "row {:06d}: value=" + "x" * 48
out = "\\n".join(line.format(i) for i in range(size // 64 + 1))
print(out[:size])
sys.exit(1 if fail else 0)
"""


@dataclass(frozen=True)
class Unit:
    kind: str
    """"glance" or "work"."""
    index: int
    note: str = ""
    outputs: tuple[tuple[int, bool], ...] = ()
    """(chars, fails) of each generator call of a work unit."""


def plan(turns: int) -> list[Unit]:
    """The task, the same for both variants: a deterministic mix of glances and work units."""
    units: list[Unit] = []
    for i in range(turns):
        if i % 10 == 9:
            sizes = tuple((2_000 + (i * 7_919 + k * 104_729) % 58_000, (i // 10 + k) % 5 == 4) for k in range(3))
            units.append(Unit("work", i, outputs=sizes))
        else:
            units.append(Unit("glance", i, note=f"notes/note-{i % 50:02d}.md"))
    return units


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "notes").mkdir(parents=True)
    for k in range(50):
        size = 300 + (k * 211) % 1_200
        body = f"# note {k}\n" + ("Backlog item: check the importer's handling of quoted fields. " * 30)
        (ws / "notes" / f"note-{k:02d}.md").write_text(body[:size] + "\n")
    (ws / "gen.py").write_text(GENERATOR)
    return ws


def _command(size: int, fails: bool) -> dict[str, Any]:
    return {"command": f"python3 gen.py {size} {int(fails)}", "description": "Run a generator"}


SUMMARY = ("Summary of the work so far: the backlog notes were read one by one; each work item ran its "
           "three generators; outputs were long row listings, some generators failed with exit 1. ") * 80
HANDOFF_DOC = (
    "## Doing\nWorking through the backlog in notes/: glances, and a worker per work item.\n"
    "## Decided\nOne worker per work item; its reply is the evidence.\n"
    "## Dead ends\nNone.\n## Next\n1. Continue with the next note or work item.\n"
    "## Scene\nnotes/note-NN.md, gen.py; the workbench holds the worker outputs."
)
HANDBACK = ("Conclusion: the three generators ran; {ok} succeeded, {bad} failed with exit 1. Evidence: row "
            "counts as expected; the long outputs are in the workbench. Outputs: none written. Unverified: "
            "nothing. ") * 2


@dataclass
class Tape:
    """What the handler saw, in this process: per main request, its time and this process's RSS."""

    times: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    """Resident bytes of the flower process (the runtime and its hooks; the CLI and the fake apart)."""
    compactions: int = 0
    handoffs: int = 0
    refreshes: int = 0
    restarts: int = 0
    resumed: list[bool] = field(default_factory=list)
    """Per restart: whether its first main request continued the recorded session (more than the prompt)."""
    store_sizes: list[tuple[int, int]] = field(default_factory=list)
    """(main turns so far, store bytes) sampled every quarter of the plan."""


def _rss(pid: int | None) -> int:
    """Resident bytes of process `pid` (0 when it is gone or unknown)."""
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class Driver:
    """The scripted model as a handler: the next step of the plan for each request, by thread."""

    def __init__(self, units: Sequence[Unit], *, flower: bool, store: Path | None = None,
                 kill_every: int | None = None) -> None:
        self.flower = flower
        self.kill_every = kill_every
        self.killed = False
        """The flower process was SIGKILLed by this driver and has not been started again yet."""
        self._after_kill = False
        self.pid: int | None = None
        """The flower process, whose RSS is sampled at each main request."""
        self.tape = Tape()
        self.store = store
        self._main: list[Step] = []
        self._work: dict[str, list[Step]] = {}
        for unit in units:
            if unit.kind == "glance":
                self._main.append(tool_use("Read", {"file_path": unit.note}))
            elif flower:
                marker = f"UNIT-{unit.index:05d}"
                self._main.append(tool_use("Agent", {"description": f"work item {unit.index}",
                                                     "prompt": f"{marker}: run the three generators and report.",
                                                     "subagent_type": "runner", "run_in_background": False}))
                bad = sum(fails for _, fails in unit.outputs)
                self._work[marker] = [tool_use("Bash", _command(s, f)) for s, f in unit.outputs] + [
                    text(HANDBACK.format(ok=3 - bad, bad=bad))]
            else:
                self._main.extend(tool_use("Bash", _command(s, f)) for s, f in unit.outputs)
        self._main.append(text("The backlog is done."))
        self.planned = len(self._main)
        self._threads: dict[str, list[Step]] = {}
        self._lock = threading.Lock()
        self._used = 0

    def __call__(self, request: Request) -> Step | None:
        with self._lock:
            last = request.last_user_text()
            if COMPACT_MARKER in last:
                self.tape.compactions += 1
                return text(SUMMARY)
            if HANDOFF_MARKER in last:
                self.tape.handoffs += 1
                return text(HANDOFF_DOC)
            if request.is_subagent:
                return self._worker(request)
            if texts.REFRESH_CONTINUE in last:
                self.tape.refreshes += 1
            if self._after_kill:  # the first main request of the restarted process: a resume, or a fresh start?
                self._after_kill = False
                self.tape.resumed.append(len(request.messages) > 2)
            step = self._next_main()
            if self.kill_every and self.pid and self._used % self.kill_every == 0 and self._used < self.planned - 1:
                self.killed = self._after_kill = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)  # the flower process and the CLI it started
            return step

    def _next_main(self) -> Step:
        self.tape.times.append(time.monotonic())
        self.tape.rss.append(_rss(self.pid))
        if self.store is not None and self._used % max(1, self.planned // 10) == 0:
            self.tape.store_sizes.append((self._used, _store_bytes(self.store)))
        if self._used >= len(self._main):
            return text("The backlog is done.")
        step = self._main[self._used]
        self._used += 1
        return step

    def _worker(self, request: Request) -> Step:
        queue = self._threads.get(request.thread)
        if queue is None:
            marker = next((m for m in self._work if m in request.text), None)
            queue = self._threads[request.thread] = list(self._work.pop(marker, [text("nothing to do")]))
        return queue.pop(0) if queue else text("done")


def _store_bytes(run_dir: Path) -> int:
    """Bytes of stored entries (the payloads), read through a read-only connection: the file sizes jump
    with SQLite's page allocation and write-ahead log, the entries grow with the run."""
    db = run_dir / "sessions.db"
    if not db.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5)) as conn:
            return int(conn.execute("SELECT coalesce(sum(length(payload)), 0) FROM entries").fetchone()[0])
    except sqlite3.Error:
        return 0


@dataclass
class Measured:
    main_tokens: list[int]
    cache_read: int
    priced: float
    """Main-thread input in input-token equivalents at the API's prices: input 1x, cache read 0.1x, write 1.25x."""
    tape: Tape
    planned: int
    spilled: int = 0
    kept_off: int = 0
    dropped: int = 0
    """Tokens the refreshes dropped from the live context (stale results; the store keeps them)."""


def _measure(api: ScriptedAPI, driver: Driver) -> Measured:
    totals, read, priced = [], 0, 0.0
    for request in api.main_requests:
        usage = api.usage(request)
        if usage is None or COMPACT_MARKER in request.last_user_text():
            continue
        totals.append(usage["input_tokens"] + usage["cache_read_input_tokens"]
                      + usage["cache_creation_input_tokens"])
        read += usage["cache_read_input_tokens"]
        priced += (usage["input_tokens"] + PRICE_READ * usage["cache_read_input_tokens"]
                   + PRICE_WRITE * usage["cache_creation_input_tokens"])
    return Measured(totals, read, priced, driver.tape, driver.planned)


async def run_plain(root: Path, units: Sequence[Unit], window: int) -> Measured:
    ws = make_workspace(root / "plain")
    driver = Driver(units, flower=False)
    with ScriptedAPI(handler=driver) as api:
        options = ClaudeAgentOptions(
            system_prompt={"type": "preset", "preset": "claude_code"}, allowed_tools=["Bash", "Read"],
            cwd=str(ws), setting_sources=[],
            env=api.cli_env(root / "plain" / "home", CLAUDE_CODE_AUTO_COMPACT_WINDOW=str(window)))
        done = await collect(PROMPT, options)
        if done.error is not None or done.result.is_error:
            raise RuntimeError(f"the plain run failed: {done.error or done.result.result}")
    return _measure(api, driver)


def flower_child(ws: Path, run_dir: Path, base_url: str, home: Path, window: int, durable: bool = False,
                 at: int | None = None) -> None:
    """The flower side, in a process of its own so that its RSS is flower's, not the fake's. `durable`: the
    same step as a one-step durable workflow, which a restarted process continues; `at`: hand off whenever
    the main context reaches that many tokens."""
    from flower.testing.server import cli_env

    runner = worker("Runs the generators of one work item and reports.", "You run commands.",
                    tools=["Bash", "Read"])
    lead = coordinator("lead", "Goal: work through the backlog.", {"runner": runner})
    runtime = Runtime(ws, run_dir=run_dir, env=cli_env(base_url, home), run_id="endurance",
                      handoff=HandoffPolicy(window=window, at=at, max_generations=1_000))
    if durable:
        from flower.flow.step import Step
        from flower.flow.workflow import Workflow

        ctx = Workflow([Step("endurance", lead, PROMPT)], name="endurance").run_sync(runtime)
        if ctx.failed_at:
            raise SystemExit(f"the durable flower run failed: {ctx.results.get(ctx.failed_at)}")
        return
    dropped: list[int] = []

    def on_event(event: Any) -> None:
        if event.kind == "system" and event.payload.get("subtype") == "refresh":
            dropped.append(int(event.payload.get("stale") or 0))

    result = runtime.run_sync(lead, PROMPT, step_name="endurance", on_event=on_event)
    if not result.ok:
        raise SystemExit(f"the flower run failed: {result.error}")
    (run_dir / "bench-refreshes.json").write_text(json.dumps(dropped))


async def run_flower(root: Path, units: Sequence[Unit], window: int, kill_every: int | None = None,
                     at: int | None = None) -> Measured:
    """flower's run; with `kill_every`, a durable workflow whose process is SIGKILLed (with the CLI it
    started) every `kill_every` main turns and started again with the same command; with `at`, handoffs
    at that many tokens of main context."""
    label = ("durable" if kill_every else "flower") + (f"-at-{at}" if at else "")
    ws = make_workspace(root / label)
    run_dir = root / label / "runs"
    driver = Driver(units, flower=True, store=run_dir, kill_every=kill_every)
    with ScriptedAPI(handler=driver) as api:
        args = [sys.executable, "-m", "bench.endurance", "--child", str(ws), str(run_dir), api.base_url,
                str(root / label / "home"), str(window)] + (["--durable"] if kill_every else []) + (
                    [f"--at={at}"] if at else [])
        while True:
            process = await anyio.open_process(args, cwd=Path(__file__).resolve().parents[1],
                                               start_new_session=True)
            driver.pid = process.pid
            code = await process.wait()
            if code == -signal.SIGKILL and driver.killed:
                driver.killed = False
                driver.tape.restarts += 1
                continue
            if code != 0:
                error = (await process.stderr.receive()).decode(errors="replace") if process.stderr else ""
                raise RuntimeError(f"the {label} run failed (exit {code}): {error.strip()[-300:]}")
            break
    measured = _measure(api, driver)
    driver.tape.store_sizes.append((len(driver.tape.times), _store_bytes(run_dir)))
    measured.kept_off = sum(size for unit in units for size, _ in unit.outputs)
    log = ws / ".flower" / "spill" / "log.jsonl"
    if log.exists():
        measured.spilled = sum(int(json.loads(line)["chars"]) for line in log.read_text().splitlines() if line)
    refreshes = run_dir / "bench-refreshes.json"
    if refreshes.exists():
        measured.dropped = sum(json.loads(refreshes.read_text()))
    return measured


def _tenth(values: Sequence[float], last: bool) -> list[float]:
    n = max(1, len(values) // 10)
    return list(values[-n:] if last else values[:n])


def _gaps(times: Sequence[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def rows(a: Measured, b: Measured, turns: int, window: int) -> list[dict[str, Any]]:
    sum_a, sum_b = sum(a.main_tokens), sum(b.main_tokens)
    ratio = sum_b / sum_a
    gaps = _gaps(b.tape.times)
    t_first, t_last = statistics.median(_tenth(gaps, False)), statistics.median(_tenth(gaps, True))
    r_first, r_last = statistics.median(_tenth(b.tape.rss, False)), statistics.median(_tenth(b.tape.rss, True))
    sizes = dict(b.tape.store_sizes)  # main turns so far -> store bytes, sampled every tenth of the plan
    marks = sorted(sizes)
    start, middle, end = marks[0], marks[len(marks) // 2], marks[-1]
    first_half = (sizes[middle] - sizes[start]) / max(1, middle - start)
    second_half = (sizes[end] - sizes[middle]) / max(1, end - middle)
    growth = second_half / max(1e-9, first_half)
    share = lambda m: m.cache_read / max(1, sum(m.main_tokens))  # noqa: E731
    label = f"{turns:,} flower main turns, {window // 1000}k window"
    return [
        row(BENCH, "plain (auto-compact): main input tokens, summed", sum_a, "tokens", None,
            f"{len(a.main_tokens):,} main requests; {a.tape.compactions} compactions; {label}"),
        row(BENCH, "flower: main input tokens, summed", sum_b, "tokens", ratio,
            f"vs plain; goal <= 0.20x: {_met(ratio <= 0.20)}; {len(b.main_tokens):,} main requests; "
            f"{b.tape.handoffs} handoffs, {b.tape.refreshes} refreshes"),
        row(BENCH, "flower: main input priced as the API prices it", b.priced, "input-token eq.", b.priced / a.priced,
            f"vs plain {a.priced:,.0f}; cache read 0.1x, cache write 1.25x the input price"),
        row(BENCH, "main context, peak", max(b.main_tokens), "tokens", max(b.main_tokens) / max(a.main_tokens),
            f"flower vs plain {max(a.main_tokens):,}"),
        row(BENCH, "main context, median", statistics.median(b.main_tokens), "tokens",
            statistics.median(b.main_tokens) / statistics.median(a.main_tokens),
            f"flower vs plain {statistics.median(a.main_tokens):,.0f}"),
        row(BENCH, "cache-read share of main input", share(b), "share", None,
            f"flower; plain {share(a):.3f} (the fake's prompt-cache simulation)"),
        row(BENCH, "flower: seconds per main turn, last 10% vs first", t_last, "s", t_last / t_first,
            f"first 10% {t_first:.3f}s; goal <= 1.2x: {_met(t_last <= 1.2 * t_first)}"),
        row(BENCH, "flower: process RSS, last 10% vs first", r_last / 2**20, "MiB", r_last / r_first,
            f"first 10% {r_first / 2**20:.1f} MiB, peak {max(b.tape.rss) / 2**20:.1f} MiB; goal <= 1.2x: "
            f"{_met(r_last <= 1.2 * r_first)}"),
        row(BENCH, "flower: store bytes per main turn, second half vs first", second_half, "bytes/turn", growth,
            f"first half {first_half:,.0f}; {sizes[end]:,} bytes of entries in all; goal linear or better (<= 1.25x): "
            f"{_met(growth <= 1.25)}"),
        row(BENCH, "flower: chars kept off the main thread", b.kept_off, "chars", None,
            f"the work units' outputs, run by workers; {b.spilled:,} chars of them spilled to files"),
        row(BENCH, "flower: tokens the refreshes dropped", b.dropped, "tokens", None,
            f"stale glance and Read results of the live session, over {b.tape.refreshes} refreshes (the store "
            f"keeps every original; a re-read costs one Read)"),
    ]


def run(tiny: bool = False, long: bool = False) -> list[dict[str, Any]]:
    turns, window = (60, 100_000) if tiny else ((10_000 if long else 1_000), 200_000)
    units = plan(turns)

    every = 20 if tiny else 250

    ats = (window // 4,) if tiny else AT

    async def runs() -> tuple[Measured, Measured, Measured, list[Measured], Measured]:
        with tempfile.TemporaryDirectory(prefix="flower-bench-endurance-") as tmp:
            plain = await run_plain(Path(tmp), units, window)
            ours = await run_flower(Path(tmp), units, window)
            durable = await run_flower(Path(tmp), units, window, kill_every=every)
            early = [await run_flower(Path(tmp), units, window, at=at) for at in ats]
            return plain, ours, durable, early, await run_flower(Path(tmp), units, window, kill_every=every,
                                                                 at=ats[0])

    plain, ours, durable, early, durable_at = anyio.run(runs)
    return (rows(plain, ours, turns, window) + [r for at, run in zip(ats, early) for r in at_rows(plain, run, at)]
            + restart_rows(ours, durable, every) + restart_rows(early[0], durable_at, every, ats[0]))


def at_rows(plain: Measured, early: Measured, at: int) -> list[dict[str, Any]]:
    """Variant (c): the same flower run with handoffs whenever the main context reaches `at` tokens."""
    summed, base = sum(early.main_tokens), sum(plain.main_tokens)
    tape = early.tape
    return [
        row(BENCH, f"flower, handoff at {at // 1000}k: main input, summed", summed, "tokens", summed / base,
            f"vs plain; goal <= 0.20x: {_met(summed <= 0.20 * base)}; {tape.handoffs} handoffs (plain: "
            f"{plain.tape.compactions} compactions), {tape.refreshes} refreshes; median context "
            f"{statistics.median(early.main_tokens):,.0f}"),
        row(BENCH, f"flower, handoff at {at // 1000}k: main input priced", early.priced, "input-token eq.",
            early.priced / plain.priced, "vs plain, at the API's cache prices"),
    ]


def restart_rows(ours: Measured, durable: Measured, every: int, at: int | None = None) -> list[dict[str, Any]]:
    """The durable run against its uninterrupted twin (same handoff policy)."""
    sum_b, sum_d = sum(ours.main_tokens), sum(durable.main_tokens)
    tape = durable.tape
    resumed = sum(tape.resumed)
    name = "durable flower" + (f", handoff at {at // 1000}k" if at else "")
    return [
        row(BENCH, f"{name}, SIGKILLed every {every} turns: main input", sum_d, "tokens", sum_d / sum_b,
            f"vs the uninterrupted run; goal <= 1.05x: {_met(sum_d <= 1.05 * sum_b)}; {tape.restarts} "
            f"restarts by running the same command again; {tape.handoffs} handoffs, {tape.refreshes} refreshes, "
            f"median context {statistics.median(durable.main_tokens):,.0f} (uninterrupted: {ours.tape.handoffs}, "
            f"{ours.tape.refreshes}, {statistics.median(ours.main_tokens):,.0f})"),
        row(BENCH, f"{name}: restarts that resumed the recorded session", resumed, "restarts", None,
            f"of {len(tape.resumed)}; a fresh start would repeat finished turns: "
            f"{_met(resumed == len(tape.resumed) == tape.restarts and tape.restarts > 0)}"),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        ws, run_dir, url, home, size = sys.argv[2:7]
        at = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--at=")), None)
        flower_child(Path(ws), Path(run_dir), url, Path(home), int(size), durable="--durable" in sys.argv, at=at)
        raise SystemExit(0)
    for r in run(tiny="--tiny" in sys.argv, long="--long" in sys.argv):
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        print(f"{r['case']:52} {r['value']:>14,.1f} {r['unit']:10} {ratio:>7}  {r['note']}")
