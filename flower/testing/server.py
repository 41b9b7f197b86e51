"""`ScriptedAPI`: a fake Anthropic Messages API on 127.0.0.1 that the real Claude Code CLI talks to.

Threads of a conversation are told apart by the `x-claude-code-agent-id` header
(docs/sdk-notes.md#threads-on-the-wire): requests without it belong to the main thread, each subagent id is
its own thread. Each thread consumes its own script, a list of steps (see `flower.testing.replies`). A
subagent's script is chosen on its first request: by the first key of `subagents` that occurs in that
request's messages (usually a marker in the brief), or, when `subagents` is a list, in order of appearance. A
`handler(request) -> Step | None` sees every request first and may answer it itself.

Invariants:
- Every request is recorded (headers, body, thread) before it is answered.
- A request the real API would reject is answered 400 with the real error shape and recorded as a
  violation; a script that runs out is answered 400 and recorded too. `assert_done()` (also run on
  context-manager exit without an exception) raises `ScriptError` for violations, exhaustion, and steps
  left over — so a test fails even when the CLI swallows the error.
- A script is checked as it is given (every step a `Reply`, `Error` or `Drop`: a bare string is a
  `ScriptError` naming the step), and each scripted `tool_use` against the request it answers: a tool the
  request does not offer, or input keys its schema does not accept, is a `ScriptError` naming the step
  (the CLI would only answer "No such tool" or an input error and the run would go on). `check_tools=False`
  turns the latter off for a test that means to call a missing tool.
- An exhausted thread is reported once, with the thread, the request and what that request asked.
- Only 127.0.0.1 is bound; the port is ephemeral unless given, and `stop()` / `start()` keep it, so a test
  can make the endpoint unreachable for a while.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower.errors import ScriptError
from flower.testing.http import Server, make_handler
from flower.testing.replies import DEFAULT_MODEL, Drop, Error, Reply, Step, ToolUse
from flower.testing.request import MAIN, Request
from flower.testing.strict import request_problems

__all__ = ["MAIN", "Request", "ScriptedAPI", "cli_env"]  # MAIN and Request re-exported from .request

_LOOKBACK = 20
"""Blocks before a breakpoint the API looks back for an earlier cache entry."""
_WRITTEN = 256
"""Prefix hashes remembered (the newest): enough for the last few dozen requests of a conversation."""
AGENT_HEADER = "x-claude-code-agent-id"
Handler = Callable[["Request"], "Step | None"]


@dataclass
class _Thread:
    steps: list[Step]
    used: int = 0


@dataclass
class _State:
    main: list[Step] = field(default_factory=list)
    subagents: dict[str, list[Step]] | list[list[Step]] = field(default_factory=dict)
    threads: dict[str, _Thread] = field(default_factory=dict)
    claimed: set[str | int] = field(default_factory=set)
    requests: list[Request] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    exhausted: dict[str, int] = field(default_factory=dict)
    """Thread -> index of its failure line, so an exhausted thread is reported once."""
    bad_steps: set[tuple[str, int]] = field(default_factory=set)
    """(thread, step index) of scripted tool calls already reported."""


class ScriptedAPI:
    """A scripted fake Messages API. Use as a context manager, or call `start()` / `stop()`."""

    def __init__(
        self,
        main: Iterable[Step] = (),
        subagents: Mapping[str, Iterable[Step]] | Sequence[Iterable[Step]] | None = None,
        *,
        handler: Handler | None = None,
        model: str = DEFAULT_MODEL,
        port: int = 0,
        cache: bool = True,
        check_tools: bool = True,
    ) -> None:
        self.model = model
        self.handler = handler
        self.cache = cache
        self.check_tools = check_tools
        self._written: OrderedDict[bytes, int] = OrderedDict()
        """Prefix hash -> its length in chars, for every breakpoint of recent requests."""
        self._usages: dict[int, dict[str, int]] = {}
        self._lock = threading.RLock()
        self._state = _State()
        self.script(main, subagents)
        self._port = port
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # --- scripting ----------------------------------------------------------------------------

    def script(
        self,
        main: Iterable[Step] = (),
        subagents: Mapping[str, Iterable[Step]] | Sequence[Iterable[Step]] | None = None,
    ) -> ScriptedAPI:
        """Append steps to the main script and add subagent scripts (keyed by a marker, or in order)."""
        with self._lock:
            self._state.main.extend(_steps(main, "the main script"))
            if isinstance(subagents, Mapping):
                if not isinstance(self._state.subagents, dict):
                    raise ScriptError("subagent scripts were given as a list before; keep one form")
                for key, steps in subagents.items():
                    self._state.subagents.setdefault(key, []).extend(_steps(steps, f"subagent script {key!r}"))
            elif subagents is not None:
                if isinstance(self._state.subagents, dict) and self._state.subagents:
                    raise ScriptError("subagent scripts were given by marker before; keep one form")
                if isinstance(self._state.subagents, dict):
                    self._state.subagents = []
                self._state.subagents.extend(_steps(s, f"subagent script {i}") for i, s in enumerate(subagents))
        return self

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> ScriptedAPI:
        if self._server is not None:
            return self
        server = Server(("127.0.0.1", self._port), make_handler(self))
        self._port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="flower-scripted-api", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut open connections (clients get refused or reset); `start()` again
        reuses the port."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server.drop_connections()
        self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedAPI:
        return self.start()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.stop()
        if exc_type is None:
            self.assert_done()

    def cli_env(self, home: str | Path, **extra: str) -> dict[str, str]:
        """The CLI environment for this server: see `flower.testing.cli_env`."""
        return cli_env(self.base_url, home, **extra)

    # --- records ------------------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._state.requests)

    @property
    def main_requests(self) -> list[Request]:
        return [r for r in self.requests if not r.is_subagent]

    def subagent_requests(self, agent_id: str | None = None) -> list[Request]:
        return [r for r in self.requests if r.is_subagent and (agent_id is None or r.thread == agent_id)]

    @property
    def subagent_ids(self) -> list[str]:
        return list(dict.fromkeys(r.thread for r in self.requests if r.is_subagent))

    def usage(self, request: Request) -> dict[str, int] | None:
        """The usage the fake answered `request` with (None for errors and drops)."""
        with self._lock:
            return self._usages.get(request.index)

    @property
    def failures(self) -> list[str]:
        """Violations and script exhaustions recorded so far."""
        with self._lock:
            return list(self._state.failures)

    def remaining(self) -> dict[str, int]:
        """Unused steps per thread (subagent scripts not yet claimed count under their key)."""
        with self._lock:
            left = {name: len(t.steps) - t.used for name, t in self._state.threads.items()}
            left[MAIN] = len(self._state.main) - self._state.threads.get(MAIN, _Thread([])).used
            subs = self._state.subagents
            keys: Iterable[str | int] = subs.keys() if isinstance(subs, dict) else range(len(subs))
            for key in keys:
                if key not in self._state.claimed:
                    steps = subs[key] if isinstance(subs, dict) else subs[int(key)]  # type: ignore[index]
                    left[f"unclaimed subagent script {key!r}"] = len(steps)
            return {k: v for k, v in left.items() if v}

    def assert_done(self) -> None:
        """Raise `ScriptError` on any violation, exhaustion, or unused step."""
        problems = self.failures
        problems += [f"{n} step(s) never used in thread {t}" for t, n in self.remaining().items()]
        if problems:
            raise ScriptError("scripted API: " + "; ".join(problems))

    # --- answering ----------------------------------------------------------------------------

    def _record(self, headers: Mapping[str, str], body: Mapping[str, Any], size: int) -> Request:
        with self._lock:
            thread = headers.get(AGENT_HEADER) or MAIN
            request = Request(len(self._state.requests), thread, dict(headers), body, size)
            self._state.requests.append(request)
            return request

    def _next_step(self, request: Request) -> Step:
        problems = request_problems(request.messages)
        if problems:
            with self._lock:
                self._state.failures.append(f"request {request.index} ({request.thread}): " + " | ".join(problems))
            return Error(400, problems[0])
        if self.handler is not None:
            answer = self.handler(request)
            if answer is not None:
                return answer
        with self._lock:
            thread = self._thread_for(request)
            if thread is None or thread.used >= len(thread.steps):
                return Error(400, f"flower.testing: {self._exhausted(request, thread)}")
            step = thread.steps[thread.used]
            thread.used += 1
            problem = self._tool_problem(request, step) if self.check_tools else None
            if problem:
                # Not consumed: the CLI's retries meet the same step, and it is reported once.
                thread.used -= 1
                message = f"step {thread.used + 1} of thread {request.thread}: {problem}"
                if (request.thread, thread.used) not in self._state.bad_steps:
                    self._state.bad_steps.add((request.thread, thread.used))
                    self._state.failures.append(message)
                return Error(400, f"flower.testing: {message} (request {request.index})")
            return step

    def _exhausted(self, request: Request, thread: _Thread | None) -> str:
        """One failure line per thread: which thread, which request, what it asked (later ones are counted)."""
        state = self._state
        asked = " ".join(request.last_user_text().split())[:160] or "(no user text)"
        had = f"its {len(thread.steps)} step(s) are used up" if thread is not None else "no script matched it"
        message = (f"script exhausted for thread {request.thread} at request {request.index}: {had}; "
                   f"the request asked: {asked!r}")
        if request.thread in state.exhausted:
            index = state.exhausted[request.thread]
            first, _, more = state.failures[index].partition(" [+")
            count = int(more.split()[0]) + 1 if more else 1
            state.failures[index] = f"{first} [+{count} more request(s) after it]"
        else:
            state.exhausted[request.thread] = len(state.failures)
            state.failures.append(message)
        return message

    @staticmethod
    def _tool_problem(request: Request, step: Step) -> str | None:
        """A scripted tool_use the request's tools cannot take: an unknown name or unknown input keys."""
        tools = request.body.get("tools")
        if not isinstance(step, Reply) or not isinstance(tools, list) or not tools:
            return None
        schemas = {str(t.get("name")): t.get("input_schema") for t in tools if isinstance(t, Mapping)}
        for block in step.blocks:
            if not isinstance(block, ToolUse):
                continue
            if block.name not in schemas:
                # A deferred tool (listed by name in the request, schema loaded on demand) is callable too.
                if re.search(rf"^{re.escape(block.name)}$", request.text, re.MULTILINE):
                    continue
                return (f"tool_use {block.name!r} names a tool this session does not have "
                        f"(it has {', '.join(sorted(schemas))}, and the deferred tools the request lists)")
            schema = schemas[block.name]
            if isinstance(schema, Mapping) and schema.get("additionalProperties") is False:
                known = set(schema.get("properties") or {})
                unknown = sorted(set(block.input) - known)
                if unknown:
                    return (f"tool_use {block.name!r} has input keys {unknown} that the tool does not accept "
                            f"(it accepts {', '.join(sorted(known))})")
        return None

    def _cached_chars(self, request: Request) -> int:
        """Prompt-cache simulation, as the API caches: by prefix hashes at block boundaries (each tool, each
        system block, each content block of each message, in that order). A request writes the cache at its
        `cache_control` breakpoints; it reads the longest prefix written earlier that ends at one of its own
        breakpoints or up to 20 blocks before one (the API's lookback). The breakpoints are not content: the
        CLI moves its last one to the newest message each turn and still reads the previous turn's prefix.
        Below 4,096 chars (the API's minimum cacheable prompt, about 1,024 tokens) nothing is read. Hashing
        keeps the cost linear in the request, so a long run's turns do not slow down in the fake."""
        if not self.cache:
            return 0
        hashes, ends, marks = _prefix_hashes(request.body)
        with self._lock:
            read = 0
            for mark in marks:
                for k in range(mark, max(-1, mark - _LOOKBACK - 1), -1):
                    if self._written.get(hashes[k]) == ends[k]:
                        read = max(read, ends[k])
                        break
            for mark in marks:
                self._written[hashes[mark]] = ends[mark]
                self._written.move_to_end(hashes[mark])
            while len(self._written) > _WRITTEN:
                self._written.popitem(last=False)
        return read if read >= 4096 else 0

    def _thread_for(self, request: Request) -> _Thread | None:
        state = self._state
        if request.thread in state.threads:
            return state.threads[request.thread]
        if request.thread == MAIN:
            state.threads[MAIN] = _Thread(state.main)
            return state.threads[MAIN]
        subs = state.subagents
        if isinstance(subs, dict):
            haystack = request.text
            key: str | int | None = next((k for k in subs if k not in state.claimed and k in haystack), None)
        else:
            key = next((i for i in range(len(subs)) if i not in state.claimed), None)
        if key is None:
            return None
        state.claimed.add(key)
        steps = subs[key] if isinstance(subs, dict) else subs[int(key)]  # type: ignore[index]
        state.threads[request.thread] = _Thread(steps)
        return state.threads[request.thread]


