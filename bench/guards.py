"""What flower's hooks cost per tool call, through the real CLI and as pure Python (S-3, S-15, B-4).

1. Through the CLI. One session makes N sequential glance calls (`ls`) on the main thread against the
   scripted API; the per-call cost is the median server-side gap between a request that is answered with a
   tool_use and the next request (tool run + hook round trips + the CLI's own work). Four configurations,
   everything else identical (the same compiled coordinator options, only `hooks` differ), interleaved
   rep by rep so drift hits them alike:
   * no hook;
   * a trivial Python PreToolUse callback (matcher None, returns {});
   * trivial PreToolUse + PostToolUse callbacks — the same number of hook round trips an `ls` makes under
     flower;
   * flower's guard set for a coordinator: delegate_guard (PreToolUse Bash|Write|Edit|NotebookEdit),
     the workbench hooks (relay on Agent, index refresh on Write|Edit) and the spill guard (PostToolUse on
     the bulky tools) — what `Runtime` installs, minus its handoff stop hook and session store.
   Flower's guard logic through the CLI = flower set − trivial Pre+Post. The SDK's hook round trip itself
   (about 3-4 ms per hook, docs/sdk-notes.md#hook-cost) is the floor flower cannot go under.
2. As pure Python. Each callback is called directly with a hook-input dict shaped like the CLI's
   (docs/sdk-notes.md#hook-inputs) and driven without an event loop (they never await): microseconds per call,
   so the "< 0.5 ms per call" goal is measured without CLI noise. The glance predicate's own parse cost is
   bench/glance.py's subject; here the hook sees a command it has judged before (verdicts are cached), as
   it does after the first call, plus one row with a fresh command each call.

`tiny`: N=3 calls, 1 rep; the Python loops 200 calls, 3 reps.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

from bench._table import hook_us_per_call, median, row
from flower.agent.options import build_options, spec_guards
from flower.agent.roles import coordinator, worker
from flower.testing import Request, ScriptedAPI, collect, text, tool_use
from flower.walls.guard import delegate_guard, merge_hooks
from flower.workbench.bench import Workbench, index_guard, relay_guard, workbench_hooks
from flower.workbench.spill import spill_callback, spill_guard

BENCH = "guards"
CONFIGS = ("no hook", "trivial PreToolUse", "trivial Pre+PostToolUse", "flower guard set")
GOAL_MS = 0.5


async def _noop(input_data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
    return {}


def _spec() -> Any:
    helper = worker("Does hands-on work.", "You do the work.", tools=["Bash", "Read", "Write", "Edit"])
    return coordinator("bench", "Glance at the workspace.", {"helper": helper})


def _hooks(config: str, wb: Workbench, spec: Any) -> dict[str, list[HookMatcher]] | None:
    if config == "no hook":
        return None
    if config == "trivial PreToolUse":
        return {"PreToolUse": [HookMatcher(matcher=None, hooks=[_noop])]}
    if config == "trivial Pre+PostToolUse":
        return {"PreToolUse": [HookMatcher(matcher=None, hooks=[_noop])],
                "PostToolUse": [HookMatcher(matcher=None, hooks=[_noop])]}
    return merge_hooks(spec_guards(spec, artifacts=wb.artifacts), workbench_hooks(wb), spill_guard(wb, 4000))


def _options(config: str, ws: Path, wb: Workbench, env: dict[str, str]) -> ClaudeAgentOptions:
    spec = _spec()
    options = build_options(spec, cwd=ws, prelude=wb.system_append(), artifacts=wb.artifacts, env=env)
    options.hooks = _hooks(config, wb, spec)  # type: ignore[assignment]
    return options


class _Clock:
    """A ScriptedAPI handler that only notes when each main-thread request arrives."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []

    def __call__(self, request: Request) -> None:
        if not request.is_subagent:
            self.arrivals.append(time.perf_counter())
        return None


async def _session(config: str, n: int, root: Path) -> float:
    """Median gap (ms) between the N tool_use replies and the requests that follow them."""
    ws = root / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    wb = Workbench(ws).ensure()
    clock = _Clock()
    script = [tool_use("Bash", {"command": "ls", "description": "glance"}) for _ in range(n)] + [text("done")]
    with ScriptedAPI(script, handler=clock) as api:
        done = await collect("Glance at the workspace.", _options(config, ws, wb, api.cli_env(root / "home")))
        if done.error is not None or done.result.is_error:
            raise RuntimeError(f"guards: the {config!r} session failed: {done.error or done.result.result}")
        results = [r.result_text() for r in api.main_requests[1:]]
    if any("hook error" in r or "denied" in r.lower() for r in results):
        raise RuntimeError(f"guards: an ls was refused under {config!r}: {results[0][:200]}")
    gaps = [(b - a) * 1000 for a, b in zip(clock.arrivals, clock.arrivals[1:])]
    return median(gaps[:n])


