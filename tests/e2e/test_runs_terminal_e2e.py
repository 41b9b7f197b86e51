"""`flower runs` in a terminal of 80 columns: a run's line no wider than the terminal, the run id whole (its
workflow and workspace on a line of their own, which only a path longer than the terminal makes wrap); piped,
one line per run, whatever its length (scripts read it)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from flower.testing import ScriptedAPI, text
from tests.support.flowproc import runs_json

pytestmark = [pytest.mark.e2e]

FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You answer.")
wf = Workflow([Step("one", spec, "first"), Step("two", spec, "second")], name="two-steps-with-a-longer-name")
"""


def in_terminal(args: list[str], env: dict[str, str], columns: int) -> str:
    """What `args` prints on a pseudo-terminal `columns` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    child = subprocess.Popen(args, env={**env, "COLUMNS": str(columns)}, stdin=follower, stdout=follower,
                             stderr=follower, close_fds=True)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    child.wait(timeout=60)
    os.close(leader)
    return out.decode(errors="replace").replace("\r\n", "\n")


def test_flower_runs_fits_a_terminal_of_80_columns_and_pipes_one_line_per_run(
    scripted_api: ScriptedAPI, tmp_path: Path
) -> None:
    scripted_api.handler = lambda request: text("ok")
    (tmp_path / "flow.py").write_text(FLOW)
    ws = tmp_path / "a" / "rather" / "deep" / "workspace" / "of" / "a" / "user"
    ws.mkdir(parents=True)
    env = {**os.environ, **scripted_api.cli_env(tmp_path / "home")}
    runs = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "flower", "run", f"{tmp_path / 'flow.py'}:wf", "-w", str(ws), "-r",
                           str(runs), "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (run,) = runs_json(env, runs)

    shown = in_terminal([sys.executable, "-m", "flower", "runs", "-r", str(runs)], env, 80)
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 2, shown
    assert lines[0].startswith(run["run_id"] + " ") and len(lines[0]) <= 80, shown
    assert lines[1] == f"  two-steps-with-a-longer-name in {ws}", shown

    piped = subprocess.run([sys.executable, "-m", "flower", "runs", "-r", str(runs)], env=env, capture_output=True,
                           text=True, timeout=60).stdout.splitlines()
    assert len(piped) == 2 and piped[1].split()[:3] == [run["run_id"], "two-steps-with-a-longer-name", "finished"]
    assert piped[1].rstrip().endswith(str(ws))
