"""The run report as one self-contained HTML file (B-10, `flower report --html`).

Charts are inline SVG drawn here, in Python: the main thread's context per turn with the handoff threshold
and the generation boundaries, characters by thread, and tool calls by thread and tool. Nothing is loaded
from the network (no CDN, no font, no image). A few lines of inline script mark each chart that the
browser really laid out (`data-drawn`), so a headless test can tell a drawn page from a blank one.

Invariants: every attribute and text goes through `_el`, which escapes it (tool names, agent ids and the
model come from transcripts); every number written into SVG geometry is finite; the page is complete
without its script.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flower.report.analysis import Report
from flower.report.text import format_tokens
from flower.report.timeline import Arrow, Timeline

__all__ = ["context_chart", "render_html", "timeline_chart"]

MAIN_COLOR, SUB_COLOR, LIMIT_COLOR, GRID = "#3366cc", "#dd8833", "#cc3333", "#e3e3e3"
WIDTH = 860
MAX_BARS = 15
_MARK = (
    "(function(){var n=0;document.querySelectorAll('svg.chart').forEach(function(s){"
    "var p=s.querySelector('.plot');if(!p)return;var b=p.getBBox();"
    "if(b.width>0&&b.height>0){n++;s.setAttribute('data-drawn','1');}});"
    "document.body.setAttribute('data-charts-drawn',String(n));})();"
)
_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:900px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0}
td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.note{color:#666;font-size:12px}
svg{display:block;margin:8px 0}text{font:11px system-ui,sans-serif;fill:#333}
"""
Bars = Sequence[tuple[str, Sequence[tuple[float, str]]]]
"""Rows of a bar chart: (label, [(value, color), ...]), segments stacked left to right."""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}" if math.isfinite(value) else "0"


def _el(tag: str, body: str = "", /, **attrs: Any) -> str:
    """One element; `body` is trusted markup (build it with `_el` or `_e`), attributes are escaped.
    Attribute names use `_` for `-` (`stroke_dasharray=...`); floats are written finite, one decimal."""
    rendered = "".join(
        f' {name.rstrip("_").replace("_", "-")}="{_num(v) if isinstance(v, float) else _e(v)}"'
        for name, v in attrs.items()
    )
    return f"<{tag}{rendered}/>" if not body else f"<{tag}{rendered}>{body}</{tag}>"


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(float(step * magnitude) for step in (1, 2, 2.5, 5, 10) if step * magnitude >= value)


def _svg(chart_id: str, height: int, title: str, body: str) -> str:
    return _el(
        "svg", _el("title", _e(title)) + body, class_="chart", id=chart_id, xmlns="http://www.w3.org/2000/svg",
        width=WIDTH, height=height, viewBox=f"0 0 {WIDTH} {height}", role="img", aria_label=title,
    )


class _Frame:
    """The context chart's coordinate system: turn index -> x, tokens -> y."""

    left, right, top, bottom, height = 70, 20, 20, 40, 320

    def __init__(self, turns: int, ymax: float) -> None:
        self.turns, self.ymax = turns, ymax
        self.width = WIDTH - self.left - self.right
        self.plot_h = self.height - self.top - self.bottom

    def x(self, i: float) -> float:
        return self.left + (self.width * i / (self.turns - 1) if self.turns > 1 else self.width / 2)

    def y(self, tokens: float) -> float:
        return self.top + self.plot_h - self.plot_h * tokens / self.ymax


def _grid(f: _Frame) -> str:
    parts = []
    for k in range(6):
        value, y = f.ymax * k / 5, f.y(f.ymax * k / 5)
        parts.append(_el("line", x1=f.left, x2=WIDTH - f.right, y1=y, y2=y, stroke=GRID))
        parts.append(_el("text", format_tokens(int(value)), x=f.left - 6, y=y + 4, text_anchor="end"))
    label = f"main-thread API message (turn) 1..{f.turns}"
    parts.append(_el("text", label, x=f.left + f.width / 2, y=f.height - 8, text_anchor="middle"))
    return "".join(parts)


