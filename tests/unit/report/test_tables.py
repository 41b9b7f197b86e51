"""Terminal tables at 80 and 60 columns never cut or split a number (issue #18), and `report --by`."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from flower.report.tables import number_tables
from tests.support.cli import MAIN_ID, invoke

NUMBER = re.compile(r"\$?\d[\d,]*(?:\.\d+)?[KM%]?")


def render(width: int, *tables: object) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    for table in tables:
        console.print(table)
    return out.getvalue()


@pytest.mark.parametrize("width", [80, 60, 40])
def test_numbers_stay_whole_at_any_width(width: int) -> None:
    headers = ["thread", *(f"col{i}" for i in range(9))]
    figures = [f"{(i + 1) * 1234567:,}" for i in range(9)]
    rows = [["a rather long thread label that must fold", *figures], ["main", *(f"${i}.5000" for i in range(9))]]
    out = render(width, *number_tables("t", headers, rows, numeric=[False] + [True] * 9, width=width))
    lines = out.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    assert "…" not in out
    printed = {m.group(0) for line in lines for m in NUMBER.finditer(line)}
    assert set(figures) <= printed and {f"${i}.5000" for i in range(9)} <= printed


@pytest.mark.parametrize("width", ["80", "60"])
def test_cli_outputs_keep_their_numbers_whole(run_dir: Path, width: str) -> None:
    data = json.loads(invoke("report", str(run_dir), "--json").stdout)
    for args in (("report", str(run_dir)), ("report", str(run_dir), "--by", "worker"),
                 ("sessions", "list", "-r", str(run_dir)), ("sessions", "show", MAIN_ID, "-r", str(run_dir)),
                 ("logs", str(run_dir))):
        out = invoke(*args, env={"COLUMNS": width}).stdout
        lines = out.splitlines()
        assert all(len(line) <= int(width) for line in lines), (args, max(lines, key=len))
        assert "…" not in out, args
    report = invoke("report", str(run_dir), env={"COLUMNS": width}).stdout
    turns = f"{data['main']['turns']:,}"
    assert re.search(rf"main\s+{turns}\s", report)
    assert f"${data['cost_usd']:,.4f}" in report


def test_report_by_adds_up_and_prints_json(run_dir: Path) -> None:
    for by in ("worker", "model", "day", "step"):
        data = json.loads(invoke("report", str(run_dir), "--by", by, "--json").stdout)
        assert data["by"] == by and data["rows"]
        for key in ("messages", "input_tokens", "cache_read_tokens", "output_tokens"):
            assert sum(r[key] for r in data["rows"]) == data["total"][key]
        assert sum(r["cost_usd"] for r in data["rows"]) == pytest.approx(data["total"]["cost_usd"])
    workers = json.loads(invoke("report", str(run_dir), "--by", "worker", "--json").stdout)
    assert [r["worker"] for r in workers["rows"]][0] == "main" and len(workers["rows"]) == 2
    report = json.loads(invoke("report", str(run_dir), "--json").stdout)
    assert workers["total"]["messages"] == report["main"]["turns"] + report["subagents"]["turns"]
    shown = invoke("report", str(run_dir), "--by", "model").stdout
    assert "by model" in shown and "total" in shown


def test_the_timeline_draws_at_most_forty_subagent_lanes() -> None:
    from flower.report.html import _timeline_chart
    from flower.report.timeline import Arrow, Lane, Timeline

    lanes = [Lane("main 1", "main", 0.0, 100.0, 10, 1, "s")]
    lanes += [Lane(f"w{i}", "worker", float(i), i + 1.0, 5, 1, f"a{i}") for i in range(60)]
    svg = _timeline_chart(Timeline(lanes, [Arrow(float(i), 0, i + 1, f"w{i}") for i in range(60)]))
    assert svg.count('class="lane"') == 41 and svg.count('class="dispatch"') == 40
    assert "20 more not drawn" in svg
    assert re.findall(r'class="tick-label"[^>]*>([^<]+)<', svg)[:3] == ["0 s", "15 s", "30 s"]
