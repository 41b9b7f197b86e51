"""Endurance: a long run against a plain agent that auto-compacts, through the real CLI (P-1, S-22..S-24).

One scripted task, run twice on the same scripted model (`flower.testing.ScriptedAPI`, handler form) and
the same plan, with a 200k-token window as for real models:

(a) plain SDK: one agent does everything on its main thread, the CLI's auto-compact ON
    (`CLAUDE_CODE_AUTO_COMPACT_WINDOW`); the fake answers each compaction request with a summary of
    about 3k tokens;
(b) flower: `Runtime` + `coordinator()` with one worker type, every layer on (refreshes included: the live
    session is resumed through the rewriting store when its stale results pay for the cache they break),
    generations at the window (75% of it);
(c) Claude Code alone with its own subagents: the plain agent of (a), auto-compact on, that dispatches a
    subagent (`agents={"runner": ...}`) for each work unit as flower's coordinator does and keeps its Reads
    on the main thread: the peer a user would pick, without flower's layers (no spill, no rewriting store,
    no generations);
(d) flower with the heavier coordinator start of a real day-long run (HT001): its instructions padded to
    about 34k tokens of context at the first request;
(e) flower as a durable workflow whose process is SIGKILLed every 250 main turns and started again.

The recall probe (`bench._recall`): the first glances read eight decision notes and the last turn needs
them (its answer names the decisions its context holds); the scripted model carries every decision its
context holds into each handoff document and each compaction summary, so the count says whether the way
each run replaces its context lets them through.

The plan (deterministic, `plan()`): `turns` units. Nine in ten are glances: a Read of a small note (300 to
1,500 chars) that both variants make on their main thread. One in ten is a work unit: three generator
commands with outputs of 2,000 to 60,000 chars (one in five fails with exit 1). The plain agent runs them
on its main thread; flower's coordinator dispatches a worker that runs them and hands back a short reply.
So flower's main thread makes `turns` turns and the plain one `turns` + 2 per work unit.

Measured, side by side: main-thread input tokens summed over the run (input + cache read + cache
creation, as the fake reported them: the cost driver) and their ratio; the same priced as the API prices
them (cache read 0.1x, cache write 1.25x the input price), for every row; the shortest generation of the
heavy start; the planted decisions in each run's final answer; the cache-read share; peak and
median main context; compactions vs handoffs; seconds per main turn in the first vs the last 10% of
turns; the RSS of the flower process (a child of the bench, so the fake is not counted) in the first vs the last 10%; store bytes per
turn by quarter; the chars kept off the main thread (spilled, and worker outputs that never reached it),
the tokens the refreshes dropped from it (expired results), and what a resume of each generation at its end
would feed back (expired calls removed as pairs or kept with a note).

    python -m bench --only endurance          # 1,000 flower main turns
    python -m bench.endurance --tiny          # 60 turns, a 100k window (the CLI's minimum for compaction)
    python -m bench.endurance --long          # 10,000 turns of flower alone: is a turn's priced cost, and the
                                              # process's RSS, at the end what it was at the start?
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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
from claude_agent_sdk import AgentDefinition, ClaudeAgentOptions

from bench import _recall
from bench._table import row
from flower import texts
from flower.agent.roles import coordinator, worker
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.runtime import Runtime
from flower.testing import Request, ScriptedAPI, Step, collect, text, tool_use

BENCH = "endurance"
PRICE_READ, PRICE_WRITE = 0.1, 1.25
"""The API's prices of a cache read and a cache write (5-minute), as multiples of the input price."""
PAD_CHARS = 112_000
"""Characters added to the heavy coordinator's instructions: about 28k tokens on top of its 6k start."""
MIN_TURNS = 30
"""`HandoffPolicy.min_turns`: no generation of the default policy should be shorter."""
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
    """The task, the same for every variant: a deterministic mix of glances and work units; the first glances
    read the recall probe's decision notes."""
    units: list[Unit] = []
    decisions = [_recall.decision_note(ident) for ident in _recall.DECISIONS]
    for i in range(turns):
        if i < len(decisions):
            units.append(Unit("glance", i, note=decisions[i]))
        elif i % 10 == 9:
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
    _recall.plant(ws)
    return ws