def _boundaries(report: Report, f: _Frame) -> str:
    parts = []
    for gen in report.generations[1:]:
        x = f.x(gen.first_turn - 0.5) if f.turns > 1 else f.x(0)
        label = "new generation" if gen.kind == "handoff" else "new session"
        parts.append(_el("line", class_="boundary", x1=x, x2=x, y1=f.top, y2=f.top + f.plot_h, stroke="#888",
                         stroke_dasharray="4 3"))
        parts.append(_el("text", label, x=x, y=f.top + 10, dx=3))
    return "".join(parts)


def _threshold(threshold: int | None, peak: int, drawn: bool, f: _Frame) -> str:
    if not threshold:
        return ""
    right = WIDTH - f.right
    if not drawn:
        words = (f"handoff threshold {format_tokens(threshold)} is above this chart "
                 f"({threshold / peak:.0f}x the peak)")
        return _el("text", _e(words), x=right, y=f.top + 10, text_anchor="end", fill=LIMIT_COLOR)
    y = f.y(threshold)
    line = _el("line", class_="threshold", x1=f.left, x2=right, y1=y, y2=y, stroke=LIMIT_COLOR,
               stroke_dasharray="6 4")
    words = f"handoff threshold {format_tokens(threshold)}"
    return line + _el("text", _e(words), x=right, y=y, dy=-4, text_anchor="end", fill=LIMIT_COLOR)


def _curve(points: Sequence[int], f: _Frame) -> str:
    coords = " ".join(f"{_num(f.x(i))},{_num(f.y(v))}" for i, v in enumerate(points))
    body = _el("polyline", points=coords, fill="none", stroke=MAIN_COLOR, stroke_width=2)
    if len(points) <= 400:  # one hoverable dot per turn while they stay distinguishable
        body += "".join(_el("circle", _el("title", f"turn {i + 1}: {v:,} tokens"), cx=f.x(i), cy=f.y(v),
                            r=2.5, fill=MAIN_COLOR) for i, v in enumerate(points))
    return _el("g", body, class_="plot")


def _context_chart(report: Report) -> str:
    points, threshold, title = report.contexts, report.threshold, "main-thread context per turn"
    if not points:
        empty = _el("text", "no main-thread turns with usage", x=10, y=40)
        return _svg("chart-context", 80, title, _el("g", empty, class_="plot"))
    peak = max(points)
    drawn = threshold is not None and 0 < threshold <= 4 * peak  # else the curve would be flat at the bottom
    frame = _Frame(len(points), _nice_max(max(peak, threshold or 0) * 1.08 if drawn else peak * 1.15))
    body = _grid(frame) + _boundaries(report, frame) + _threshold(threshold, peak, drawn, frame)
    body += _curve(points, frame)
    return _svg("chart-context", frame.height, title, body)


def _bars(chart_id: str, title: str, rows: Bars, unit: str) -> str:
    left, right, row_h, top = 190, 80, 22, 10
    height = top + row_h * max(1, len(rows)) + 10
    biggest = max([sum(v for v, _ in segments) for _, segments in rows] + [0])
    scale = (WIDTH - left - right) / biggest if biggest else 0
    parts = [] if rows else [_el("text", "none", x=left, y=top + 14)]
    for index, (label, segments) in enumerate(rows):
        y, x = top + index * row_h, float(left)
        parts.append(_el("text", _e(label), x=left - 8, y=y + 14, text_anchor="end"))
        for value, color in segments:
            if value > 0:
                width = max(1.0, value * scale)
                tip = _el("title", _e(f"{label}: {value:,.0f} {unit}"))
                parts.append(_el("rect", tip, x=x, y=y + 3, width=width, height=row_h - 6, fill=color))
                x += width
        parts.append(_el("text", f"{sum(v for v, _ in segments):,.0f}", x=x + 6, y=y + 14))
    return _svg(chart_id, height, title, _el("g", "".join(parts), class_="plot"))


