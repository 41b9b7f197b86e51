"""Cost of the layer-four rewrite on resume (S-19, B-6): load + rewrite against the `json.loads` floor.

What a resume pays: the transcript's JSONL bytes become entries (`flower.stores.jsonl.parse_jsonl`, per-line
errors) and `rewrite()` runs with the defaults (expiry on with the glance predicate, trim off, keep_denials=1).
The floor is plain `json.loads` of each line of the same bytes. Cases:

* `load+rewrite N`: seconds, ratio = time / floor (goal: <= 2).
* `load+rewrite+trim N`: the same with `trim=True` into a temp workspace (spill files are written once per
  content; repeated transcripts hit the existing files).
* `rewrite only N`: seconds for `rewrite()` on already-loaded entries, ratio = time / floor.
* `linearity`: time(100k) / time(10k) (goal: <= 11 for 10x the entries), floor alongside.
* `predicate, cold`: the glance verdicts of all distinct Bash commands, paid once per process by the first
  resume (glance caches verdicts; the timed runs below see them cached, as a resume after a live run does).
* `peak memory N`: tracemalloc peak of load+rewrite in MB, ratio against the floor's peak; and the extra peak
  of `rewrite()` alone over already-loaded entries (it shares unchanged entries, so this stays small).

Entries: the real transcripts of ../shared/data/transcripts (lines over 100 KB, inline base64 images, left
out), each transcript repeated whole with fresh uuids, message ids and tool ids, so chains, pairs and
rounds stay real. Medians of several repetitions; GC paused inside timed regions (as `timeit` does).
`tiny`: 500 entries, no linearity row.
"""

from __future__ import annotations

import gc
import json
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from flower.stores.jsonl import parse_jsonl
from flower.stores.rewrite import EphemeralPolicy, rewrite
from tests.support.transcripts import TRANSCRIPTS  # the one place that locates them

BENCH = "rewrite"
_POINTERS = ("uuid", "parentUuid", "logicalParentUuid", "leafUuid", "sourceToolAssistantUUID")


def _row(case: str, value: float, unit: str, ratio: float | None, note: str) -> dict[str, Any]:
    return {"bench": BENCH, "case": case, "value": value, "unit": unit, "ratio": ratio, "note": note}


def _sources(enough: int) -> list[list[str]]:
    """Real transcripts as their JSON lines (bad and oversized lines left out), until `enough` lines."""
    sources: list[list[str]] = []
    for path in sorted(TRANSCRIPTS.rglob("*.jsonl")):
        if sum(map(len, sources)) >= enough:
            break
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if 0 < len(line) <= 100_000]
        good = []
        for line in lines:
            try:
                if isinstance(json.loads(line), dict):
                    good.append(line)
            except ValueError:
                continue
        if good:
            sources.append(good)
    if not sources:
        raise RuntimeError(f"no transcripts under {TRANSCRIPTS}")
    return sources


def _fresh(line: str, tag: str) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads(line)
    for key in _POINTERS:
        if isinstance(entry.get(key), str):
            entry[key] += tag
    message = entry.get("message")
    if isinstance(message, dict):
        if isinstance(message.get("id"), str):
            message["id"] += tag
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            if isinstance(block, dict):
                for key in ("id", "tool_use_id"):
                    if isinstance(block.get(key), str):
                        block[key] += tag
    return entry


def _jsonl(n: int, sources: list[list[str]]) -> str:
    """n entries: whole transcripts repeated with fresh ids, as JSONL text."""
    lines: list[str] = []
    rep = 0
    while len(lines) < n:
        for source in sources:
            tag = f"-r{rep}"
            lines.extend(json.dumps(_fresh(line, tag)) for line in source)
            rep += 1
            if len(lines) >= n:
                break
    return "\n".join(lines[:n])


def _predicate() -> tuple[Callable[[str], bool], str]:
    try:
        from flower.walls.glance.judge import is_ephemeral
    except ImportError:
        return (
            lambda c: (
                c.split()[:1] in (["ls"], ["pwd"]) or c.split()[:2] in (["git", "status"], ["git", "diff"])
            ),
            "stand-in predicate (flower.walls.glance.judge missing)",
        )
    return is_ephemeral, "glance.is_ephemeral"


