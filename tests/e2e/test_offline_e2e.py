"""No address but 127.0.0.1 is contacted (issue #2): a CLI run under strace connects only to loopback."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

RUN = """
import anyio, sys
from pathlib import Path
from claude_agent_sdk import ClaudeAgentOptions
from flower.testing import ScriptedAPI, collect, text, tool_use

async def main():
    tmp = Path(sys.argv[1])
    with ScriptedAPI([tool_use("Bash", {"command": "echo hi"}), text("done")]) as api:
        options = ClaudeAgentOptions(cwd=str(tmp), env=api.cli_env(tmp / "home"), allowed_tools=["Bash"],
                                     setting_sources=[])
        run = await collect("go", options)
        assert run.result.result == "done"

anyio.run(main)
"""
INET = re.compile(r"connect\(\d+, \{sa_family=AF_INET6?, [^}]*?(?:inet_addr\(\"([^\"]+)\"\)|inet_pton\(AF_INET6, \"([^\"]+)\")")


def test_a_cli_run_connects_to_loopback_only(tmp_path: Path) -> None:
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    trace = tmp_path / "connect.trace"
    done = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(trace), sys.executable, "-c",
                           RUN, str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    addresses = {a or b for a, b in INET.findall(trace.read_text())}
    assert addresses, "no TCP connection was traced at all: the check itself is broken"
    assert addresses <= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}, addresses