def _command(size: int, fails: bool) -> dict[str, Any]:
    return {"command": f"python3 gen.py {size} {int(fails)}", "description": "Run a generator"}


SUMMARY = ("Summary of the work so far: the backlog notes were read one by one; each work item ran its "
           "three generators; outputs were long row listings, some generators failed with exit 1. ") * 80
HANDOFF_DOC = (
    "## Doing\nWorking through the backlog in notes/: glances, and a worker per work item.\n"
    "## Decided\nOne worker per work item; its reply is the evidence.\n{decided}\n"
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
    handoff_at: list[int] = field(default_factory=list)
    """Main requests made before each handoff request (the generations' boundaries)."""
    refreshes: int = 0
    restarts: int = 0
    resumed: list[bool] = field(default_factory=list)
    """Per restart: whether its first main request continued the session the kill interrupted: it opens with
    that session's first message and carries more than it (or that session had nothing more yet)."""
    restart_notes: list[str] = field(default_factory=list)
    """Per restart: how many messages the interrupted request and the restarted one carried."""
    store_sizes: list[tuple[int, int]] = field(default_factory=list)
    """(main turns so far, store bytes) sampled every quarter of the plan."""
    recalled: int = 0
    """Planted decisions the final answer named (the recall probe)."""


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
        self._killed: tuple[str, int] = ("", 0)
        """The first message and the message count of the main request the kill interrupted."""
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
        self._main.append(text("The backlog is done."))  # replaced by the recall probe's answer (`_next_main`)
        self.planned = len(self._main)
        self._threads: dict[str, list[Step]] = {}
        self._lock = threading.Lock()
        self._used = 0

    def __call__(self, request: Request) -> Step | None:
        with self._lock:
            last = request.last_user_text()
            if COMPACT_MARKER in last:
                self.tape.compactions += 1
                return text(SUMMARY + "\nDecisions so far:\n" + _recall.carried(request.text))
            if HANDOFF_MARKER in last:
                self.tape.handoffs += 1
                self.tape.handoff_at.append(len(self.tape.times))
                return text(HANDOFF_DOC.format(decided=_recall.carried(request.text)))
            if request.is_subagent:
                return self._worker(request)
            if texts.REFRESH_CONTINUE in last:
                self.tape.refreshes += 1
            if self._after_kill:  # the first main request of the restarted process: a resume, or a fresh start?
                self._after_kill = False
                first, count = self._killed
                same = _first_text(request) == first
                self.tape.resumed.append(same and (len(request.messages) > 2 or count <= 2))
                self.tape.restart_notes.append(f"{first} {count}->{len(request.messages)}{'' if same else ' then ' + _first_text(request)}")
            step = self._next_main(request)
            if self.kill_every and self.pid and self._used % self.kill_every == 0 and self._used < self.planned - 1:
                self.killed = self._after_kill = True
                self._killed = (_first_text(request), len(request.messages))
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)  # the flower process and the CLI it started
            return step

    def _next_main(self, request: Request) -> Step:
        self.tape.times.append(time.monotonic())
        self.tape.rss.append(_rss(self.pid))
        if self.store is not None and self._used % max(1, self.planned // 10) == 0:
            self.tape.store_sizes.append((self._used, _store_bytes(self.store)))
        if self._used >= len(self._main) - 1:  # the last turn needs the planted decisions: those it still has
            self._used += 1
            answer = _recall.carried(request.text)
            self.tape.recalled = _recall.recalled(answer)
            return text(f"The backlog is done. Applied throughout:\n{answer}")
        step = self._main[self._used]
        self._used += 1
        return step

    def _worker(self, request: Request) -> Step:
        queue = self._threads.get(request.thread)
        if queue is None:
            marker = next((m for m in self._work if m in request.text), None)
            queue = self._threads[request.thread] = list(self._work.pop(marker, [text("nothing to do")]))
        return queue.pop(0) if queue else text("done")


_GENERATION = re.compile(r"in a fresh session \(generation (\d+)\)")


def _first_text(request: Request) -> str:
    """Which generation a request belongs to, from its first message: the step's prompt (generation 1) or a
    generation's handoff continuation, which names its number."""
    first = json.dumps(request.messages[0].get("content") if request.messages else None)
    found = _GENERATION.search(first)
    return f"generation {found.group(1)}" if found else "generation 1"


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
    resume: tuple[int, int, int, int] = (0, 0, 0, 0)
    """A resume of each main session at the end: model-visible chars before and after the rewrite, expired
    calls removed with their results, expired results kept as a one-line note."""
    priced_each: list[float] = field(default_factory=list)
    """`priced` per main request (handoff requests included: they are part of what a turn costs)."""


def _measure(api: ScriptedAPI, driver: Driver) -> Measured:
    totals, read, per_request = [], 0, []
    for request in api.main_requests:
        usage = api.usage(request)
        if usage is None or COMPACT_MARKER in request.last_user_text():
            continue
        totals.append(usage["input_tokens"] + usage["cache_read_input_tokens"]
                      + usage["cache_creation_input_tokens"])
        read += usage["cache_read_input_tokens"]
        per_request.append(usage["input_tokens"] + PRICE_READ * usage["cache_read_input_tokens"]
                           + PRICE_WRITE * usage["cache_creation_input_tokens"])
    return Measured(totals, read, sum(per_request), driver.tape, driver.planned, priced_each=per_request)


RUNNER = ("Runs the generators of one work item and reports.", "You run commands.")
"""The worker type of every variant that delegates: description, instructions."""


async def run_plain(root: Path, units: Sequence[Unit], window: int, subagents: bool = False) -> Measured:
    """Claude Code alone, auto-compact on; with `subagents`, it dispatches a subagent of its own for each
    work unit (variant c) instead of running the generators on its main thread (variant a)."""
    label = "subagents" if subagents else "plain"
    ws = make_workspace(root / label)
    driver = Driver(units, flower=subagents)
    with ScriptedAPI(handler=driver) as api:
        agents = {"runner": AgentDefinition(description=RUNNER[0], prompt=RUNNER[1], tools=["Bash", "Read"])}
        options = ClaudeAgentOptions(
            system_prompt={"type": "preset", "preset": "claude_code"},
            allowed_tools=["Bash", "Read", *(["Agent"] if subagents else [])], agents=agents if subagents else None,
            cwd=str(ws), setting_sources=[],
            env=api.cli_env(root / label / "home", CLAUDE_CODE_AUTO_COMPACT_WINDOW=str(window)))
        done = await collect(PROMPT, options)
        if done.error is not None or done.result.is_error:
            raise RuntimeError(f"the {label} run failed: {done.error or done.result.result}")
    return _measure(api, driver)


def padding(chars: int) -> str:
    """Standing instructions of a heavy coordinator (a day-long run's conventions), `chars` long."""
    rule = ("Convention {n}: keep each work item's evidence in the workbench, name the file in the reply, "
            "and record any decision that changes the importer's behaviour before dispatching the next item. ")
    out, n = [], 0
    while sum(map(len, out)) < chars:
        out.append(rule.format(n=n))
        n += 1
    return "".join(out)[:chars]


def flower_child(ws: Path, run_dir: Path, base_url: str, home: Path, window: int, durable: bool = False,
                 pad: int = 0) -> None:
    """The flower side, in a process of its own so that its RSS is flower's, not the fake's. `durable`: the
    same step as a one-step durable workflow, which a restarted process continues; `pad`: that many chars of
    standing instructions added to the coordinator's (the heavy start)."""
    from flower.testing.server import cli_env

    runner = worker(*RUNNER, tools=["Bash", "Read"])
    goal = "Goal: work through the backlog." + (f"\n\n{padding(pad)}" if pad else "")
    lead = coordinator("lead", goal, {"runner": runner})
    runtime = Runtime(ws, run_dir=run_dir, env=cli_env(base_url, home), run_id="endurance",
                      handoff=HandoffPolicy(window=window, max_generations=1_000))
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
                     pad: int = 0) -> Measured:
    """flower's run; with `kill_every`, a durable workflow whose process is SIGKILLed (with the CLI it
    started) every `kill_every` main turns and started again with the same command; with `pad`, the heavy
    coordinator start."""
    label = ("durable" if kill_every else "flower") + ("-heavy" if pad else "")
    ws = make_workspace(root / label)
    run_dir = root / label / "runs"
    driver = Driver(units, flower=True, store=run_dir, kill_every=kill_every)
    with ScriptedAPI(handler=driver) as api:
        args = [sys.executable, "-m", "bench.endurance", "--child", str(ws), str(run_dir), api.base_url,
                str(root / label / "home"), str(window)] + (["--durable"] if kill_every else []) + (
                    [f"--pad={pad}"] if pad else [])
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
    measured.resume = await anyio.to_thread.run_sync(_resume_payload, run_dir)  # the store's own event loop
    return measured


