"""The demo (the README's main job) runs offline and every layer shows in its figures (issue #7)."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from flower.cli.demo import run_demo
from flower.cli.demo_checks import print_demo_report

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_demo_shows_every_layer(tmp_path: Path) -> None:
    run = await run_demo(tmp_path / "demo")
    assert [s.ok for s in run.steps] == [True, True], [s.error for s in run.steps]
    out = io.StringIO()
    figures = print_demo_report(run, elapsed=0.0, console=Console(file=out, width=140))

    assert figures.denials == 2 and figures.glances >= 3  # layer one: walls and glance
    assert figures.sub_tool_calls >= 5 and figures.sub_requests >= 5
    assert figures.relay_seen and figures.system_prompt_stable  # layer two: B-4 relay, B-3 stable prompt
    assert figures.script_runs == 2  # the tester's workbench script re-run by the fixer
    assert figures.spills == 1 and figures.spilled_chars > 15_000 and figures.shown_chars < 1_000  # layer three
    assert figures.expired >= 1 and figures.denials_pruned == 1  # layer four, on the resume
    assert figures.handoffs == 1 and figures.retired == 1  # generations
    assert (run.repo / "calc" / "ops.py").read_text().count("/ len(xs)") == 1  # the fixer really fixed it
    assert "DECISION-MEAN" in (run.repo / ".flower" / "notes" / "handoff-verify.md").read_text()
    text = out.getvalue()
    assert "context economics" in text and "1 handoff(s)" in text


async def test_preview_applies_the_policies_the_run_recorded(tmp_path: Path) -> None:
    """B-11: `flower preview` shows what this run's next resume does (the demo keeps 1 glance result, not 6)."""
    import json

    from click.testing import CliRunner

    from flower.cli import cli

    run = await run_demo(tmp_path / "demo")
    manifest = json.loads((run.runtime.run_dir / "manifest.json").read_text())
    assert manifest["steps"][0]["policies"]["ephemeral"] == {"keep_recent": 1}
    session = run.steps[0].session_id
    args = ["preview", str(session), "--run-dir", str(run.runtime.run_dir), "--json"]
    out = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(cli, args))  # the CLI runs its own loop
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)["main"]["report"]
    assert report["expired"] >= 1 and report["denials_dropped"] == 1
