"""`flower testing serve SCRIPT.py` (issue #18, B-15): the printed environment runs `flower once` against it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

SCRIPT = '''
from flower.testing import text, tool_use

main = [tool_use("Read", {"file_path": "NOTE.txt"}), text("the note says SERVED-ANSWER")]
'''


def test_serve_prints_an_environment_that_flower_once_can_use(tmp_path: Path) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "NOTE.txt").write_text("hello from the note\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    server = subprocess.Popen(
        [sys.executable, "-m", "flower", "testing", "serve", str(tmp_path / "script.py"), "--until-done",
         "--home", str(tmp_path / "home")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base)
    try:
        assert server.stdout is not None
        exports = {}
        while len(exports) < 8:
            line = server.stdout.readline()
            assert line.startswith("export "), line
            name, _, value = line[len("export "):].strip().partition("=")
            exports[name] = shlex.split(value)[0]
        assert exports["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
        assert "HOME" not in exports and "HTTP_PROXY" not in exports  # the user's shell keeps its own
        done = subprocess.run(
            [sys.executable, "-m", "flower", "once", "what does the note say?", "-w", str(ws), "-r",
             str(tmp_path / "runs")], env={**base, **exports}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "+ done once" in done.stdout
        _, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err
    assert "served 2 requests" in err


def test_serve_refuses_a_file_without_a_script(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from flower.cli import cli

    (tmp_path / "empty.py").write_text("x = 1\n")
    result = CliRunner().invoke(cli, ["testing", "serve", str(tmp_path / "empty.py")])
    assert result.exit_code == 1 and "defines neither `main`" in result.stderr