def _resume_payload(run_dir: Path) -> tuple[int, int, int, int]:
    """What a resume of each main session of the run would feed back (the rewrite's defaults)."""
    from flower.report.entries import visible_chars
    from flower.report.rundata import load_run
    from flower.stores.opening import close_store, open_store
    from flower.stores.rewrite import rewrite

    store = open_store(None, run_dir)
    try:
        data = load_run(run_dir, store, own_store=True)
    finally:
        close_store(store)
    before = after = removed = noted = 0
    for entries in data.main.values():
        out, report = rewrite([dict(e) for e in entries])
        kept = {b.get("id") for e in out if e.get("type") == "assistant"
                for b in (e.get("message") or {}).get("content") or [] if isinstance(b, dict)}
        expired = [d.tool_use_id for d in report.details if d.kind == "expired"]
        removed += sum(call not in kept for call in expired)
        noted += sum(call in kept for call in expired)
        before, after = before + visible_chars(entries), after + visible_chars(out)
    return before, after, removed, noted


def _tenth(values: Sequence[float], last: bool) -> list[float]:
    n = max(1, len(values) // 10)
    return list(values[-n:] if last else values[:n])


def _gaps(times: Sequence[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def generations(tape: Tape) -> list[int]:
    """Main requests of each finished generation (the last one, cut by the end of the plan, left out)."""
    bounds = [0, *tape.handoff_at]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def rows(a: Measured, b: Measured, c: Measured, turns: int, window: int) -> list[dict[str, Any]]:
    """Plain (a), flower (b) and Claude Code with its own subagents (c), side by side."""
    sum_a, sum_b, sum_c = sum(a.main_tokens), sum(b.main_tokens), sum(c.main_tokens)
    ratio, priced = sum_b / sum_a, b.priced / a.priced
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
    planted = len(_recall.DECISIONS)
    return [
        row(BENCH, "plain (auto-compact): main input tokens, summed", sum_a, "tokens", None,
            f"{len(a.main_tokens):,} main requests; {a.tape.compactions} compactions; {label}"),
        row(BENCH, "plain (auto-compact): main input priced", a.priced, "input-token eq.", None,
            "as the API prices it: input 1x, cache read 0.1x, cache write 1.25x"),
        row(BENCH, "Claude Code + own subagents: main input, summed", sum_c, "tokens", sum_c / sum_a,
            f"vs plain; {len(c.main_tokens):,} main requests; {c.tape.compactions} compactions; a subagent per "
            f"work unit, Reads on the main thread, auto-compact on"),
        row(BENCH, "Claude Code + own subagents: main input priced", c.priced, "input-token eq.", c.priced / a.priced,
            "vs plain"),
        row(BENCH, "flower: main input tokens, summed", sum_b, "tokens", ratio,
            f"vs plain; goal <= 0.25x: {_met(ratio <= 0.25)}; {len(b.main_tokens):,} main requests; "
            f"{b.tape.handoffs} handoffs, {b.tape.refreshes} refreshes"),
        row(BENCH, "flower: main input priced as the API prices it", b.priced, "input-token eq.", priced,
            f"vs plain {a.priced:,.0f}; goal <= 0.30x: {_met(priced <= 0.30)}"),
        row(BENCH, "flower vs Claude Code + own subagents, priced", b.priced, "input-token eq.", b.priced / c.priced,
            f"vs {c.priced:,.0f}; goal <= 0.60x: {_met(b.priced <= 0.60 * c.priced)}; summed "
            f"{sum_b / sum_c:.3f}x"),
        row(BENCH, "recall: planted decisions in the final answer", b.tape.recalled, "decisions", None,
            f"flower, of {planted} (goal: all: {_met(b.tape.recalled == planted)}); plain {a.tape.recalled} after "
            f"{a.tape.compactions} compactions, Claude Code + own subagents {c.tape.recalled}; scripted model"),
        row(BENCH, "main context, peak", max(b.main_tokens), "tokens", max(b.main_tokens) / max(a.main_tokens),
            f"flower vs plain {max(a.main_tokens):,}; Claude Code + own subagents {max(c.main_tokens):,}"),
        row(BENCH, "main context, median", statistics.median(b.main_tokens), "tokens",
            statistics.median(b.main_tokens) / statistics.median(a.main_tokens),
            f"flower vs plain {statistics.median(a.main_tokens):,.0f}; Claude Code + own subagents "
            f"{statistics.median(c.main_tokens):,.0f}"),
        row(BENCH, "cache-read share of main input", share(b), "share", None,
            f"flower; plain {share(a):.3f}, Claude Code + own subagents {share(c):.3f} (the fake's prompt-cache "
            f"simulation)"),
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
        row(BENCH, "flower: a resume of each generation at its end feeds back", b.resume[1], "chars",
            b.resume[1] / max(1, b.resume[0]),
            f"of {b.resume[0]:,} model-visible chars; {b.resume[2]:,} expired calls removed with their results "
            f"(S-20), {b.resume[3]:,} kept with a one-line note; the store keeps every original"),
        row(BENCH, "flower: tokens the refreshes dropped", b.dropped, "tokens", None,
            f"stale glance and Read results of the live session, over {b.tape.refreshes} refreshes (the store "
            f"keeps every original; a re-read costs one Read)"),
    ]


def heavy_rows(plain: Measured, heavy: Measured) -> list[dict[str, Any]]:
    """Variant (d): the coordinator starts at about 34k tokens (HT001's start)."""
    summed, priced = sum(heavy.main_tokens), heavy.priced / plain.priced
    lengths = generations(heavy.tape)
    shortest = min(lengths) if lengths else len(heavy.main_tokens)  # no handoff: the one generation is the run
    return [
        row(BENCH, "flower, heavy start: main input priced", heavy.priced, "input-token eq.", priced,
            f"vs plain (not padded); goal <= 0.40x: {_met(priced <= 0.40)}; summed {summed:,} "
            f"({summed / sum(plain.main_tokens):.3f}x); first request {heavy.main_tokens[0]:,} tokens; "
            f"{heavy.tape.handoffs} handoffs; median context {statistics.median(heavy.main_tokens):,.0f}"),
        row(BENCH, "flower, heavy start: shortest generation", shortest, "main requests", None,
            f"of {len(lengths)} handed over (lengths {', '.join(map(str, lengths[:8]))}{' ...' if len(lengths) > 8 else ''}); goal >= {MIN_TURNS}: {_met(shortest >= MIN_TURNS)}; recall "
            f"{heavy.tape.recalled} of {len(_recall.DECISIONS)} decisions"),
    ]


def long_rows(ours: Measured, turns: int) -> list[dict[str, Any]]:
    """`--long`: flower alone with the default settings; does a turn cost, and the process weigh, at the end of
    the run what it did at the start?"""
    cost_first, cost_last = (statistics.fmean(_tenth(ours.priced_each, last)) for last in (False, True))
    r_first, r_last = statistics.median(_tenth(ours.tape.rss, False)), statistics.median(_tenth(ours.tape.rss, True))
    gaps = _gaps(ours.tape.times)
    t_first, t_last = statistics.median(_tenth(gaps, False)), statistics.median(_tenth(gaps, True))
    sizes = dict(ours.tape.store_sizes)
    marks = sorted(sizes)
    start, middle, end = marks[0], marks[len(marks) // 2], marks[-1]
    first_half = (sizes[middle] - sizes[start]) / max(1, middle - start)
    second_half = (sizes[end] - sizes[middle]) / max(1, end - middle)
    lengths = generations(ours.tape)
    return [
        row(BENCH, "long: flower main input priced, summed", ours.priced, "input-token eq.", None,
            f"{turns:,} main turns, 200k window, default settings; {len(ours.main_tokens):,} main requests; "
            f"{ours.tape.handoffs} handoffs, {ours.tape.refreshes} refreshes; summed {sum(ours.main_tokens):,} tokens"),
        row(BENCH, "long: priced cost per main request, last 10% vs first", cost_last, "input-token eq.",
            cost_last / cost_first, f"first 10% {cost_first:,.0f}; goal <= 1.1x: {_met(cost_last <= 1.1 * cost_first)}"),
        row(BENCH, "long: process RSS, last 10% vs first", r_last / 2**20, "MiB", r_last / r_first,
            f"first 10% {r_first / 2**20:.1f} MiB, peak {max(ours.tape.rss) / 2**20:.1f} MiB; goal <= 1.2x: "
            f"{_met(r_last <= 1.2 * r_first)}"),
        row(BENCH, "long: seconds per main turn, last 10% vs first", t_last, "s", t_last / t_first,
            f"first 10% {t_first:.3f}s"),
        row(BENCH, "long: store bytes per main turn, second half vs first", second_half, "bytes/turn",
            second_half / max(1e-9, first_half), f"first half {first_half:,.0f}; {sizes[end]:,} bytes of entries"),
        row(BENCH, "long: generation length", statistics.median(lengths) if lengths else len(ours.main_tokens),
            "main requests", None, f"median of {len(lengths)} handed over; shortest {min(lengths, default=0)}, "
            f"longest {max(lengths, default=0)}; recall {ours.tape.recalled} of {len(_recall.DECISIONS)} decisions"),
    ]


def run(tiny: bool = False, long: bool = False) -> list[dict[str, Any]]:
    turns, window = (60, 100_000) if tiny else ((10_000 if long else 1_000), 200_000)
    units = plan(turns)
    every = 20 if tiny else 250
    if long:  # flower alone: the baselines' 10,000 turns would take hours and measure nothing flower does
        async def alone() -> Measured:
            with tempfile.TemporaryDirectory(prefix="flower-bench-endurance-") as tmp:
                return await run_flower(Path(tmp), units, window)

        return long_rows(anyio.run(alone), turns)

    async def runs() -> tuple[Measured, ...]:
        with tempfile.TemporaryDirectory(prefix="flower-bench-endurance-") as tmp:
            root = Path(tmp)
            return (await run_plain(root, units, window), await run_plain(root, units, window, subagents=True),
                    await run_flower(root, units, window), await run_flower(root, units, window, pad=PAD_CHARS),
                    await run_flower(root, units, window, kill_every=every))

    plain, subagents, ours, heavy, durable = anyio.run(runs)
    return (rows(plain, ours, subagents, turns, window) + heavy_rows(plain, heavy)
            + restart_rows(ours, durable, every))


def restart_rows(ours: Measured, durable: Measured, every: int) -> list[dict[str, Any]]:
    """The durable run against its uninterrupted twin (same handoff policy)."""
    sum_b, sum_d = sum(ours.main_tokens), sum(durable.main_tokens)
    tape = durable.tape
    resumed = sum(tape.resumed)
    return [
        row(BENCH, f"durable flower, SIGKILLed every {every} turns: main input", sum_d, "tokens", sum_d / sum_b,
            f"vs the uninterrupted run; goal <= 1.03x: {_met(sum_d <= 1.03 * sum_b)}; priced "
            f"{durable.priced / ours.priced:.3f}x; {tape.restarts} "
            f"restarts by running the same command again; {tape.handoffs} handoffs, {tape.refreshes} refreshes, "
            f"median context {statistics.median(durable.main_tokens):,.0f} (uninterrupted: {ours.tape.handoffs}, "
            f"{ours.tape.refreshes}, {statistics.median(ours.main_tokens):,.0f})"),
        row(BENCH, "durable flower: restarts that resumed the recorded session", resumed, "restarts", None,
            f"of {len(tape.resumed)}; a fresh start would repeat finished turns: "
            f"{_met(resumed == len(tape.resumed) == tape.restarts and tape.restarts > 0)} (messages before the "
            f"kill -> after the restart: {', '.join(tape.restart_notes)})"),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        ws, run_dir, url, home, size = sys.argv[2:7]
        pad = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--pad=")), 0)
        flower_child(Path(ws), Path(run_dir), url, Path(home), int(size), durable="--durable" in sys.argv, pad=pad)
        raise SystemExit(0)
    for r in run(tiny="--tiny" in sys.argv, long="--long" in sys.argv):
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        print(f"{r['case']:52} {r['value']:>14,.1f} {r['unit']:10} {ratio:>7}  {r['note']}")
