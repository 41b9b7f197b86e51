"""The durable engine's cost (issue #13, B-13): a workflow of trivial agent steps on DBOS against the same steps
as plain `Runtime.run` calls in a loop, and the time to recover a killed run.

Cases (20 steps; `tiny`: 3), each step a real CLI session answered at once by the scripted API:

* `plain loop` — `await runtime.run(spec, prompt)` 20 times: the floor;
* `workflow on SQLite` / `workflow on PostgreSQL` — the same 20 steps as a `Workflow` (each an agent
  checkpoint plus its settle checkpoint and the session record); ratio against the floor;
* `engine only` — the same workflows with a runtime whose `run()` returns at once: what DBOS and flower's
  bookkeeping cost per step, without the CLI's noise; shown as a share of a trivial agent step;
* `recovery` — `flower run` killed (SIGKILL) in step 2, then the same command again: seconds from the restart
  to the resumed step's first request at the API, next to a fresh start's seconds to its first request.

PostgreSQL cases run when 127.0.0.1:5432 answers (database `flow_bench_<pid>`, dropped after).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from bench._table import row

BENCH = "workflow"
ADMIN = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")


@contextmanager
def _database() -> Iterator[str | None]:
    try:
        import psycopg
        from psycopg import sql

        name = f"flow_bench_{os.getpid()}_{secrets.token_hex(2)}"
        with psycopg.connect(ADMIN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except Exception:  # noqa: BLE001 - no server: the PostgreSQL cases are skipped
        yield None
        return
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _spec() -> Any:
    from flower import AgentSpec

    return AgentSpec(name="step", instructions="Answer ok.", allowed_tools=["Read"])


def _workflow(n: int) -> Any:
    from flower import Step, Workflow

    spec = _spec()
    return Workflow([Step(f"s{i}", spec, f"step {i}: say ok") for i in range(n)], name=f"bench-{secrets.token_hex(3)}")


class _Instant:
    """A runtime whose steps return at once: isolates the engine's own cost."""

    def __init__(self, base: Any) -> None:
        self.__dict__.update(base.__dict__)

    async def run(self, spec: Any, prompt: str, **kwargs: Any) -> Any:
        from flower.runtime.steps import StepResult

        return StepResult(step=kwargs.get("step_name") or spec.name, session_id=None, ok=True, cost_usd=0.0,
                          num_turns=1, text="ok")


async def _plain(runtime: Any, n: int) -> float:
    spec = _spec()
    start = time.perf_counter()
    for i in range(n):
        result = await runtime.run(spec, f"step {i}: say ok")
        assert result.ok, result.error
    return time.perf_counter() - start


async def _durable(runtime: Any, n: int, store: str | None) -> float:
    from flower.flow import engine

    engine.launch(runtime.run_dir, store=store)  # launched before timing: a process pays it once
    try:
        workflow = _workflow(n)
        start = time.perf_counter()
        ctx = await workflow.run(runtime, store=store, new=True)
        took = time.perf_counter() - start
        assert ctx.ok and len(ctx.results) == n
        return took
    finally:
        engine.destroy()


def _runtime(root: Path, env: dict[str, str], name: str) -> Any:
    from flower import Runtime

    ws = root / f"ws-{name}"
    ws.mkdir(exist_ok=True)
    return Runtime(ws, run_dir=root / f"runs-{name}", env=env, run_id=f"{name}-{secrets.token_hex(3)}")


FLOW = """\
from flower import AgentSpec, Step, Workflow

spec = AgentSpec(name="agent", instructions="You do the step.", allowed_tools=["Bash"])
flow = Workflow([Step("one", spec, "STEP-ONE"), Step("two", spec, "STEP-TWO")], name="recover")
"""


def _recovery(api: Any, root: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds from a fresh `flower run` to its first request, and from the restart after a SIGKILL in step 2
    to the resumed step's first request."""
    (root / "flow.py").write_text(FLOW)
    ws = root / "ws-recover"
    ws.mkdir()
    command = [sys.executable, "-m", "flower", "run", f"{root / 'flow.py'}:flow", "-w", str(ws), "-r",
               str(root / "runs-recover")]
    full_env = {**os.environ, **env}
    count = len(api.requests)

    def first_after(start: float, index: int, needle: str) -> float:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            hits = [r for r in api.requests[index:] if needle in r.text]
            if hits:
                return time.monotonic() - start
            time.sleep(0.02)
        raise RuntimeError(f"no request with {needle}")

    start = time.monotonic()
    child = subprocess.Popen(command, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    fresh = first_after(start, count, "STEP-ONE")
    first_after(start, count, "STEP-TWO")
    time.sleep(1.5)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    count = len(api.requests)
    start = time.monotonic()
    child = subprocess.Popen(command, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    recovered = first_after(start, count, "STEP-TWO")
    child.wait(timeout=120)
    return fresh, recovered


def run(tiny: bool = False) -> list[dict[str, Any]]:
    from flower.testing import ScriptedAPI, text, tool_use

    n = 3 if tiny else 20
    sleeping = {"armed": True}

    def handler(request: Any) -> Any:
        # the step's first request: one user message (the CLI's environment rides as a system message)
        first = [m for m in request.messages if m.get("role") == "user"] == request.messages[:1]
        if "STEP-TWO" in request.text and sleeping["armed"] and first and len(request.messages) <= 2:
            sleeping["armed"] = False
            return tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(60)"'})
        return text("ok")

    rows = []
    with tempfile.TemporaryDirectory(prefix="flow-bench-") as tmp, ScriptedAPI(handler=handler) as api, \
            _database() as database:
        root = Path(tmp)
        env = api.cli_env(root / "home")
        plain = anyio.run(_plain, _runtime(root, env, "plain"), n)
        per_step = plain / n
        rows.append(row(BENCH, f"plain loop: {n} x Runtime.run", per_step * 1000, "ms/step", None,
                        "the floor: a trivial scripted agent step"))
        cases = [("SQLite", None)] + ([("PostgreSQL", database)] if database else [])
        for label, store in cases:
            took = anyio.run(_durable, _runtime(root, env, f"wf-{label}"), n, store)
            rows.append(row(BENCH, f"workflow on {label}: {n} agent steps", took / n * 1000, "ms/step",
                            took / plain, f"{(took - plain) / n * 1000:+.0f} ms/step against the loop (noisy: "
                                          "CLI start-up varies more than the engine costs)"))
        for label, store in cases:
            base = _runtime(root, env, f"engine-{label}")
            took = anyio.run(_durable, _Instant(base), n, store)
            rows.append(row(BENCH, f"engine only on {label}: per step", took / n * 1000, "ms/step",
                            (took / n) / per_step, "share of a trivial agent step (goal: under 5% on SQLite)"))
        if not database:
            rows.append(row(BENCH, "PostgreSQL cases", float("nan"), "", None, "skipped: 127.0.0.1:5432 down"))
        fresh, recovered = _recovery(api, root, env)
        rows.append(row(BENCH, "fresh flower run -> first request", fresh, "s", None, "process start, DBOS launch"))
        rows.append(row(BENCH, "recovery: restart after SIGKILL -> resumed step's first request", recovered, "s",
                        recovered / fresh, "includes DBOS's queue poll (about 1 s)"))
    return rows


if __name__ == "__main__":
    for r in run(tiny="--tiny" in sys.argv):
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        print(f"{r['case']:64} {r['value']:>9.2f} {r['unit']:8} {ratio:>7}  {r['note']}")