def _chars_chart(report: Report, names: dict[str, str] | None = None) -> str:
    agents = sorted(report.per_agent.items(), key=lambda item: -item[1].chars)
    names = names or {}
    rows: list[tuple[str, Sequence[tuple[float, str]]]] = [("main thread", [(report.main.chars, MAIN_COLOR)])]
    rows += [(f"subagent {names.get(agent, agent)}", [(stats.chars, SUB_COLOR)]) for agent, stats in agents[:MAX_BARS]]
    if len(agents) > MAX_BARS:
        rest = sum(s.chars for _, s in agents[MAX_BARS:])
        rows.append((f"{len(agents) - MAX_BARS} more subagents", [(rest, SUB_COLOR)]))
    return _bars("chart-chars", "characters by thread", rows, "chars")


def _tools_chart(report: Report) -> str:
    main, subs = report.main.tool_calls, report.subagents.tool_calls
    names = sorted(set(main) | set(subs), key=lambda t: (-(main.get(t, 0) + subs.get(t, 0)), t))
    rows = [(name, [(main.get(name, 0), MAIN_COLOR), (subs.get(name, 0), SUB_COLOR)]) for name in names[:20]]
    return _bars("chart-tools", "tool calls by thread and tool", rows, "calls")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _table(rows: Sequence[tuple[str, str]]) -> str:
    return _el("table", "".join(_el("tr", _el("th", _e(k)) + _el("td", _e(v), class_="n")) for k, v in rows))


def _summary_rows(r: Report) -> list[tuple[str, str]]:
    wb = r.workbench
    reuse = "not found" if wb is None else (
        f"{wb.scripts_written} written, {wb.scripts_executed} run, {wb.scripts_rerun} re-run "
        f"({wb.script_runs} runs); {wb.artifacts} artifacts, {wb.notes} notes")
    ahead = "n/a" if r.turns_to_threshold is None else f"{math.ceil(r.turns_to_threshold):,} turns"
    return [
        ("sessions", str(len(r.sessions) or 1)),
        ("turns: main / subagents",
         f"{r.main.turns:,} / {r.subagents.turns:,} ({_pct(r.subagent_turn_share)} in subagents)"),
        ("chars: main / subagents",
         f"{r.main.chars:,} / {r.subagents.chars:,} ({_pct(r.subagent_char_share)} in subagents)"),
        ("main-thread context now", f"{(r.contexts or [0])[-1]:,} tokens"),
        ("context slope (current generation)", "n/a" if r.slope is None else f"{r.slope:,.0f} tokens/turn"),
        ("handoff threshold", "n/a" if r.threshold is None else f"{r.threshold:,} tokens"),
        ("projected turns to threshold", ahead),
        ("spills", f"{r.spills.count:,} ({r.spills.chars:,} chars moved; {r.spills.main} on main)"),
        ("next resume prunes", (f"{r.pruned.expired} expired, {r.pruned.denials_dropped} denials; "
                                f"{r.pruned.chars_saved:,} chars saved")),
        ("workbench reuse", reuse),
        ("cache-hit rate", _pct(r.cache_hit_rate)),
        ("cost", "unknown" if r.cost_usd is None else f"${r.cost_usd:,.4f} ({r.cost_source})"),
        ("tool errors: main / subagents", f"{r.main.tool_errors:,} / {r.subagents.tool_errors:,}"),
    ]


_STEPS = (0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400)


def _tick(seconds: float, step: float) -> str:
    if step >= 3600:
        return f"{seconds / 3600:g} h"
    if step >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


MAX_LANES = 40


@dataclass(frozen=True)
class _Lanes:
    """Where a moment and a lane land on the timeline chart."""

    start: float
    span: float
    left: int = 190
    width: int = WIDTH - 190 - 30
    top: int = 16
    lane_h: int = 26

    def x(self, t: float) -> float:
        return self.left + self.width * (t - self.start) / self.span

    def y(self, index: int) -> float:
        return self.top + index * self.lane_h


