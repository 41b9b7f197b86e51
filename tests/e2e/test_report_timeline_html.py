"""The HTML report's timeline in headless Chromium (issue #18, B-10): a real scripted run (the demo: two
workers, a spill, a handoff) rendered by `flower report --html`, screenshot taken, DOM checked for the
labels, arrows, ticks with units, the prompt and the outcome, and no console line at all."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from flower.cli import cli
from flower.cli.demo import run_demo
from tests.support.browser import FLAGS, load

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_timeline_of_a_real_run(chromium: str, tmp_path: Path) -> None:
    run = anyio.run(run_demo, tmp_path / "demo")
    page = tmp_path / "report.html"
    done = CliRunner().invoke(cli, ["report", str(run.runtime.run_dir), "--html", str(page)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    dom, console = load(chromium, page, tmp_path / "profile")
    assert console == []
    assert 'data-charts-drawn="4"' in dom  # the timeline and the three charts were laid out
    timeline = dom[dom.index('id="chart-timeline"'):dom.index('id="chart-context"')]
    labels = re.findall(r'class="lane-label"[^>]*>([^<]+)<', timeline)
    assert [label.split(" (")[0] for label in labels] == ["main 1", "main 2", "tester", "fixer"]
    assert timeline.count('class="dispatch"') == 2 and timeline.count('class="handoff"') == 1
    ticks = re.findall(r'class="tick-label"[^>]*>([^<]+)<', timeline)
    assert ticks[0] == "0 s" and len(ticks) >= 3 and all(t.endswith((" s", " min", " h")) for t in ticks)
    assert "time since the run started (s)" in timeline
    tokens = re.findall(r'class="lane-tokens"[^>]*>([\d.]+K?) tokens<', timeline)
    assert len(tokens) == 4
    bars = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'class="lane" data-label="([^"]+)" x="([\d.]+)"', timeline)}
    main1 = next(x for label, x in bars.items() if label.startswith("main 1"))
    main2 = next(x for label, x in bars.items() if label.startswith("main 2"))
    assert main1 < bars["tester"] < bars["fixer"] < main2  # the order things happened in
    assert "The calc tests fail. Find out why and fix it." in dom and "outcome (succeeded)" in dom
    assert "Verified: calc.mean now divides by len(xs)" in dom
    assert "subagent tester (" in dom and "subagent fixer (" in dom  # worker names, not hex ids

    shot = tmp_path / "shot.png"
    taken = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1000,1800",
                            f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120, check=False)
    assert taken.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
