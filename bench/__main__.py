"""`python -m bench`: run every benchmark module, print one table, write bench/results.json.

A benchmark module is any `bench/<name>.py` (name not starting with `_`) with a function
`run(tiny: bool = False) -> list[dict]`. Modules run one after another in one process (the machine is
shared; nothing runs in parallel), in the order of `ORDER`, then any others alphabetically. A module that
fails does not stop the others: its error becomes a row and the exit status is 1.

    python -m bench                 # everything, full size; writes bench/results.json
    python -m bench --tiny          # tiny inputs (a smoke run); writes nothing unless --json is given
    python -m bench --only economy  # one module (repeatable); merges its rows into results.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench._table import machine, normalize, render

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
ORDER = ("economy", "endurance", "resume_payload", "guards", "startup", "glance", "spill", "store", "rewrite")

Runner = Callable[..., list[dict[str, Any]]]


def discover() -> list[str]:
    """Module names under bench/ that define `run`, in report order (checked by importing them later)."""
    names = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def _load(name: str) -> Runner | None:
    module = importlib.import_module(f"bench.{name}")
    runner = getattr(module, "run", None)
    return runner if callable(runner) else None


def run_one(name: str, tiny: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of one module and its bookkeeping (seconds, error); never raises."""
    start = time.perf_counter()
    try:
        runner = _load(name)
        if runner is None:
            return [], {"skipped": "no run() function"}
        raw = runner(tiny=tiny)
        rows = [normalize(r, name) for r in raw]
        info: dict[str, Any] = {"error": None}
    except Exception as exc:  # one broken module must not hide the others' numbers
        detail = traceback.format_exc(limit=3)
        error = f"{type(exc).__name__}: {exc}"
        rows = [normalize({"case": "ERROR", "value": math.nan, "unit": "", "note": error}, name)]
        info = {"error": error, "traceback": detail}
    info["seconds"] = round(time.perf_counter() - start, 2)
    return rows, info


def header(info: dict[str, Any], tiny: bool) -> str:
    load = info.get("load_avg")
    return (f"flower bench{' (tiny)' if tiny else ''} — {info['cores']} cores, Python {info['python']}, "
            f"claude-agent-sdk {info['sdk']}, CLI {info['cli']}"
            + (f", load avg {load[0]:.1f}" if load else ""))


def _merge(path: Path, payload: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Replace the rows of `names` in an existing results file, keeping the other benches' rows."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return payload
    if old.get("tiny") != payload["tiny"]:
        return payload
    kept = [r for r in old.get("rows", []) if r.get("bench") not in names]
    return {**old, "machine": payload["machine"], "rows": kept + payload["rows"],
            "benches": {**old.get("benches", {}), **payload["benches"]}, "updated": payload["started"]}


def _write(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False, allow_nan=True) + "\n")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny inputs: a quick smoke run")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this module (repeatable)")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help=f"where to write results (default {RESULTS.name}; tiny runs write nothing)")
    parser.add_argument("--width", type=int, default=None, help="table width (default: terminal, or 200)")
    args = parser.parse_args(argv)

    names = discover()
    if args.only:
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"unknown bench module(s) {unknown}; known: {', '.join(names)}")
        names = [n for n in names if n in args.only]

    from rich.console import Console

    console = Console(width=args.width or (None if sys.stdout.isatty() else 200))
    err = Console(stderr=True)
    info = machine()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows: list[dict[str, Any]] = []
    benches: dict[str, Any] = {}
    for name in names:
        err.print(f"[dim]running {name}...[/dim]")
        got, benches[name] = run_one(name, args.tiny)
        rows += got
        error = benches[name].get("error")
        err.print(f"[dim]  {name}: {len(got)} rows in {benches[name]['seconds']:.1f} s[/dim]"
                  + (f" [red]{error}[/red]" if error else ""))
    console.print(render(rows, header(info, args.tiny)))

    payload = {"machine": info, "tiny": args.tiny, "started": started, "benches": benches, "rows": rows}
    path = args.json or (None if args.tiny else RESULTS)
    if path is not None:
        if args.only and path.exists():
            payload = _merge(path, payload, names)
        _write(path, payload)
        err.print(f"[dim]wrote {path}[/dim]")
    failed = [n for n, b in benches.items() if b.get("error")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