def _capped(tl: Timeline) -> tuple[Timeline, str]:
    """The timeline with at most `MAX_LANES` subagents, and the chart's title saying how many are left out."""
    title = "threads over time"
    workers = [i for i, lane in enumerate(tl.lanes) if lane.kind == "worker"]
    if len(workers) > MAX_LANES:
        keep = [i for i, lane in enumerate(tl.lanes) if lane.kind == "main" or i in workers[:MAX_LANES]]
        where = {old: new for new, old in enumerate(keep)}
        hidden = len(workers) - MAX_LANES
        tl = Timeline([tl.lanes[i] for i in keep],
                      [Arrow(a.at, where[a.source], where[a.target], a.label) for a in tl.arrows
                       if a.source in where and a.target in where], tl.prompt, tl.outcome, tl.ok)
        title += f" (first {MAX_LANES} subagents; {hidden} more not drawn)"
    return tl, title


def _time_axis(frame: _Lanes, bottom: float) -> list[str]:
    """Grid lines with tick labels every `step`, and the axis title naming the unit."""
    step = next((s for s in _STEPS if frame.span / s <= 8), _STEPS[-1])
    parts = []
    tick = 0.0
    while tick <= frame.span + 1e-9:
        tx = frame.x(frame.start + tick)
        parts.append(_el("line", class_="tick", x1=tx, x2=tx, y1=frame.top, y2=bottom, stroke=GRID))
        parts.append(_el("text", _e(_tick(tick, step)), class_="tick-label", x=tx, y=bottom + 14,
                         text_anchor="middle"))
        tick += step
    parts.append(_el("text", _e(f"time since the run started ({_tick(step, step).split()[-1]})"),
                     x=frame.left + frame.width / 2, y=bottom + 30, text_anchor="middle"))
    return parts


def _lane_bars(tl: Timeline, frame: _Lanes) -> list[str]:
    """One labelled bar per thread, its token count inside the bar when it fits, else after it."""
    x, lane_h = frame.x, frame.lane_h
    parts = []
    for index, lane in enumerate(tl.lanes):
        color = MAIN_COLOR if lane.kind == "main" else SUB_COLOR
        ly = frame.y(index)
        parts.append(_el("text", _e(lane.label), class_="lane-label", x=frame.left - 8, y=ly + 16, text_anchor="end"))
        bar_w = max(2.0, x(lane.end) - x(lane.start))
        tip = _el("title", _e(f"{lane.label}: {lane.messages} API messages, {lane.tokens:,} tokens, "
                              f"{lane.end - lane.start:.1f} s"))
        parts.append(_el("rect", tip, class_="lane", data_label=lane.label, x=x(lane.start), y=ly + 4,
                         width=bar_w, height=lane_h - 8, fill=color, rx=2))
        words = f"{format_tokens(lane.tokens)} tokens"
        inside = bar_w > 90
        parts.append(_el("text", _e(words), class_="lane-tokens", x=x(lane.start) + (4 if inside else bar_w + 4),
                         y=ly + 16, style="fill:#fff" if inside else "fill:#333"))
    return parts


def _links(tl: Timeline, frame: _Lanes) -> list[str]:
    """Dashed handoffs from each main generation to the next, and an arrow per dispatch."""
    x, y, lane_h = frame.x, frame.y, frame.lane_h
    parts = []
    mains = [i for i, lane in enumerate(tl.lanes) if lane.kind == "main"]
    for before, after in zip(mains, mains[1:]):  # a handoff: the next generation takes over
        a, b = tl.lanes[before], tl.lanes[after]
        parts.append(_el("line", _el("title", "handoff to the next generation"), class_="handoff",
                         x1=x(a.end), x2=x(b.start), y1=y(before) + lane_h / 2, y2=y(after) + lane_h / 2,
                         stroke=MAIN_COLOR, stroke_dasharray="4 3", marker_end="url(#arrow)"))
    for arrow in tl.arrows:
        ax = x(arrow.at)
        parts.append(_el("line", _el("title", _e(f"dispatch {arrow.label}")), class_="dispatch", x1=ax, x2=ax,
                         y1=y(arrow.source) + lane_h - 4, y2=y(arrow.target) + 4, stroke="#555",
                         stroke_width=1.2, marker_end="url(#arrow)"))
    return parts


