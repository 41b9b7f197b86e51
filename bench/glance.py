"""Throughput of the glance predicate (S-8, S-9, B-2): Bash commands judged per second.

`is_ephemeral` runs inside the coordinator's PreToolUse hook (one command per Bash call) and over every
Bash result on resume. Cases, each the median of 5 runs over the glance corpus (tests/support/glance_corpus.py,
allowed and refused commands mixed):

* `cold`: verdict cache cleared before each run, the hook's cost for a command it has not seen
  (bashlex parse + our judge). Note: microseconds per command. Ratio: cold time / bashlex.parse time of the
  same commands, measured alongside (the cost of our layer on top of the parser; 1.0 = free).
* `cold allowed`, `cold refused`: the same split by verdict (allowed commands are judged to the end).
* `cached`: the same commands again with the cache warm (what a resume asks repeatedly). Ratio: cached
  throughput / cold throughput.

`tiny`: 1 run on 20 commands.
"""

from __future__ import annotations

import gc
import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bashlex

from flower.walls.glance import judge as glance

BENCH = "glance"
CORPUS = Path(__file__).resolve().parents[1] / "tests" / "support" / "glance_corpus.py"


def _row(case: str, value: float, unit: str, ratio: float | None, note: str) -> dict[str, Any]:
    return {"bench": BENCH, "case": case, "value": value, "unit": unit, "ratio": ratio, "note": note}


def _corpus() -> tuple[list[str], list[str]]:
    spec = importlib.util.spec_from_file_location("glance_corpus", CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.ALLOWED), [command for command, _ in module.REFUSED]


def _once(work: Callable[[], object], *, cold: bool) -> float:
    """Wall time of one call of `work`, GC paused as timeit does."""
    if cold:
        glance._analyse.cache_clear()
    gc.disable()
    try:
        start = time.perf_counter()
        work()
        return time.perf_counter() - start
    finally:
        gc.enable()


def _seconds(work: Callable[[], object], runs: int, *, cold: bool) -> float:
    return statistics.median(_once(work, cold=cold) for _ in range(runs))


def _side_by_side(first: Callable[[], object], second: Callable[[], object], runs: int) -> tuple[float, float]:
    """Medians of `first` and `second` timed in alternation (cold), so machine load hits both alike."""
    pairs = [(_once(first, cold=True), _once(second, cold=True)) for _ in range(runs)]
    return statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)


def _judge_all(commands: list[str]) -> Callable[[], object]:
    return lambda: [glance.is_ephemeral(command) for command in commands]


def _parse_all(commands: list[str]) -> Callable[[], object]:
    def parse() -> None:
        for command in commands:
            try:
                bashlex.parse(command)
            except Exception:  # the judge refuses these; the parser's failing is part of its cost
                pass

    return parse


def run(tiny: bool = False) -> list[dict[str, Any]]:
    allowed, refused = _corpus()
    runs = 1 if tiny else 5
    if tiny:
        allowed, refused = allowed[:10], refused[:10]
    every = allowed + refused
    cold, parse = _side_by_side(_judge_all(every), _parse_all(every), runs)
    cold_allowed = _seconds(_judge_all(allowed), runs, cold=True)
    cold_refused = _seconds(_judge_all(refused), runs, cold=True)
    _judge_all(every)()
    cached = _seconds(_judge_all(every), runs, cold=False)
    per = f"{len(every)} commands, {runs} run(s)"
    return [
        _row("cold", len(every) / cold, "cmd/s", cold / parse,
             f"{cold / len(every) * 1e6:.0f} us/command; ratio = judge / bashlex.parse alone; {per}"),
        _row("cold allowed", len(allowed) / cold_allowed, "cmd/s", None,
             f"{cold_allowed / len(allowed) * 1e6:.0f} us/command; {len(allowed)} commands"),
        _row("cold refused", len(refused) / cold_refused, "cmd/s", None,
             f"{cold_refused / len(refused) * 1e6:.0f} us/command; {len(refused)} commands"),
        _row("cached", len(every) / cached, "cmd/s", cold / cached,
             f"{cached / len(every) * 1e6:.2f} us/command; ratio = cached / cold throughput"),
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row['case']:<14} {row['value']:>12.0f} {row['unit']:<6} ratio={row['ratio']}  {row['note']}")
