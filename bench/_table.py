"""Shared helpers of the benchmark suite: the row shape, medians, the machine header, the table.

A row is a plain dict `{"bench", "case", "value", "unit", "ratio", "note"}` (value a finite float, ratio a
float or None); a module may add keys (e.g. `series`), which `results.json` keeps and the table ignores.
`normalize()` is the one place that adapts a module's row to that shape, so the aggregator can take rows
from modules written by different hands.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["KEYS", "fmt_number", "machine", "median", "normalize", "render", "row"]

Row = dict[str, Any]
KEYS = ("bench", "case", "value", "unit", "ratio", "note")


def row(bench: str, case: str, value: float, unit: str, ratio: float | None = None, note: str = "",
        **extra: Any) -> Row:
    """One result row; `extra` keys (series, details) go to results.json only."""
    return {"bench": bench, "case": case, "value": float(value), "unit": unit,
            "ratio": None if ratio is None else round(float(ratio), 4), "note": note, **extra}


def median(samples: Iterable[float]) -> float:
    values = list(samples)
    if not values:
        raise ValueError("median of no samples")
    return float(statistics.median(values))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number


def normalize(raw: Mapping[str, Any], bench: str) -> Row:
    """A module's row in the common shape: missing keys filled, numbers as floats, unknown keys kept.

    A value that is not a finite number becomes NaN and the note says so, rather than the row vanishing.
    """
    out: Row = dict(raw)
    out["bench"] = str(raw.get("bench") or bench)
    out["case"] = str(raw.get("case") or raw.get("name") or "?")
    value = _number(raw.get("value"))
    note = str(raw.get("note") or "")
    if value is None or not math.isfinite(value):
        note = (note + "; " if note else "") + f"not a finite number: {raw.get('value')!r}"
        value = math.nan
    out["value"] = value
    out["unit"] = str(raw.get("unit") or "")
    ratio = _number(raw.get("ratio"))
    out["ratio"] = ratio if ratio is not None and math.isfinite(ratio) else None
    out["note"] = note
    return out


def fmt_number(value: float | None, unit: str = "") -> str:
    """Compact and aligned: integers with thousands separators, small values with 3 significant digits."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    magnitude = abs(value)
    if magnitude >= 1000 or (value == int(value) and unit not in ("x", "s")):
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if magnitude == 0:
        return "0"
    return f"{value:.3g}"


def _cli_version() -> str:
    try:
        import claude_agent_sdk
    except ImportError:
        return "?"
    binary = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30,
                              check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        from claude_agent_sdk._cli_version import __cli_version__

        return f"{__cli_version__} (from _cli_version.py)"
    except ImportError:
        return "?"


def machine() -> dict[str, Any]:
    """What the numbers depend on: cores, CPU, Python, SDK and bundled CLI versions."""
    try:
        from claude_agent_sdk import __version__ as sdk
    except ImportError:
        sdk = "?"
    return {
        "cores": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "python_impl": sys.implementation.name,
        "sdk": sdk,
        "cli": _cli_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


def render(rows: Sequence[Row], title: str) -> Any:
    """A rich Table of the rows, grouped by bench (a rule line between benches)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False, header_style="bold")
    table.add_column("bench", no_wrap=True)
    table.add_column("case")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("ratio", justify="right", no_wrap=True)
    table.add_column("note", overflow="fold")
    previous = None
    for r in rows:
        if previous is not None and r["bench"] != previous:
            table.add_section()
        ratio = r.get("ratio")
        table.add_row(r["bench"] if r["bench"] != previous else "", r["case"],
                      fmt_number(r["value"], r["unit"]), r["unit"],
                      "-" if ratio is None else f"{fmt_number(ratio, 'x')}x", r.get("note", ""))
        previous = r["bench"]
    return table


def drive(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a hook callback that never awaits, without an event loop (so the loop's cost is not timed)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("a benchmarked callback awaited something")


def hook_us_per_call(cb: Callable[..., Any], make: Callable[[int], dict[str, Any]], n: int, reps: int) -> float:
    """Median microseconds per call of hook callback `cb` over `reps` runs of `n` inputs built by `make`."""
    samples = []
    for rep in range(reps):
        inputs = [make(rep * n + i) for i in range(n)]
        start = time.perf_counter()
        for data in inputs:
            drive(cb(data, "toolu_bench", {"signal": None}))
        samples.append((time.perf_counter() - start) / n * 1e6)
    return median(samples)