def _timeline_chart(tl: Timeline) -> str:
    """Threads as bars over time (main and each subagent), dispatch arrows, axis ticks with units; past
    `MAX_LANES` subagents, the rest are counted in a note instead of drawn."""
    tl, title = _capped(tl)
    if not tl.lanes:
        return _svg("chart-timeline", 80, title, _el("g", _el("text", "no timestamps", x=10, y=40), class_="plot"))
    frame = _Lanes(tl.start, max(tl.end - tl.start, 1.0))
    axis = 34
    height = frame.top + frame.lane_h * len(tl.lanes) + axis
    parts = [_el("defs", _el("marker", _el("path", d="M0,0 L8,4 L0,8 z", fill="#555"), id="arrow",
                                     markerWidth=8, markerHeight=8, refX=8, refY=4, orient="auto"))]
    parts += _time_axis(frame, frame.y(len(tl.lanes)))
    parts += _lane_bars(tl, frame)
    parts += _links(tl, frame)
    return _svg("chart-timeline", height, title, _el("g", "".join(parts), class_="plot"))


def context_chart(report: Report) -> str:
    """The main-thread context per turn as one SVG element (generation boundaries and the handoff
    threshold marked), as the report draws it; `flower web` shows the same chart live."""
    return _context_chart(report)


def timeline_chart(timeline: Timeline) -> str:
    """The threads over time as one SVG element, as the report draws it."""
    return _timeline_chart(timeline)


def _worker_names(tl: Timeline | None) -> dict[str, str]:
    """agent id -> "tester (a1b2c3d4)": worker names instead of hex ids where the timeline knows them."""
    if tl is None:
        return {}
    return {lane.key: f"{lane.label} ({lane.key[:8]})" for lane in tl.lanes if lane.kind == "worker"}


def _story(tl: Timeline) -> str:
    outcome = {True: "succeeded", False: "failed", None: "outcome unknown"}[tl.ok]
    rows = [("prompt", tl.prompt.strip()[:600] or "(not found)"),
            (f"outcome ({outcome})", tl.outcome.strip()[:600] or "(no final text)")]
    return _el("table", "".join(_el("tr", _el("th", _e(k)) + _el("td", _e(v), class_="story")) for k, v in rows),
               class_="story")


def render_html(report: Report, *, title: str = "flower run report", timeline: Timeline | None = None) -> str:
    """The whole page as one string (with `timeline`: the prompt, the outcome and the threads over time)."""
    legend = _el("p", f'<span style="color:{MAIN_COLOR}">&#9632;</span> main thread '
                      f'<span style="color:{SUB_COLOR}">&#9632;</span> subagents', class_="note")
    body = [
        _el("h1", _e(title)),
        _el("p", _e(f"model {report.model or 'unknown'}; usage counted once per API message"), class_="note"),
        _table(_summary_rows(report)),
        *([_el("h2", "Prompt and outcome"), _story(timeline), _el("h2", "Threads over time"),
           _el("p", "Each bar is a thread from its first to its last stored entry; an arrow is a dispatch "
                    "from the main thread; tokens are each thread's input and output, each API message once.",
               class_="note"), _timeline_chart(timeline)] if timeline is not None else []),
        _el("h2", "Main-thread context per turn"), _context_chart(report),
        _el("h2", "Characters by thread"), _chars_chart(report, _worker_names(timeline)),
        _el("h2", "Tool calls by thread and tool"), legend, _tools_chart(report),
    ]
    head = _el("head", '<meta charset="utf-8">' + _el("title", _e(title)) + _el("style", _STYLE))
    page = _el("html", head + _el("body", "\n".join(body) + _el("script", _MARK)), lang="en")
    return f"<!DOCTYPE html>\n{page}\n"
