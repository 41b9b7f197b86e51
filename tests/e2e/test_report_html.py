"""`flower report --html` rendered by headless Chromium (B-10): the page loads, the three charts are laid out,
and the browser logs nothing to its console.

How the console is read: Chromium's own log (`--enable-logging=stderr --v=0`) prints every console message
of the page, SVG attribute parse errors included, as an `INFO:CONSOLE` line on stderr. That needs no
DevTools client. The page has no script beyond its own few lines, so ANY console line is a failure; a
control page with a broken SVG path and a `console.error` proves the check sees both.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flower.report.analysis import analyze
from flower.report.html import render_html
from tests.support.browser import load
from tests.support.sessions import main_session, reply, sub_session, usage, user

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

def test_the_console_check_can_fail(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><body><svg><path d="M 0 0 L x 5"/></svg>'
        "<script>console.error('control-marker')</script></body></html>"
    )
    _, console = load(chromium, page, tmp_path / "profile")
    assert any("attribute d: Expected number" in line for line in console)
    assert any("control-marker" in line for line in console)


def generations_report() -> object:
    second = [
        user("g1", "continue", session="S2"),
        *reply("n1", "q1", [{"type": "text", "text": "a"}], usage(400, 600, 0, 1), session="S2"),
        *reply("n2", "q2", [{"type": "text", "text": "b"}], usage(800, 1200, 0, 1), session="S2"),
    ]
    return analyze(
        {"S1": main_session(), "S2": second},
        {"a1": sub_session(), "b<2>": sub_session()},
        retired={"S1"},
        threshold=4_000,
    )


def test_report_page_renders_its_charts_without_console_errors(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(generations_report(), title="two generations"), encoding="utf-8")  # type: ignore[arg-type]
    dom, console = load(chromium, page, tmp_path / "profile")
    assert console == []
    assert 'data-charts-drawn="3"' in dom  # the page's script found three laid-out, non-empty plots
    drawn = re.findall(r'<svg[^>]*class="chart"[^>]*id="(chart-[a-z]+)"[^>]*data-drawn="1"', dom)
    assert drawn == ["chart-context", "chart-chars", "chart-tools"]
    context = dom[dom.index('id="chart-context"') : dom.index('id="chart-chars"')]
    assert context.count("<circle") == 5 and "<polyline" in context  # 3 + 2 main turns
    assert context.count('class="threshold"') == 1 and "handoff threshold 4K" in context
    assert context.count('class="boundary"') == 1 and "new generation" in context
    chars = dom[dom.index('id="chart-chars"') : dom.index('id="chart-tools"')]
    assert chars.count("<rect") == 3 and "subagent b&lt;2&gt;" in chars  # main + two subagents, escaped
    tools = dom[dom.index('id="chart-tools"') :]
    assert (
        tools.count("<rect") == 4
    )  # one rect per non-zero segment: Bash main + subagents, Edit subagents, Agent main
    assert "http" not in dom.replace("http://www.w3.org/2000/svg", "")


def test_real_transcript_report_renders(chromium: str, tmp_path: Path) -> None:
    from tests.support.sessions import REAL, REAL_ID, jsonl_entries

    if not (REAL / f"{REAL_ID}.jsonl").is_file():
        pytest.skip("shared transcripts not present")
    subs = {p.stem: jsonl_entries(p) for p in sorted((REAL / REAL_ID / "subagents").glob("*.jsonl"))}
    page = tmp_path / "real.html"
    page.write_text(
        render_html(analyze({REAL_ID: jsonl_entries(REAL / f"{REAL_ID}.jsonl")}, subs)), encoding="utf-8"
    )
    dom, console = load(chromium, page, tmp_path / "profile")
    assert console == [] and 'data-charts-drawn="3"' in dom
    assert "is above this chart" in dom  # 750K threshold vs a 142K peak: said in words, not drawn off-scale
