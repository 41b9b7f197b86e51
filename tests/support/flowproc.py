"""`flower` commands run as subprocesses of a test (a process group each, so a test can kill the whole of
one), and what their runs left behind: `flower runs --json`, the final context, a request's session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flower.testing import ScriptedAPI

FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You do the step.", allowed_tools=["Bash"])
flow = Workflow([
    Step("one", spec, "STEP-ONE: start"),
    Step("two", spec, "STEP-TWO: the long part"),
    Step("three", spec, lambda ctx: f"STEP-THREE: after {ctx['two']}"),
], name="three-steps")
"""
"""A three-step workflow whose prompts name their step."""

SLEEP = 'python3 -c "import time; time.sleep(60)"'
"""A Bash command that keeps a step in flight."""


def flower(env: dict[str, str], *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "flower", *args], env={**os.environ, **env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kwargs)


def finish(child: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = child.communicate(timeout=timeout)
    return child.returncode, out, err


def runs_json(env: dict[str, str], run_dir: Path) -> list[dict[str, Any]]:
    code, out, err = finish(flower(env, "runs", "-r", str(run_dir), "--json"))
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def outputs(run_dir: Path) -> dict[str, Any]:
    """The final context of the one run in `run_dir` (flower's own keys left out)."""
    from flower.flow import engine

    client = engine.client(run_dir)
    try:
        (status,) = client.list_workflows(name="flower.run")
        return {k: v for k, v in status.output.items() if not k.startswith("_")}
    finally:
        client.destroy()


def processes_in(home: Path) -> list[str]:
    """The command lines of the live processes (no zombies) whose environment names `home`: a flower of a
    test, the CLI it started, and the CLI's tool commands (Linux: read from /proc)."""
    found = []
    needle = f"HOME={home}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:
            continue  # ended meanwhile, or not ours to read
    return found


def session(request: Any) -> str:
    return str(request.headers.get("x-claude-code-session-id"))


def wait_for_request(api: ScriptedAPI, needle: str, since: int = 0, *, timeout: float = 90) -> Any:
    """The first request after `since` whose text holds `needle`, once it has come."""
    found: Callable[[], list[Any]] = lambda: [r for r in api.requests[since:] if needle in r.text]  # noqa: E731
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not found():
        time.sleep(0.05)
    assert found(), f"no request with {needle!r}"
    return found()[0]
