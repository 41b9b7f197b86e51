"""What flower adds to a process's start: imports and compiling a coordinator, against the SDK alone.

Each case runs in a fresh interpreter (`python -c ...`, a subprocess per repetition, so nothing is cached
in `sys.modules`); the child times its own work with `time.perf_counter()` and prints it, so interpreter
start-up is left out of the case and reported on its own row. Medians of 5 repetitions (`tiny`: 1).

* `import claude_agent_sdk` — the floor: flower cannot start faster than the SDK it drives;
* `import flower` + `build_options(coordinator(...))` — what a user's script pays before its first query;
  ratio against the floor;
* `from flower.runtime.runtime import Runtime` + the same — the runtime's extra imports (stores, events).

The interpreter itself (`python -c pass`, timed from outside) is shown for scale. The optional
`-X importtime` breakdown is printed by `python -m bench.startup --importtime`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._table import median, row

BENCH = "startup"
ROOT = Path(__file__).resolve().parents[1]
COMPILE = ("w = worker('Runs tests.', 'You run tests.', tools=['Bash', 'Read']); "
           "o = build_options(coordinator('lead', 'Goal: green tests.', {'tester': w}))")
CASES = {
    "import claude_agent_sdk": "import claude_agent_sdk",
    "import flower + build_options(coordinator())":
        "import flower; from flower.agent.options import build_options; "
        "from flower.agent.roles import coordinator, worker; " + COMPILE,
    "+ import flower.runtime.runtime": "import flower; from flower.runtime.runtime import Runtime; "
                                    "from flower.agent.options import build_options; "
                                    "from flower.agent.roles import coordinator, worker; " + COMPILE,
}


def _child(code: str) -> float:
    """Seconds the child spends on `code`, measured inside the child."""
    program = f"import time\nt = time.perf_counter()\n{code}\nprint(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"startup case failed: {done.stderr.strip().splitlines()[-1:]}")
    return float(done.stdout.strip().splitlines()[-1])


def _interpreter() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def run(tiny: bool = False) -> list[dict[str, Any]]:
    reps = 1 if tiny else 5
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    interpreter = []
    for _ in range(reps):  # interleaved, so load changes hit every case alike
        interpreter.append(_interpreter())
        for name, code in CASES.items():
            samples[name].append(_child(code))
    per = {name: median(values) * 1000 for name, values in samples.items()}
    floor = per["import claude_agent_sdk"]
    rows = [row(BENCH, "python -c pass (interpreter start)", median(interpreter) * 1000, "ms", None,
                "timed from outside; not included below")]
    for name in CASES:
        ratio = None if name == "import claude_agent_sdk" else per[name] / floor
        note = ("the floor" if ratio is None else f"+{per[name] - floor:.0f} ms over the SDK import")
        rows.append(row(BENCH, name, per[name], "ms", ratio, f"{note}; median of {reps} fresh interpreters"))
    return rows


def importtime(top: int = 15) -> str:
    """The slowest imports (cumulative) of `import flower`, from `-X importtime`."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import flower"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:") and "|" in line]
    parsed = []
    for line in lines:
        _, cumulative, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
        if cumulative.isdigit():
            parsed.append((int(cumulative), name))
    parsed.sort(reverse=True)
    return "\n".join(f"{us / 1000:8.1f} ms  {name}" for us, name in parsed[:top])


if __name__ == "__main__":
    if "--importtime" in sys.argv:
        print(importtime())
    else:
        for r in run(tiny="--tiny" in sys.argv):
            ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
            print(f"{r['case']:48} {r['value']:>9.1f} {r['unit']:3} {ratio:>7}  {r['note']}")
