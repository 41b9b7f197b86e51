"""Terminal renderings of the report, the preview and the session listings (rich tables).

Every string that comes from a transcript is sanitized (`flower.report.text.sanitize`) and printed as plain
`Text`, never parsed as rich markup.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from flower.report.analysis import Report, ThreadStats
from flower.report.preview import Preview
from flower.report.tables import number_tables
from flower.report.text import fit, format_tokens, sanitize

__all__ = ["print_breakdown", "print_preview", "print_report", "print_session", "print_sessions"]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _t(value: Any) -> Text:
    return Text(sanitize(str(value)))


def _thread_row(name: str, stats: ThreadStats) -> list[str]:
    u, k = stats.usage, format_tokens
    return [
        name,
        f"{stats.turns:,}",
        k(stats.chars),
        f"{stats.calls:,}",
        k(u.input),
        k(u.cache_read),
        k(u.cache_creation),
        k(u.output),
        _pct(u.cache_hit_rate),
    ]


def _threads(report: Report, width: int) -> list[Table]:
    rows = [_thread_row("main", report.main), _thread_row(f"subagents ({len(report.per_agent)})", report.subagents)]
    headers = ("thread", "turns", "chars", "calls", "in", "c-read", "c-write", "out", "hit")
    return number_tables(
        "Threads (tokens counted once per API message)", headers, rows,
        numeric=[h != "thread" for h in headers], width=width,
        caption=f"in subagents: {_pct(report.subagent_turn_share)} of turns, "
        f"{_pct(report.subagent_char_share)} of chars",
    )


def _context(report: Report) -> Table:
    table = Table(title="Main-thread context", title_justify="left", show_header=False)
    table.add_column("what", overflow="fold")
    table.add_column("value", overflow="fold")
    contexts = report.contexts or (0,)
    ahead = "n/a" if report.turns_to_threshold is None else f"{math.ceil(report.turns_to_threshold):,} turns"
    rows = [
        ("now / peak", f"{contexts[-1]:,} / {max(contexts):,} tokens"),
        (
            "slope (current generation, least squares)",
            "n/a" if report.slope is None else f"{report.slope:,.0f} tokens/turn",
        ),
        (
            "handoff threshold",
            "n/a" if report.threshold is None else f"{report.threshold:,} tokens ({report.model or '?'})",
        ),
        ("projected turns to threshold", ahead),
    ]
    for index, gen in enumerate(report.generations, 1):
        slope = "n/a" if gen.slope is None else f"{gen.slope:,.0f}/turn"
        refreshed = "" if not gen.refreshes else (
            f"; {gen.refreshes} refresh{'es' if gen.refreshes > 1 else ''} wrote {gen.refresh_write:,} "
            f"(priced {gen.refresh_priced:,.0f}) and saved {gen.refresh_saved:,.0f} net")
        rows.append((f"session {index} ({gen.kind}) {gen.session_id[:8]}",
                     f"{gen.turns} turns, {slope}; carried {gen.usage.prompt:,} (cache read {gen.usage.cache_read:,}, "
                     f"written {gen.usage.cache_creation:,}, {gen.opening_write:,} at its start); priced "
                     f"{gen.priced:,.0f} input-token eq.{refreshed}"))
    for what, value in rows:
        table.add_row(_t(what), value)
    return table


def _tools(report: Report) -> Table:
    table = Table(title="Tool calls", title_justify="left")
    table.add_column("tool")
    table.add_column("main", justify="right")
    table.add_column("subagents", justify="right")
    names = sorted(
        set(report.main.tool_calls) | set(report.subagents.tool_calls),
        key=lambda t: (-(report.main.tool_calls.get(t, 0) + report.subagents.tool_calls.get(t, 0)), t),
    )
    for name in names:
        table.add_row(
            _t(name), str(report.main.tool_calls.get(name, 0)), str(report.subagents.tool_calls.get(name, 0))
        )
    return table


def _economics(report: Report, workbench_note: str) -> Table:
    table = Table(title="Context economics", title_justify="left", show_header=False)
    table.add_column("what", overflow="fold")
    table.add_column("value", overflow="fold")
    s, p, wb = report.spills, report.pruned, report.workbench
    rows = [
        (
            "spills (spill/log.jsonl)",
            f"{s.count:,}: {s.main} main, {s.subagents} subagents; {s.chars:,} chars moved",
        ),
        ("next resume: expired / denials dropped", f"{p.expired} / {p.denials_dropped}"),
        ("next resume: chars saved (main)", f"{p.chars_saved:,} ({p.main_chars_saved:,})"),
        *([("next resume: left as stored (odd shapes)", f"{p.skipped}")] if p.skipped else []),
        ("workbench", workbench_note),
        ("cache-hit rate", _pct(report.cache_hit_rate)),
        ("cost", "unknown" if report.cost_usd is None else f"${report.cost_usd:,.4f} ({report.cost_source})"),
        ("tool errors: main / subagents", f"{report.main.tool_errors:,} / {report.subagents.tool_errors:,}"),
    ]
    if wb is not None:
        rows.insert(
            4,
            (
                "scripts written / run / re-run",
                f"{wb.scripts_written} / {wb.scripts_executed} / {wb.scripts_rerun} ({wb.script_runs} runs)",
            ),
        )
        rows.insert(5, ("artifacts / notes", f"{wb.artifacts} / {wb.notes}"))
    for what, value in rows:
        table.add_row(what, _t(value))
    return table


def print_report(console: Console, report: Report, *, label: str, workbench_note: str) -> None:
    console.print(Text(f"flower report: {sanitize(label)}", style="bold"))
    for table in (*_threads(report, console.width), _context(report), _tools(report),
                  _economics(report, workbench_note)):
        console.print(table)
    for switch in report.fallbacks:
        console.print(_t(f"fallback: {switch['model']} -> {switch['fallback_model']} ({switch['trigger'] or '?'}) "
                         f"at {switch['timestamp'] or '?'}; see --by model for what ran on each"), style="yellow")


_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def print_preview(console: Console, preview: Preview) -> None:
    if preview.stages:
        console.print(Text(f"rewrites: {', '.join(preview.stages)}", style="dim"))
    for part in (preview.main, *preview.subagents):
        if not part.changed:
            continue
        # One chars-saved figure: the model-visible difference the cost lines below use too.
        what = str(part.report).rsplit("; ", 1)[0] if "chars saved" in str(part.report) else str(part.report)
        saved = part.chars_before - part.chars_after
        console.print(Text(f"== {part.label}: {what}; {saved:,} chars saved", style="bold"))
        for line in part.diff:
            style = next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), "")
            # Folded, not cut: a diff line's end is often the point (the note that replaces a body).
            console.print(Text(sanitize(line), style=style, overflow="fold"))
    unchanged = [p.label for p in (preview.main, *preview.subagents) if not p.changed]
    if unchanged:
        console.print(Text(f"unchanged: {', '.join(unchanged)}", style="dim"))
    p, pv = preview.pricing, preview
    be = pv.break_even_requests
    even = "" if be is None else f"; the rewrite breaks even after {math.ceil(be)} requests"
    saved = p.tokens(pv.chars_saved)
    lines = [
        f"main thread: {pv.chars_saved:,} chars saved (~{saved:,} tokens less in every later request)",
        (f"cache, warm: the first resumed request re-writes {p.tokens(pv.main.tail_chars_after):,} tokens "
         f"instead of reading {p.tokens(pv.main.tail_chars_before):,}: {pv.cache_write_usd:+.4f} USD"),
        f"cache, warm: each later request saves {pv.saved_per_request_usd:.4f} USD{even}",
        f"cache, cold (expired anyway): the first request saves {pv.cold_saved_usd:.4f} USD",
        (f"prices: cache write ${p.cache_write}/MTok, read ${p.cache_read}/MTok, "
         f"{p.chars_per_token:g} chars/token"),
    ]
    for line in lines:
        console.print(Text(line))


def _when(mtime: Any) -> str:
    if not isinstance(mtime, (int, float)):
        return ""
    return datetime.fromtimestamp(mtime / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M")


def print_sessions(console: Console, rows: Sequence[Mapping[str, Any]]) -> None:
    projects = sorted({str(row.get("project_key", "")) for row in rows})
    one = len(projects) == 1
    title = f"{len(rows)} sessions" + (f" of project {sanitize(projects[0])}" if one else "")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("session", "step", "ok", "cost", "last write (UTC)", *([] if one else ["project"])):
        table.add_column(column, no_wrap=column in ("session", "cost", "last write (UTC)"), overflow="fold")
    for row in rows:
        ok = "" if row.get("ok") is None else ("yes" if row["ok"] else "no")
        step = (row.get("step") or "") + (" (retired)" if row.get("retired") else "")
        cost = "" if row.get("cost_usd") is None else f"${row['cost_usd']:.4f}"
        # The 8-character prefix names the session in every command (`flower logs 9812f842`).
        cells: list[Text | str] = [_t(row["session_id"][:8]), _t(step), ok, cost, _when(row.get("mtime"))]
        table.add_row(*cells, *([] if one else [_t(row.get("project_key", ""))]))
    console.print(table)


def print_session(console: Console, info: Mapping[str, Any]) -> None:
    table = Table(title=f"session {sanitize(info['session_id'])}", title_justify="left", show_header=False)
    table.add_column("what", overflow="fold")
    table.add_column("value", overflow="fold")
    for key in (
        "project_key",
        "entries",
        "turns",
        "chars",
        "tool_calls",
        "context",
        "cost_usd",
        "first_prompt",
    ):
        value = info.get(key)
        if key == "context":
            value = f"{format_tokens(value)} tokens" if value else "n/a"
        table.add_row(key.replace("_", " "), _t(fit(sanitize(str(value if value is not None else "")), 100)))
    for agent in info.get("subagents", []):
        table.add_row(
            _t(f"subagent {agent.get('worker') or ''} ({agent['agent']})".replace("  ", " ")),
            _t(f"{agent['entries']} entries, {agent['turns']} turns")
        )
    for step in info.get("steps", []):
        table.add_row(
            _t(f"step {step.get('step')}"), _t(f"ok={step.get('ok')} cost=${step.get('cost_usd') or 0:.4f}")
        )
    console.print(table)


def print_breakdown(console: Console, buckets: Sequence[Any], by: str, *, label: str) -> None:
    """`flower report --by`: one row per group and a total, numbers never cut (tokens in K/M)."""
    headers = (by, "msgs", "input", "c-read", "c-write", "output", "cost")
    k = format_tokens
    rows: list[list[str | Text]] = [
        [_t(b.key), f"{b.messages:,}", k(b.input), k(b.cache_read), k(b.cache_write), k(b.output),
         f"${b.cost_usd:,.4f}"] for b in buckets]
    caption = "each API message once, priced as the CLI prices it"
    if by == "step" and any(b.key.startswith("session ") for b in buckets):
        caption += "; `session <id>`: a session the manifest names no step for"
    console.print(Text(f"flower report: {sanitize(label)}", style="bold"), overflow="fold")
    for table in number_tables(f"by {by}", headers, rows, numeric=[h != by for h in headers], width=console.width,
                               caption=caption):
        console.print(table)
