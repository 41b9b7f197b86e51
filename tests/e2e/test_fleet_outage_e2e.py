"""A `flower worker` through a PostgreSQL outage: one line per problem, and it works again afterwards
(issue #26 item 9).

The shared server is never restarted (other tests use it): the worker reaches it through a TCP proxy the
test cuts (every connection dropped, new ones refused, as in a restart) and restores. Before, each DBOS
thread (queue, scheduler, notification listener, background jobs) logged every failed poll, several with a
traceback: hundreds of lines for a few seconds of outage.
"""

from __future__ import annotations

import os
import re
import select
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from flower.flow import engine
from flower.testing import ScriptedAPI, text
from tests.support.fleet import first_line, flower
from tests.support.tcpproxy import TcpProxy

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You work on one item.", allowed_tools=["Read"])
fan = Workflow([Step("each", spec, "work on ITEM-{item}", over=[f"n{i}" for i in range(6)], limit=3)],
               name="fan")
"""


def _lines_until(child: Any, wanted: str, timeout: float) -> list[str]:
    """The worker's stderr lines up to and including the first one containing `wanted`."""
    lines: list[str] = []
    pending = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # raw reads: lines that arrive together are not left in a buffer
        ready, _, _ = select.select([child.stderr], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(child.stderr.fileno(), 65536)
        if not chunk:
            break
        pending += chunk
        *whole, pending = pending.split(b"\n")
        for line in whole:
            lines.append(line.decode())
            if wanted in lines[-1]:
                return lines
    raise AssertionError(f"no line with {wanted!r}; the worker wrote {lines}")


def test_a_worker_says_one_line_while_postgresql_is_down_and_takes_steps_when_it_is_back(
    scripted_api: ScriptedAPI, tmp_path: Path, database: str
) -> None:
    def handler(request: Any) -> Any:
        (item,) = set(re.findall(r"ITEM-(n\d)", request.text))
        return text(f"done {item}", delay=2.0)

    scripted_api.handler = handler
    (tmp_path / "flow.py").write_text(FLOW)
    env = scripted_api.cli_env(tmp_path / "home")
    proxy = TcpProxy(("127.0.0.1", int(re.search(r":(\d+)/", database).group(1))))  # type: ignore[union-attr]
    through = re.sub(r":\d+/", f":{proxy.port}/", database, count=1)
    worker = flower(env, "worker", "--store", through, "--id", "w1", "--heartbeat-timeout", "4",
                    "-r", str(tmp_path / "w1-runs"))
    lead = None
    client = None
    try:
        assert first_line(worker).startswith("worker w1 on ")
        time.sleep(2)
        proxy.cut()  # PostgreSQL goes away for the worker
        time.sleep(10)
        proxy.restore()
        said = _lines_until(worker, "reachable again", timeout=60)
        fence = [line for line in said if line.startswith("worker w1: ")]  # its lease ran out meanwhile
        assert [line for line in said if line not in fence] == [
            "the system database is unreachable (server closed the connection unexpectedly); "
            "retrying until it is back", "the system database is reachable again"], said
        assert len(fence) == 2 and re.fullmatch(r"worker w1: no heartbeat landed for \d+ s \(its timeout is 4 s\): "
                                                r"its steps may run elsewhere now; stopped the 0 it ran", fence[0]), said
        assert fence[1] == "worker w1: its heartbeat landed again; taking steps again", said

        ws = tmp_path / "ws"
        ws.mkdir()
        runs = tmp_path / "runs"
        lead = flower(env, "run", f"{tmp_path / 'flow.py'}:fan", "-w", str(ws), "-r", str(runs), "--store", database,
                      "--on-workers")  # every step on w1: it takes steps again
        out, err = lead.communicate(timeout=180)
        assert lead.returncode == 0, err
        client = engine.client(runs, database)
        (run,) = client.list_workflows(name="flower.run")
        assert run.output["each"] == [f"done n{i}" for i in range(6)]
        assert set(run.output["_ran_by"].values()) == {"w1"}, run.output["_ran_by"]  # the worker took steps again
    finally:
        if client is not None:
            client.destroy()
        for child in (worker, lead):
            if child is not None and child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                child.wait(timeout=30)
        proxy.cut()
    rest = worker.stderr.read() if worker.stderr is not None else ""
    assert "Traceback" not in rest and "WARNING" not in rest, rest[:2000]