def cli_rows(n: int, reps: int) -> list[dict[str, Any]]:
    samples: dict[str, list[float]] = {c: [] for c in CONFIGS}

    async def all_sessions() -> None:
        with tempfile.TemporaryDirectory(prefix="flower-bench-guards-") as tmp:
            for rep in range(reps):
                for index, config in enumerate(CONFIGS):
                    samples[config].append(await _session(config, n, Path(tmp) / f"r{rep}c{index}"))

    anyio.run(all_sessions)
    per = {c: median(s) for c, s in samples.items()}
    none, pair = per["no hook"], per["trivial Pre+PostToolUse"]
    rows = [row(BENCH, f"CLI per call: {c}", per[c], "ms", per[c] / none,
                f"+{per[c] - none:.1f} ms vs no hook; reps {', '.join(f'{x:.1f}' for x in samples[c])}")
            for c in CONFIGS]
    logic = per["flower guard set"] - pair
    rows.append(row(BENCH, "CLI: flower logic (flower set - trivial Pre+Post)", logic, "ms", None,
                    f"goal < {GOAL_MS} ms; {n} ls calls x {reps} rep(s); CLI noise is several ms, see the "
                    "pure-Python rows"))
    return rows


# --- pure Python ------------------------------------------------------------------------------


def _hook_input(ws: Path, event: str, tool: str, tool_input: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"session_id": "4995d940-f176-4116-b10a-cab50d5a9d18", "transcript_path": str(ws / "t.jsonl"),
            "cwd": str(ws), "prompt_id": "379d5dd8", "permission_mode": "acceptEdits",
            "effort": {"level": "medium"}, "hook_event_name": event, "tool_name": tool,
            "tool_input": tool_input, "tool_use_id": "toolu_bench", **more}


MakeInput = Callable[[int], dict[str, Any]]


def _cases(ws: Path, wb: Workbench) -> list[tuple[str, Callable[..., Any], MakeInput, str]]:
    """(case, callback, make the i-th hook input, note) for each callback flower installs."""
    delegate = delegate_guard(allow_glance=True, artifacts=wb.artifacts).hooks[0]
    ls_out = {"stdout": "README.md\nledger\nrun_tests.py\ntests\n", "stderr": "", "interrupted": False,
              "isImage": False, "noOutputExpected": False}
    sub = {"agent_id": "a19c5ae96aadff623", "agent_type": "helper"}
    brief = {"description": "fix it", "prompt": "FIX: the failing check.", "subagent_type": "helper"}

    def pre(tool: str, tool_input: dict[str, Any], **more: Any) -> MakeInput:
        return lambda i: _hook_input(ws, "PreToolUse", tool, tool_input, **more)

    def post(tool: str, tool_input: dict[str, Any], **more: Any) -> MakeInput:
        return lambda i: _hook_input(ws, "PostToolUse", tool, tool_input, **more)

    return [
        (GLANCE, delegate, pre("Bash", {"command": "ls"}), "allowed: is_ephemeral, cached verdict"),
        ("delegate_guard: main glance, new command each call", delegate,
         lambda i: _hook_input(ws, "PreToolUse", "Bash", {"command": f"ls dir{i}"}),
         "includes a fresh bashlex parse (bench glance: cold)"),
        ("delegate_guard: main Bash refused", delegate, pre("Bash", {"command": "python3 run_tests.py"}),
         "deny + refusal reason"),
        ("delegate_guard: main Write denied", delegate, pre("Write", {"file_path": str(ws / "a.py")}),
         "deny"),
        ("delegate_guard: subagent call", delegate, pre("Bash", {"command": "make"}, **sub),
         "passes at once"),
        (SPILL, spill_callback(wb, 4000), post("Bash", {"command": "ls"}, tool_response=ls_out),
         "below threshold: nothing spilled"),
        ("relay guard: Agent dispatch", relay_guard(wb), pre("Agent", brief), "appends the workbench line"),
        ("index guard: Write outside the workbench", index_guard(wb),
         post("Write", {"file_path": str(ws / "a.py")}), "no refresh"),
    ]


GLANCE = "delegate_guard: main glance `ls` (verdict cached)"
SPILL = "spill guard: small `ls` output"


def python_rows(n: int, reps: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="flower-bench-guards-py-") as tmp:
        ws = Path(tmp)
        ls = {"command": "ls"}
        base = hook_us_per_call(_noop, lambda i: _hook_input(ws, "PreToolUse", "Bash", ls), n, reps)
        rows = [row(BENCH, "python: trivial callback", base, "us/call", None, "returns {}; the floor")]
        values = {}
        for case, callback, make, note in _cases(ws, Workbench(ws).ensure()):
            values[case] = hook_us_per_call(callback, make, n, reps)
            rows.append(row(BENCH, f"python: {case}", values[case], "us/call", values[case] / base, note))
    per_glance = values[GLANCE] + values[SPILL]
    rows.append(row(BENCH, "python: flower logic per glance call", per_glance, "us/call",
                    per_glance / (GOAL_MS * 1000),
                    f"delegate_guard + spill guard for one `ls`; ratio = share of the {GOAL_MS} ms goal"))
    return rows


def run(tiny: bool = False) -> list[dict[str, Any]]:
    n, reps = (3, 1) if tiny else (20, 5)
    py_n, py_reps = (200, 3) if tiny else (5000, 7)
    return python_rows(py_n, py_reps) + cli_rows(n, reps)


if __name__ == "__main__":
    import sys

    for r in run(tiny="--tiny" in sys.argv):
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        print(f"{r['case']:58} {r['value']:>10.2f} {r['unit']:8} {ratio:>8}  {r['note']}")
