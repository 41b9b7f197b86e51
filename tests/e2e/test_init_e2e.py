"""`flower init` (issue #28 item 8): a new folder runs offline at once, as the printed commands say."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def _flower(*args: str, cwd: Path, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flower", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_init_then_serve_then_run_works_offline(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "FLOWER_"))}
    project = tmp_path / "proj"
    made = _flower("init", str(project), cwd=tmp_path, env=base)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in project.iterdir()) == ["flow.py", "flower.toml", "scripted.py"]
    toml = (project / "flower.toml").read_text()
    assert "# handoff_at = 0" in toml and "FLOWER_MODEL" in toml and not [
        line for line in toml.splitlines() if line and not line.startswith("#")]  # every setting commented
    server = subprocess.Popen([sys.executable, "-m", "flower", "testing", "serve", "scripted.py", "--until-done",
                               "--home", str(tmp_path / "home")], cwd=project, env=base, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        exports = {}
        while len(exports) < 8:
            name, _, value = server.stdout.readline()[len("export "):].strip().partition("=")
            exports[name] = shlex.split(value)[0]
        ran = _flower("run", "flow.py:wf", cwd=project, env={**base, **exports})
        assert ran.returncode == 0, ran.stderr
        assert "finished, 2/2 steps" in ran.stderr
        _, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err  # every scripted step used, none violated
    assert "- flow.py: the workflow" in (project / "NOTES.md").read_text()


def test_init_never_overwrites_a_file(tmp_path: Path) -> None:
    (tmp_path / "flower.toml").write_text("model = 'mine'\n")
    made = _flower("init", str(tmp_path), cwd=tmp_path, env=dict(os.environ))
    assert made.returncode == 1 and made.stderr.strip() == (
        f"flower: {tmp_path / 'flower.toml'} exists; flower init writes only new files (move it, or pick another "
        "folder)")
    assert (tmp_path / "flower.toml").read_text() == "model = 'mine'\n" and not (tmp_path / "flow.py").exists()
