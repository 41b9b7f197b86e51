"""The kill sweep (issue #26): `flower run` of a three-step workflow SIGKILLed at chosen events, then run again.

A `Chain` runs one workflow to its end through a list of kill points, in the order the run reaches them: it
starts `flower run`, SIGKILLs its process group when the point's event happens, runs the same command again
(which continues the run), arms the next point, and so on; the last process finishes the run. After each
kill it records what the run had finished (the agent checkpoints in the DBOS database) and what the killed
process's CLI had written to its transcripts (every entry flower was told of: the store must hold them all).

Events are of three kinds:
- a request at the scripted fake (`Req`): its step, its phase (generation and tool results so far, or the
  handoff round) and a delay in milliseconds after its arrival (0: before it is answered);
- a point in code (`Code`): a tool command of the script (`two-g1-1`: step two's first tool call in
  generation 1) or the workflow's own code (`gate-one`, `reduce-one`, `when-two`, `prompt-three`), which
  waits there once armed, so the kill lands exactly at it.

The scripted model is a function of the conversation, so a resumed session continues where it stands:
each step calls two tools (`python3 tool.py TAG`), then answers `OUT-<step>`; step two's first reply
reports a context over `FLOWER_HANDOFF_AT`, so it hands over to a second generation after its first tool.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import project_key_for_directory

from flower.testing import ScriptedAPI, Usage, text, tool_use
from tests.support.flowproc import finish, flower, processes_in

STEPS = ("one", "two", "three")
MARKS = {"one": "S1MARK", "two": "S2MARK", "three": "S3MARK"}
HANDOFF_AT = 50_000
"""FLOWER_HANDOFF_AT of the runs; step two's first reply reports more than this."""

FLOW = """\
import os, time
from pathlib import Path
from flower import AgentSpec, Step, Workflow

CTL = Path(__file__).with_name("ctl")


def point(name):
    try:  # armed once: the rename makes sure a continued run does not stop here again
        os.rename(CTL / f"arm-{name}", CTL / "held")
    except FileNotFoundError:
        return
    time.sleep(60)  # the test kills the process group now


def gate(name):
    return lambda result, ctx: (point(f"gate-{name}"), True)[1]


spec = AgentSpec(name="agent", instructions="You do the step.", allowed_tools=["Bash"])
wf = Workflow([
    Step("one", spec, "S1MARK: start", gate=gate("one"), reduce=lambda r, ctx: (point("reduce-one"), r.text)[1]),
    Step("two", spec, "S2MARK: the long part", gate=gate("two"), when=lambda ctx: (point("when-two"), True)[1]),
    Step("three", spec, lambda ctx: (point("prompt-three"), f"S3MARK: after {ctx['two']}")[1], gate=gate("three")),
], name="sweep")
"""

TOOL = """\
import os, sys, time
from pathlib import Path

ctl = Path(__file__).with_name("ctl")
with open(ctl / "tools.log", "a") as log:
    log.write(f"{time.time()} {sys.argv[1]}\\n")
try:
    os.rename(ctl / f"arm-{sys.argv[1]}", ctl / "held")
except FileNotFoundError:
    print("ran", sys.argv[1])
else:
    time.sleep(30)  # held: the test kills flower now
"""

HANDOFF_DOC = "## Doing\nS2MARK: the long part, half done.\n## Next\n1. Run the remaining commands.\n"


@dataclass(frozen=True)
class Req:
    """Kill `ms` milliseconds after the next request of `step` in `phase` arrives at the fake (`next`: in any
    phase; after a kill the state a step resumes in depends on what its CLI wrote in its last milliseconds)."""

    step: str
    phase: str
    ms: int = 0

    @property
    def name(self) -> str:
        return f"{self.step}.{self.phase}+{self.ms}ms"


@dataclass(frozen=True)
class Code:
    """Kill while the run waits at this point of its code (a tool command's tag or the workflow's code)."""

    where: str

    @property
    def name(self) -> str:
        return self.where


Point = Req | Code


def first_text(request: Any) -> str:
    content = request.messages[0].get("content") if request.messages else ""
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def step_of(request: Any) -> str | None:
    """The step a request belongs to: the marker in its session's first message."""
    first = first_text(request)
    return next((s for s in ("three", "one", "two") if MARKS[s] in first), None)