def _steps(steps: Iterable[Step], where: str) -> list[Step]:
    """A script as a list, each step checked: a bare string is not "a step that says this"."""
    if isinstance(steps, (str, bytes)):
        raise ScriptError(f"{where} is a string, not a list of steps: write [text({steps[:40]!r})]")
    checked = list(steps)
    for index, step in enumerate(checked, 1):
        if not isinstance(step, (Reply, Error, Drop)):
            shown = f"{step[:40]!r}: write text({step[:40]!r})" if isinstance(step, str) else repr(step)[:60]
            raise ScriptError(f"step {index} of {where} is a {type(step).__name__}, not a step "
                              f"(text(), tool_use(), api_error(), Drop()): {shown}")
    return checked


def _prefix_hashes(body: Mapping[str, Any]) -> tuple[list[bytes], list[int], list[int]]:
    """Per cacheable block, in the API's order: the hash of the prefix ending with it, the prefix's length in
    chars, and the indexes of the blocks that carry a `cache_control` breakpoint (the mark itself is left
    out of the content)."""
    units: list[tuple[str, Any]] = [("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    units += [("system", block) for block in (system if isinstance(system, list) else [system] if system else [])]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else message
        role = message.get("role") if isinstance(message, Mapping) else "?"
        units += [(str(role), block) for block in (content if isinstance(content, list) else [content])]
    hashes: list[bytes] = []
    ends: list[int] = []
    marks: list[int] = []
    digest, length = b"", 0
    for index, (role, block) in enumerate(units):
        if isinstance(block, Mapping) and "cache_control" in block:
            marks.append(index)
            block = {k: v for k, v in block.items() if k != "cache_control"}
        data = f"{role}:{json.dumps(block, ensure_ascii=False)}".encode("utf-8", "surrogatepass")
        digest = hashlib.blake2b(digest + data, digest_size=16).digest()
        length += len(data)
        hashes.append(digest)
        ends.append(length)
    return hashes, ends, marks


def cli_env(base_url: str, home: str | Path, **extra: str) -> dict[str, str]:
    """Environment for a CLI that must talk only to `base_url`.

    A throwaway HOME and `CLAUDE_CONFIG_DIR=<home>/.claude` (without the latter the SDK drops every
    session-store mirror frame, docs/sdk-notes.md#session-stores); non-essential traffic, telemetry and the
    auto-updater off; and a dead proxy for everything but 127.0.0.1, so any attempt to reach another address
    fails on the spot.
    """
    home = Path(home)
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-flower-testing",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    env.update(extra)
    return env