def _timed(fn: Callable[[], Any], reps: int) -> float:
    samples = []
    for _ in range(reps):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return statistics.median(samples)


def _peak_mb(fn: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
        del result
    finally:
        tracemalloc.stop()
    return peak / 1e6


def _measure(
    n: int, reps: int, sources: list[list[str]], workspace: str
) -> tuple[list[dict[str, Any]], float]:
    """The rows for one size, and the load+rewrite time (for the linearity row)."""
    predicate, which = _predicate()
    policy = EphemeralPolicy(predicate=predicate)
    text = _jsonl(n, sources)
    lines = text.splitlines()
    loaded = parse_jsonl(lines).entries

    def floor() -> list[Any]:
        return [json.loads(line) for line in lines]

    def flower(trim: bool = False) -> Any:
        return rewrite(parse_jsonl(lines).entries, workspace=workspace, ephemeral=policy, trim=trim)

    flower(trim=True)  # warm: imports, and the spill files a repeated resume finds already written
    base = _timed(floor, reps)
    ours = _timed(flower, reps)
    trimmed = _timed(lambda: flower(trim=True), reps)
    alone = _timed(lambda: rewrite(loaded, ephemeral=policy), reps)
    floor_peak, our_peak = _peak_mb(floor), _peak_mb(flower)
    extra = _peak_mb(lambda: rewrite(loaded, ephemeral=policy))
    label = f"{n:,}"
    rows = [
        _row(f"json.loads floor {label}", base, "s", None, f"{len(text.encode()) / 1e6:.0f} MB of JSONL"),
        _row(f"load+rewrite {label}", ours, "s", ours / base, f"goal <= 2x floor; {which}"),
        _row(
            f"load+rewrite+trim {label}", trimmed, "s", trimmed / base, "TrimPolicy() into a temp workspace"
        ),
        _row(f"rewrite only {label}", alone, "s", alone / base, "entries already loaded"),
        _row(f"peak memory {label}", our_peak, "MB", our_peak / floor_peak, f"floor {floor_peak:.0f} MB"),
        _row(f"rewrite extra peak {label}", extra, "MB", extra / floor_peak, "over already-loaded entries"),
    ]
    return rows, ours


def _cold_predicate(sources: list[list[str]]) -> dict[str, Any]:
    """The glance verdicts a first resume in a fresh process pays once (glance caches them afterwards)."""
    commands = set()
    for source in sources:
        for line in source:
            if '"Bash"' in line:
                for entry in _fresh(line, "").get("message", {}).get("content", []) or []:
                    if isinstance(entry, dict) and entry.get("name") == "Bash":
                        commands.add(str((entry.get("input") or {}).get("command")))
    predicate, which = _predicate()
    start = time.perf_counter()
    for command in commands:
        predicate(command)
    seconds = time.perf_counter() - start
    return _row("predicate, cold", seconds, "s", None, f"{len(commands)} distinct Bash commands; {which}")


def run(tiny: bool = False) -> list[dict[str, Any]]:
    sizes, reps = ((500,), 3) if tiny else ((10_000, 100_000), 3)
    sources = _sources(sizes[-1])
    rows: list[dict[str, Any]] = [_cold_predicate(sources)]
    times: list[float] = []
    with tempfile.TemporaryDirectory() as workspace:
        for n in sizes:
            measured, seconds = _measure(n, reps, sources, workspace)
            rows += measured
            times.append(seconds)
    if len(sizes) == 2:
        growth, factor = times[1] / times[0], sizes[1] // sizes[0]
        floors = [row["value"] for row in rows if row["case"].startswith("json.loads floor")]
        rows.append(
            _row(
                f"linearity {factor}x entries",
                growth,
                "x",
                growth / factor,
                f"goal <= {factor * 1.1:g}; floor grew {floors[1] / floors[0]:.2f}x",
            )
        )
    return rows


if __name__ == "__main__":  # a convenience; `python -m bench` is the lead's entry point
    import sys

    for row in run(tiny="--tiny" in sys.argv):
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
        print(f"{row['case']:32} {row['value']:10.3f} {row['unit']:3} ratio {ratio:>6}  {row['note']}")