def results_of(request: Any) -> list[str]:
    """The tags of the tool commands whose completed result the request carries (not an interrupted one)."""
    found = []
    for message in request.messages:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                words = inner if isinstance(inner, str) else " ".join(
                    str(b.get("text", "")) for b in inner or [] if isinstance(b, dict))
                found += [w.split()[1] for w in words.splitlines() if w.startswith("ran ")]
    return found


def phase_of(request: Any) -> str:
    """`handoff`, or `g<generation>n<completed tool results so far>` (a resume counts those it carries; an
    interrupted call is called again)."""
    if "Your context is nearly full" in request.last_user_text():
        return "handoff"
    generation = 2 if "(generation 2)" in first_text(request) else 1
    return f"g{generation}n{len(results_of(request))}"


@dataclass
class Kill:
    """One kill: where, and what the run had when it happened."""

    point: Point
    finished: set[str] = field(default_factory=set)
    """The steps whose agent checkpoint was recorded."""
    acknowledged: set[str] = field(default_factory=set)
    """The uuids the killed process's CLI wrote to its transcripts."""
    since: int = 0
    """Index of the first request of the process run after this kill."""


class Chain:
    """One workflow run through `points`, one process per point plus the one that finishes."""

    def __init__(self, root: Path, points: list[Point], after_kill: Callable[[Chain], None] | None = None) -> None:
        self.root, self.points, self.after_kill = root, points, after_kill
        self.ws, self.runs, self.home, self.ctl = root / "ws", root / "runs", root / "home", root / "ctl"
        self.tmp = root / "tmp"
        for folder in (self.ws, self.ctl, self.tmp):
            folder.mkdir(parents=True, exist_ok=True)
        (root / "flow.py").write_text(FLOW)
        (root / "tool.py").write_text(TOOL)
        self.api = ScriptedAPI(handler=self.answer)
        self.kills: list[Kill] = []
        self.tags: dict[int, tuple[str | None, str]] = {}
        """Per request index: its step and phase."""
        self.seen: dict[str, float] = {}
        """Per tool tag: when the model first saw its completed result."""
        self._armed: Req | None = None
        self._pgid: int | None = None
        self._lock = threading.Lock()
        self._fired = threading.Event()

    # --- the scripted model -------------------------------------------------------------------------

    def answer(self, request: Any) -> Any:
        step, phase = step_of(request), phase_of(request)
        with self._lock:
            self.tags[request.index] = (step, phase)
            for tag in results_of(request):
                self.seen.setdefault(tag, time.time())
            armed = self._armed
            if armed is not None and armed.step == step and armed.phase in (phase, "next"):
                self._armed = None
                if armed.ms:
                    threading.Timer(armed.ms / 1000, self._kill).start()
                else:
                    self._kill()
        if step is None:
            return text("ok")
        if phase == "handoff":
            return text(HANDOFF_DOC)
        generation, done = int(phase[1]), int(phase[3:])
        if done >= 2:
            return text(f"OUT-{step}")
        # step two's first generation carries a context over the handoff threshold (resumed too)
        usage = Usage(input_tokens=HANDOFF_AT + 10_000) if (step, generation) == ("two", 1) else None
        return tool_use("Bash", {"command": f"python3 {self.root / 'tool.py'} {step}-g{generation}-{done + 1}",
                                 "description": "one command"}, usage=usage)

    def _kill(self) -> None:
        if self._pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._pgid, signal.SIGKILL)
        self._fired.set()

    # --- running ------------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        return {**self.api.cli_env(self.home), "TMPDIR": str(self.tmp), "FLOWER_HANDOFF_AT": str(HANDOFF_AT)}

    def command(self) -> tuple[str, ...]:
        return ("run", f"{self.root / 'flow.py'}:wf", "-w", str(self.ws), "-r", str(self.runs))

    def run(self) -> tuple[int, str, str]:
        """Every kill, then the run to its end: the last process's exit code, stdout and stderr."""
        with self.api:
            for point in self.points:
                self._arm(point)
                since = len(self.api.requests)
                child = flower(self.env(), *self.command())
                self._pgid = child.pid
                reached = self._wait(point, child)
                child.communicate(timeout=60)
                assert reached, f"the run ended without reaching {point.name} (exit {child.returncode})"
                assert child.returncode == -signal.SIGKILL, f"{point.name}: exit {child.returncode}"
                self._settle()
                if self.kills:
                    self.kills[-1].since = since
                seen = set().union(*(k.acknowledged for k in self.kills))
                self.kills.append(Kill(point, self.finished(), self.transcripts() - seen))
                if self.after_kill is not None:
                    self.after_kill(self)
            since = len(self.api.requests)
            if self.kills:
                self.kills[-1].since = since
            self._pgid = None
            result = finish(flower(self.env(), *self.command()), timeout=180)
        return result

    def _arm(self, point: Point) -> None:
        self._fired.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.ctl / "held").unlink()
        if isinstance(point, Req):
            with self._lock:
                self._armed = point
        else:
            (self.ctl / f"arm-{point.where}").touch()

    def _wait(self, point: Point, child: Any) -> bool:
        """Until the point's kill happened (True) or the process ended without it (False)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self._fired.is_set():
                return True
            if isinstance(point, Code) and (self.ctl / "held").exists():
                self._kill()
                return True
            if child.poll() is not None:
                return self._fired.is_set()
            time.sleep(0.005)
        self._kill()
        raise AssertionError(f"{point.name} not reached in 120 s")

    def _settle(self) -> None:
        """Until the killed flower's CLI (ended by the kernel's parent-death signal) is gone too."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and processes_in(self.home):
            time.sleep(0.05)
        with contextlib.suppress(FileNotFoundError):
            for path in self.ctl.glob("arm-*"):
                path.unlink()  # a point the process never reached is not left armed for the next

    # --- what a kill left -----------------------------------------------------------------------------

    def finished(self) -> set[str]:
        """The steps whose agent checkpoint the run's DBOS database holds."""
        db = self.runs / "dbos.sqlite"
        if not db.exists():
            return set()
        with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10)) as conn:
            names = {row[0] for row in conn.execute("SELECT function_name FROM operation_outputs")}
        return {s for s in STEPS if f"agent:{s}" in names}

    def transcripts(self) -> set[str]:
        """The uuids of every entry the CLI wrote to a transcript: the configured projects folder and the
        temp folders of store-backed resumes (`claude-resume-*` under TMPDIR), which a kill leaves behind."""
        uuids: set[str] = set()
        folders = [self.home / ".claude" / "projects", *(p / "projects" for p in self.tmp.glob("claude-resume-*"))]
        for folder in folders:
            for path in folder.rglob("*.jsonl"):
                for line in path.read_text(errors="replace").splitlines():
                    with contextlib.suppress(ValueError):
                        entry = json.loads(line)
                        if isinstance(entry, dict) and isinstance(entry.get("uuid"), str) \
                                and not str(entry.get("type", "")).startswith("api-request"):
                            uuids.add(entry["uuid"])
        return uuids

    def stored(self) -> set[str]:
        """Every uuid the run's store holds or hands out (a rewrite's synthetic entries are handed out only)."""
        from flower.runtime.runtime import Runtime
        from flower.stores.sqlite import SqliteSessionStore

        key = project_key_for_directory(str(self.ws.resolve()))
        found: set[str] = set()

        async def read() -> None:
            runtime = Runtime(self.ws, run_dir=self.runs, env={})
            with SqliteSessionStore(self.runs / "sessions.db") as base:
                for summary in await base.list_sessions(key):
                    for store in (base, runtime.store):
                        main = {"project_key": key, "session_id": summary["session_id"]}
                        keys = [main] + [{**main, "subpath": s} for s in await store.list_subkeys(main)]
                        for k in keys:
                            found.update(e["uuid"] for e in await store.load(k) or [] if e.get("uuid"))

        anyio.run(read)
        return found

    def redone(self) -> list[str]:
        """Tool commands started again after the model had seen their result: work a continued run redid
        (a call the kill interrupted is called again, which is right)."""
        starts = [line.split() for line in (self.ctl / "tools.log").read_text().splitlines()]
        return sorted({tag for at, tag in starts if tag in self.seen and float(at) > self.seen[tag]})

