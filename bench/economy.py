"""The headline: context economy of one fixed task, plain SDK against flower, through the real CLI (P-1).

The task (`bench/_task.py`): survey a generated repository of 40 files (`bench/_repo.py`), run its test
script (about 23,000 characters of log), fix the two planted bugs, run the script again (about 22,000),
report. It runs twice on the same scripted model (`flower.testing.ScriptedAPI`), each time through the
real bundled CLI, which runs the real commands, reads the real files and applies the real edits:

(a) plain SDK — one agent does everything on its main thread: `ClaudeAgentOptions` with the `claude_code`
    preset (the same preset flower appends to), Bash/Read/Write/Edit approved, no flower hooks;
(b) flower — `Runtime` + `coordinator()` with four workers, every layer on (walls, workbench listing and
    relay line, spill guard, the rewriting store): the coordinator glances and dispatches; the workers
    make the calls (a) makes.

Measured from the requests the fake recorded, per main-thread request ("turn"): the body's characters,
system prompt and tool definitions included, and tokens = characters / 4 (exactly the input usage the
fake reports). Reported: first and final main context, the growth above the first request (what the
layers control: the fixed system prompt and tool definitions, about 39,000 characters, are in both),
`Request.chars` (messages only), the tokens each delegated task adds to the main thread (the Agent call
plus its hand-back), outputs spilled, and characters sent over all threads. The counts do not depend on
timing, so each variant runs once. Both runs must leave a passing suite and use their whole script
(`ScriptedAPI` raises otherwise), and the flower run must have spilled the test logs; else the bench fails.

The fixed part itself (issue #19): a coordinator's first request split into its tool definitions, system
prompt parts and first messages, measured twice in the same run, `lean=False` against the default lean
spec (`bench/_fixed.py`), in the "coordinator first request" rows.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions

from bench._fixed import FirstRequest, first_request, listing
from bench._repo import make_repo, run_suite
from bench._table import row
from bench._task import PROMPT, flower_script, flower_spec, plain_script
from flower import texts
from flower.runtime.runtime import Runtime
from flower.testing import Request, ScriptedAPI, collect

BENCH = "economy"


@dataclass
class Measured:
    """What one variant's run sent to the model."""

    main: list[int] = field(default_factory=list)
    """Request body characters of each main-thread request, in order."""
    main_messages: list[int] = field(default_factory=list)
    """`Request.chars` (the messages only) of each main-thread request."""
    total: int = 0
    """Request body characters summed over every request of every thread."""
    threads: int = 1
    dispatch_growth: list[int] = field(default_factory=list)
    """Main-thread characters added by each Agent call (its tool_use plus its hand-back)."""
    log_lines_on_main: int = 0
    """Verbose test-log lines (` PASSED`) in the last main-thread request."""
    fixed: int = 0
    """Characters of the first main request's system prompt and tool definitions (JSON)."""
    spilled: list[int] = field(default_factory=list)
    """Characters of each output the spill guard moved to a file (flower only)."""
    relay: int = 0
    """Characters of the workbench line appended to each Agent prompt (flower only)."""


def _tokens(chars: float) -> float:
    return chars / 4


