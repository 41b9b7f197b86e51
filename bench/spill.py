"""Cost of the spill guard per tool call (S-15), side by side with a trivial passthrough callback.

The callbacks never await, so each call is driven by `coro.send(None)`: what is measured is the guard's
own work (walk, hash, write, log), not an event loop. Medians of several repetitions in one run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench._table import drive, hook_us_per_call
from flower.workbench.bench import Workbench
from flower.workbench.spill import spill_callback

BENCH = "spill"


async def _passthrough(input_data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
    return {}


def _input(stdout: str, cwd: Path, persisted: Path | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False,
                                "noOutputExpected": False}
    if persisted is not None:
        response.update(persistedOutputPath=str(persisted), persistedOutputSize=persisted.stat().st_size)
    return {"session_id": "s", "transcript_path": str(cwd / "t.jsonl"), "cwd": str(cwd),
            "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_input": {"command": "make"},
            "tool_response": response, "tool_use_id": "toolu_bench"}


def run(tiny: bool = False) -> list[dict[str, Any]]:
    n, reps = (30, 3) if tiny else (1000, 7)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        wb = Workbench(ws).ensure()
        guard = spill_callback(wb, threshold=4000)
        small = "ok\n" * 300  # 900 chars: the common case
        big = "".join(f"line {i}\n" for i in range(2000))  # ~16.9K chars
        persisted = ws / "persisted.txt"
        persisted.write_text(big * 4)  # ~68K chars, as the CLI saves past its 30K inline cap
        base = hook_us_per_call(_passthrough, lambda i: _input(small, ws), n, reps)
        cases = [
            ("below threshold (900 chars)", lambda i: _input(small, ws), "no spill"),
            ("above threshold, new file (17K chars)", lambda i: _input(f"{i}\n{big}", ws), "hash+write+log"),
            ("above threshold, dedup (17K chars)", lambda i: _input(big, ws), "hash+log, file exists"),
            ("CLI-persisted Bash (68K chars)", lambda i: _input(big[:30000], ws, persisted), "stream copy"),
        ]
        rows.append(_row("trivial passthrough callback", base, None, "returns {}"))
        for case, make, note in cases:
            value = hook_us_per_call(guard, make, n, reps)
            rows.append(_row(case, value, value / base if base else None, note))
        out = drive(guard(_input(big, ws), "t", {"signal": None}))
        first_line = out["hookSpecificOutput"]["updatedToolOutput"]["stdout"].split("\n", 1)[0]
        rows.append({"bench": BENCH, "case": "pointer line length", "value": float(len(first_line)),
                     "unit": "chars", "ratio": None, "note": f"+ up to 400 head chars; root {len(str(wb.root))}"})
    return rows


def _row(case: str, value: float, ratio: float | None, note: str) -> dict[str, Any]:
    return {"bench": BENCH, "case": case, "value": round(value, 2), "unit": "us/call",
            "ratio": None if ratio is None else round(ratio, 1), "note": note}


if __name__ == "__main__":
    for r in run():
        print(f"{r['case']:<42} {r['value']:>10.2f} {r['unit']:<8} x{r['ratio'] or '':<8} {r['note']}")
