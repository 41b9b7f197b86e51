"""A repository's committed `runs/` cannot send flower's own files outside the workspace (issue #30, item 2).

Through the real CLI against the scripted model: a symlink at `runs/sessions.db`, `runs/human.db` or
`runs/.manifest.lock`, each pointing at a missing file outside the workspace, ends the command with one line
naming the link; nothing is created where the link points, and no traceback is printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flower.cli import cli
from flower.testing import ScriptedAPI

pytestmark = pytest.mark.e2e

SPEC = """
from flower.agent.spec import AgentSpec

spec = AgentSpec(name="e2e", instructions="Answer.", allowed_tools=["Read"])
"""


def _workspace(tmp_path: Path, link: str) -> tuple[Path, Path, Path]:
    """A workspace whose committed `runs/` holds `link` pointing at a missing file outside it."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "runs").mkdir(parents=True)
    outside.mkdir()
    (ws / "README").write_text("hello\n")
    target = outside / "authorized_keys2"
    (ws / "runs" / link).symlink_to(target)
    return ws, ws / "runs" / link, target


def _refused(done: Result | subprocess.CompletedProcess[str], link: Path, target: Path) -> None:
    stderr = done.stderr
    code = done.exit_code if isinstance(done, Result) else done.returncode
    assert code == 1, (done.stdout, stderr)
    assert stderr.count("\n") == 1 and stderr.startswith("flower: "), stderr
    assert f"{link} is a symlink" in stderr and "Traceback" not in stderr + done.stdout
    assert not os.path.lexists(target) and os.listdir(target.parent) == []


@pytest.mark.parametrize("link", ["sessions.db", ".manifest.lock"])
def test_run_refuses_a_committed_link_in_the_run_dir(
    scripted_api: ScriptedAPI, tmp_path: Path, link: str
) -> None:
    ws, path, target = _workspace(tmp_path, link)
    (tmp_path / "spec.py").write_text(SPEC)
    env = scripted_api.cli_env(tmp_path / "home")
    done = CliRunner().invoke(cli, ["run", f"{tmp_path / 'spec.py'}:spec", "-w", str(ws), "-r", str(ws / "runs")],
                              env=env, input="say done\n", catch_exceptions=False)
    _refused(done, path, target)
    assert scripted_api.requests == []  # the session's manifest row is written before its CLI starts


def test_go_refuses_a_committed_human_db_link(scripted_api: ScriptedAPI, tmp_path: Path) -> None:
    ws, path, target = _workspace(tmp_path, "human.db")
    env = {**scripted_api.cli_env(tmp_path / "home"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run([sys.executable, "-m", "flower", "go", "-w", str(ws), "make it so"], cwd=ws, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    _refused(done, path, target)
    assert scripted_api.requests == []  # refused before the model was asked anything