def _calls_answered(request: Request) -> list[str]:
    """Tool names of the last assistant message in the request: the calls whose results it carries."""
    for message in reversed(request.messages):
        if message.get("role") == "assistant":
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            return [str(b.get("name")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    return []


def measure(api: ScriptedAPI) -> Measured:
    main = api.main_requests
    if not main:
        raise RuntimeError("no main-thread request was recorded")
    body = main[0].body
    return Measured(
        main=[r.size for r in main], main_messages=[r.chars for r in main],
        total=sum(r.size for r in api.requests), threads=1 + len(api.subagent_ids),
        dispatch_growth=[after.size - before.size for before, after in zip(main, main[1:])
                         if _calls_answered(after) == ["Agent"]],
        log_lines_on_main=main[-1].text.count(" PASSED"),
        fixed=len(json.dumps(body.get("system"), ensure_ascii=False))
        + len(json.dumps(body.get("tools"), ensure_ascii=False)),
    )


# --- the two runs -------------------------------------------------------------------------------


def _summary_line(output: str) -> str:
    return [line for line in output.splitlines() if " failed, " in line][-1].strip("= ").strip()


def _check_fixed(repo: Path, label: str) -> None:
    code, output = run_suite(repo)
    if code != 0:
        raise RuntimeError(f"the {label} run left a failing suite: {_summary_line(output)}")


async def run_plain(root: Path, tiny: bool) -> Measured:
    repo = make_repo(root / "plain" / "repo", tiny)
    with ScriptedAPI(plain_script(repo, tiny)) as api:
        options = ClaudeAgentOptions(
            system_prompt={"type": "preset", "preset": "claude_code"},
            allowed_tools=["Bash", "Read", "Write", "Edit"], cwd=str(repo), setting_sources=[],
            env=api.cli_env(root / "plain" / "home"))
        done = await collect(PROMPT, options)
        if done.error is not None or done.result.is_error:
            raise RuntimeError(f"the plain run failed: {done.error or done.result.result}")
    _check_fixed(repo, "plain")
    return measure(api)


async def run_flower(root: Path, tiny: bool) -> Measured:
    repo = make_repo(root / "flower" / "repo", tiny)
    summary = _summary_line(run_suite(repo)[1])
    main, workers = flower_script(repo, repo / ".flower" / "artifacts", summary, tiny)
    with ScriptedAPI(main, workers) as api:
        runtime = Runtime(repo, run_dir=root / "flower" / "runs", env=api.cli_env(root / "flower" / "home"),
                          run_id="bench")
        result = await runtime.run(flower_spec(), PROMPT, step_name="economy")
        if not result.ok:
            raise RuntimeError(f"the flower run failed: {result.error}")
    _check_fixed(repo, "flower")
    measured = measure(api)
    log = repo / ".flower" / "spill" / "log.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    measured.spilled = [int(json.loads(line)["chars"]) for line in lines]
    if not measured.spilled:
        raise RuntimeError("the flower run spilled nothing: the test logs reached the workers whole")
    assert runtime.workbench is not None
    measured.relay = len(runtime.workbench.relay_line())
    return measured


# --- rows ---------------------------------------------------------------------------------------


def _series(values: Sequence[int]) -> str:
    return " ".join(f"{_tokens(v) / 1000:.1f}k" for v in values)


def fixed_rows(before: FirstRequest, after: FirstRequest) -> list[dict[str, Any]]:
    """The coordinator's first request part by part, `lean=False` (before) against the default (after)."""
    out = []
    for part, name in (("tools", "tool definitions"), ("system", "system prompt"),
                       ("messages", "first user + environment messages")):
        was, now = before.total(part), after.total(part)
        out.append(row(BENCH, f"coordinator first request: {name}", now, "chars", now / was,
                       f"lean=False {was:,}: {listing(getattr(before, part))} | lean: "
                       f"{listing(getattr(after, part), getattr(before, part))}"))
    out.append(row(BENCH, "coordinator first request: whole body", after.body, "chars", after.body / before.body,
                   f"lean=False {before.body:,} (bench/_fixed.py: a lead with one Bash+Read worker, one step)"))
    return out


def rows(a: Measured, b: Measured, tiny: bool) -> list[dict[str, Any]]:
    growth_a, growth_b = a.main[-1] - a.main[0], b.main[-1] - b.main[0]
    slope = _tokens(sum(b.dispatch_growth) / len(b.dispatch_growth)) if b.dispatch_growth else float("nan")
    series = {"plain_main_tokens": [_tokens(v) for v in a.main],
              "flower_main_tokens": [_tokens(v) for v in b.main],
              "plain_main_message_chars": a.main_messages, "flower_main_message_chars": b.main_messages,
              "flower_dispatch_tokens": [_tokens(v) for v in b.dispatch_growth]}
    repo = "5-file repo, 1 bug" if tiny else "40-file repo, 2 bugs"
    return [
        row(BENCH, "plain SDK: main context, first request", _tokens(a.main[0]), "tokens", None,
            f"{repo}; system + tools {a.fixed:,} chars; per turn: {_series(a.main)}"),
        row(BENCH, "plain SDK: main context, final", _tokens(a.main[-1]), "tokens", None,
            f"{len(a.main)} main turns"),
        row(BENCH, "flower: main context, first request", _tokens(b.main[0]), "tokens",
            b.main[0] / a.main[0], f"system + tools {b.fixed:,} chars; per turn: {_series(b.main)}"),
        row(BENCH, "flower: main context, final", _tokens(b.main[-1]), "tokens", b.main[-1] / a.main[-1],
            f"vs plain; goal <= 0.10x; {len(b.main)} main turns; both carry the fixed system prompt + tools",
            series=series),
        row(BENCH, "main growth above the first request", _tokens(growth_b), "tokens", growth_b / growth_a,
            f"flower vs plain {_tokens(growth_a):,.0f}: the part the layers control"),
        row(BENCH, "main messages only, final (Request.chars)", b.main_messages[-1], "chars",
            b.main_messages[-1] / a.main_messages[-1], f"flower vs plain {a.main_messages[-1]:,}"),
        row(BENCH, "flower: tokens per delegated task", slope, "tokens/task", None,
            f"goal < 1,000; mean of {len(b.dispatch_growth)} dispatches: brief + the CLI's hand-back wrapper + "
            f"the worker's reply (the {b.relay}-char relay line reaches the subagent only)"),
        row(BENCH, "flower: outputs spilled to files", len(b.spilled), "outputs", None,
            f"{sum(b.spilled):,} chars moved off the workers' threads (the test logs)"),
        row(BENCH, "test-log lines on the main thread, final", b.log_lines_on_main, "lines", None,
            f"plain {a.log_lines_on_main:,}: the verbose PASSED lines of the two runs"),
        row(BENCH, "all threads: chars sent, summed over requests", b.total, "chars", b.total / a.total,
            f"flower ({b.threads} threads) vs plain {a.total:,} (1 thread): "
            + ("less in total, from the lean tool set; the work itself moves off the main thread"
               if b.total < a.total else "no saving in total, the work moves off the main thread")),
        row(BENCH, "fixed cost: coordinator rules", len(texts.COORDINATOR_RULES), "chars", None,
            f"in every main request; worker rules {len(texts.WORKER_RULES):,} chars in every worker's"),
    ]


def run(tiny: bool = False) -> list[dict[str, Any]]:
    async def both() -> tuple[Measured, Measured, FirstRequest, FirstRequest]:
        with tempfile.TemporaryDirectory(prefix="flower-bench-economy-") as tmp:
            root = Path(tmp)
            return (await run_plain(root, tiny), await run_flower(root, tiny),
                    await first_request(root / "fixed", lean=False), await first_request(root / "fixed", lean=True))

    plain, ours, before, after = anyio.run(both)
    return rows(plain, ours, tiny) + fixed_rows(before, after)


if __name__ == "__main__":
    import sys

    for r in run(tiny="--tiny" in sys.argv):
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        print(f"{r['case']:48} {r['value']:>12,.1f} {r['unit']:12} {ratio:>7}  {r['note']}")
