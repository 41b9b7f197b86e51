"""`Runtime`: runs specs step by step, wiring every layer, across generations, failures and interrupts (L-2..L-5).

One step is one `run(spec, prompt)`. It may span several sessions (generations, S-22) and several
attempts (transient failures, L-4); the `StepResult` adds them up. Model and API failures never raise out
of `run()`: they land in the result.

Invariants:
- The walls come from the spec (`build_options`), whatever the workbench setting (B-1).
- The system prompt is byte-identical across the steps and generations of a run: it holds only stable
  text; the workbench listing rides in each new session's first user message (B-3).
- Only the main thread's context counts toward a handoff, each API message once (S-24). When it crosses
  the threshold, a PostToolUse hook stops the turn at the next tool boundary, the same session writes the
  handoff (that round is exempt from the threshold), and a fresh session continues from it.
- Generations force `CompactPolicy("no_summary")` unless the spec sets `compact` (S-23).
- The session id is captured from the first message that carries it; the manifest is written atomically
  under a file lock, so parallel processes never lose each other's rows.
- Retries count failures only: handoffs and interrupts use none, and a new generation starts the count
  again; generations have their own cap (`HandoffPolicy.max_generations`). A handoff the session could not
  write is degraded, lands in `errors`, and two degraded in a row stop the step.
- The window follows the model in use (the session's init message and replies), and a real overflow caps
  it for the rest of the run (`HandoffPolicy.resolve_window`).
- Cost: the CLI's `total_cost_usd` is cumulative within one CLI process, starting from the session's
  last `cost-state` line when it resumes one, so an attempt costs its last total minus the `cost-state`
  the resumed transcript holds (what the store gives the CLI; usually none, as the store misses a
  ClaudeSDKClient session's last lines).
- A 401/403 the CLI starts retrying stops the attempt at once; every error that ends a step on the API's
  side names the endpoint (ANTHROPIC_BASE_URL or the default host).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    HookMatcher,
    project_key_for_directory,
    ResultMessage,
    SessionStore,
    SystemMessage,
    TaskNotificationMessage,
    TaskStartedMessage,
    TaskUpdatedMessage,
    TERMINAL_TASK_STATUSES,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from flower import texts
from flower.agent.options import build_options
from flower.agent.spec import AgentSpec
from flower.agent.compact import CompactPolicy
from flower.agent.events import Event, OnEvent, emit, to_events
from flower.runtime.config import RuntimeConfig, RuntimeOptions
from flower.workbench.bench import Placement, Workbench
from flower.runtime.refresh import CHARS_PER_TOKEN, RefreshPolicy
from flower.walls.guard import approve_subagents
from flower.runtime.handoff import (
    ContextMeter,
    HandoffPolicy,
    degraded_handoff,
    is_context_overflow,
    overflow_window,
    parse_handoff,
    save_handoff,
)
from flower.runtime.resilience import (
    RetryPolicy,
    classify,
    endpoint_of,
    endpoint_reachable,
    is_final,
    probe_target,
    redispatch_hook,
    wait_for_endpoint,
    worker_cut_off,
)
from flower.util.rundir import make_run_dir
from flower.runtime.steps import StepResult, append_manifest
from flower.errors import ConfigError, StoredDataError, UnsafePathError
from functools import partial
from flower.agent.options import check_isolation, isolated_types
from flower.walls.dispatch import Rewrite, dispatch_guard, isolation_input
from flower.runtime.stream import EventStream
from flower.runtime.tracing import traced

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Runtime", "StepResult", "append_manifest"]

_FIELDS = frozenset(f.name for f in fields(RuntimeConfig))


@dataclass
class _Attempt:
    """One client session: what came back and why it ended."""

    session_id: str | None = None
    result: ResultMessage | None = None
    text: str = ""
    error: str | None = None
    status: int | None = None
    cost: float = 0.0
    base_cost: float = 0.0
    """The total the CLI starts this attempt's process from (the resumed transcript's last cost-state)."""
    turns: int = 0
    crossed: bool = False
    stopped: bool = False
    """Our PostToolUse hook ended the turn at a tool boundary because the threshold was crossed."""
    refresh: int | None = None
    """Our PostToolUse hook ended the turn for a refresh, which drops about this many stale tokens."""
    dropped: int = 0
    """Characters the resume that started this attempt already dropped (the store's rewrite report)."""
    background: set[str] = field(default_factory=set)
    """Tasks of the CLI still running (by task id; background Agent calls also by call id until their task
    is known): a refresh waits for them, since it ends the CLI process and them with it."""
    task_calls: dict[str, str] = field(default_factory=dict)
    """Task id -> the tool call that started it."""
    handoff: str | None = None
    degraded: str | None = None
    """Why the handoff is the runtime's fallback, not the session's own document."""
    interrupted: bool = False
    fatal: bool = False
    """Retrying cannot help: the CLI was retrying an error that cannot pass (401/403), or the failure is
    deterministic (stored data that cannot be read, a refused path)."""
    cut: bool = False
    """The runtime stopped the CLI's own retries: a 401/403 cannot pass, and a down endpoint is the
    runtime's to wait for (with reports), not the CLI's to retry blindly for minutes."""
    tasks: set[Any] = field(default_factory=set)
    worker_errors: list[str] = field(default_factory=list)
    """Workers cut off by a transient API failure (their dispatcher was told to dispatch them again)."""
    cut_off: set[str] = field(default_factory=set)
    """Agent call ids already recorded in `worker_errors` (a result and a task notification both say it)."""


@dataclass
class _Tally:
    cost: float = 0.0
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    handoffs: list[str] = field(default_factory=list)
    refreshes: int = 0
    next_refresh: int = 0
    """Main-thread context at which the next refresh check may say yes (RefreshPolicy.next_check)."""
    retries: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    degraded: int = 0
    failures: int = 0
    """Failed attempts since the last success of a generation: what `RetryPolicy.max_attempts` bounds."""
    tool_errors: int = 0
    tool_error_samples: list[str] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)

    def add(self, attempt: _Attempt) -> None:
        self.attempts += 1
        self.cost += attempt.cost
        self.turns += attempt.turns
        if attempt.error:
            self.errors.append(attempt.error)
        self.errors.extend(attempt.worker_errors)

    def observe(self, event: Event) -> None:
        """Count failed tool calls (main thread and subagents), keeping the last few for the result."""
        if event.kind == "tool_call":
            self.calls[str(event.payload.get("id"))] = event.tool or "?"
        elif event.kind == "tool_result" and event.payload.get("is_error"):
            self.tool_errors += 1
            tool = self.calls.get(str(event.payload.get("id")), "tool")
            first = next((line.strip() for line in event.text.splitlines() if line.strip()), "")
            self.tool_error_samples = [*self.tool_error_samples[-(_SAMPLES - 1):], f"{tool}: {first[:200]}"]


_SAMPLES = 5


def _track_tasks(attempt: _Attempt, msg: Any) -> None:
    """Keep `attempt.background` to the CLI's running tasks: started by a task_started message (or a
    background Agent call, until its task is known), ended by a terminal notification or update (the SDK:
    a stopped task may end with the update alone)."""
    if isinstance(msg, TaskStartedMessage):
        attempt.background.add(msg.task_id)
        if msg.tool_use_id:
            attempt.task_calls[msg.task_id] = msg.tool_use_id
    elif isinstance(msg, TaskNotificationMessage) or (
            isinstance(msg, TaskUpdatedMessage) and (msg.patch or {}).get("status") in TERMINAL_TASK_STATUSES):
        attempt.background.discard(msg.task_id)
        attempt.background.discard(attempt.task_calls.pop(msg.task_id, "") or getattr(msg, "tool_use_id", "") or "")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")  # orders steps finer than a second


def _deterministic(exc: BaseException) -> bool:
    """Whether `exc` or an exception it was raised from is one that repeats on every attempt."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, (StoredDataError, UnsafePathError, ConfigError)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _policy(value: bool | Any, default: Any) -> Any:
    if value is True:
        return default
    return value or None


class Runtime:
    """Runs specs in a workspace with every layer of context economics wired in."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        config: RuntimeConfig | None = None,
        store: SessionStore | None = None,
        run_id: str | None = None,
        **overrides: Unpack[RuntimeOptions],
    ) -> None:
        """`config` (default: `RuntimeConfig()`) with any `RuntimeConfig` field given as a keyword on top;
        `self.config` is the effective config."""
        unknown = sorted(set(overrides) - _FIELDS)
        if unknown:
            raise TypeError(f"Runtime() got an unexpected keyword argument {unknown[0]!r}")
        changes: dict[str, Any] = {**overrides, **({"env": {}} if overrides.get("env", ()) is None else {})}
        self.config = replace(config or RuntimeConfig(), **changes)
        cfg = self.config
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise ConfigError(f"workspace {self.workspace} is not a directory")
        self.run_dir = make_run_dir(Path(cfg.run_dir).resolve())  # a new run dir gets a .gitignore of `*`
        self.workbench = Workbench(self.workspace) if cfg.workbench is True else (cfg.workbench or None)
        if self.workbench is not None:
            self.workbench.ensure()
        self.spill_threshold = cfg.spill_threshold
        self.handoff: HandoffPolicy | None = cfg.handoff_policy()
        self.refresh: RefreshPolicy | None = _policy(cfg.refresh, RefreshPolicy())
        self.retry: RetryPolicy | None = _policy(cfg.resilience, RetryPolicy())
        self.portable = cfg.portable
        self.placement: Placement = cfg.placement
        self.env = dict(cfg.env)
        self.run_id = run_id or (datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
                                 + f"-{os.getpid()}-{secrets.token_hex(3)}")
        self.store = self._make_store(store, cfg.project, trim=cfg.trim, ephemeral=cfg.ephemeral,
                                      keep_denials=cfg.keep_denials)
        self._policies = {**rewrite_policies(self.store), "spill_threshold": cfg.spill_threshold,
                          "project": cfg.project}
        self._client: ClaudeSDKClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupt: str | None = None
        self._model: str | None = None
        """The model the last session reported (init message, then its replies)."""
        self._calibrated: int | None = None
        """The smallest window a real overflow showed in this run."""

    def _make_store(self, store: SessionStore | None, project: str | None, **policies: Any) -> SessionStore:
        """The rewriting layer over the injected store (SQLite in run_dir by default); with `project`, every
        session lives under that one project key, so machines with other checkout paths can resume it."""
        from flower.stores.rewrite import RewritingSessionStore
        from flower.stores.scoped import ProjectScopedStore
        from flower.stores.sqlite import SqliteSessionStore

        base: Any = store if store is not None else SqliteSessionStore(self.run_dir / "sessions.db")
        if isinstance(base, RewritingSessionStore):
            return base
        if project is not None:
            base = ProjectScopedStore(base, project)
        # The class mirrors the base's optional methods at construction (see its __new__).
        return RewritingSessionStore(base, workspace=self.workspace, **policies)  # type: ignore[abstract]

    # --- public ---------------------------------------------------------------------------------

    async def run(
        self,
        spec: AgentSpec,
        prompt: str,
        *,
        step_name: str | None = None,
        resume: str | None = None,
        fork: bool = False,
        on_event: OnEvent | None = None,
    ) -> StepResult:
        """Run one step; model and API failures land in the result, never raise."""
        spec = self.config.apply(spec)  # the config's model and budget, when set
        step = step_name or spec.name
        started, clock = _now(), time.monotonic()
        self._interrupt = None  # an interrupt that arrived after the last step ended is void
        check_isolation(spec, self.workspace)
        if self.workbench is not None:
            self.workbench.refresh()
        on_event = traced(on_event)  # B-14: spans from the events, when a tracer provider is configured
        emit(on_event, Event("step", step, payload={"phase": "start", "resume": resume, "agent_name": spec.name,
                                                    "model": spec.model, "run_id": self.run_id}))
        meter = ContextMeter()
        tally = _Tally()
        session, last = await self._drive(spec, prompt, step, resume, fork, meter, tally, on_event)
        result = StepResult(
            step=step, session_id=session, ok=last.error is None and last.result is not None,
            cost_usd=round(tally.cost, 6), num_turns=tally.turns, text=last.text, error=last.error,
            errors=tuple(tally.errors), attempts=tally.attempts, resumed=resume is not None,
            retired=tuple(tally.retired), handoffs=tuple(tally.handoffs), refreshes=tally.refreshes,
            context=meter.current,
            contexts=tuple(meter.per_message), retries=tuple(tally.retries), started=started, ended=_now(),
            duration=round(time.monotonic() - clock, 3), tool_errors=tally.tool_errors,
            tool_error_samples=tuple(tally.tool_error_samples),
        )
        self._record(result, spec)
        emit(on_event, Event("step", step, payload={"phase": "end", "ok": result.ok, "cost_usd": result.cost_usd,
                                                    "error": result.error, "turns": result.num_turns,
                                                    "session_id": result.session_id, "context": result.context}))
        return result

    def stream(self, spec: AgentSpec, prompt: str, **kwargs: Any) -> EventStream[StepResult]:
        """`async for event in rt.stream(spec, prompt)`: the step's events as they happen; the
        `StepResult` is in `.result` afterwards. Takes `run()`'s keywords (an `on_event` still gets them)."""
        on_event = kwargs.pop("on_event", None)
        return EventStream(lambda forward: self.run(spec, prompt, on_event=forward, **kwargs), on_event)

    def run_sync(self, spec: AgentSpec, prompt: str, **kwargs: Any) -> StepResult:
        """`run()` for code without an event loop."""
        async def main() -> StepResult:
            return await self.run(spec, prompt, **kwargs)

        return anyio.run(main)

    def interrupt(self, message: str = "") -> None:
        """Stop the current turn cooperatively; the session resumes with `message`. Thread-safe."""
        self._interrupt = message
        client, loop = self._client, self._loop
        if client is None or loop is None:
            return
        if _running_loop() is loop:  # called from the run's own event loop (an on_event callback)
            loop.create_task(client.interrupt())
        else:
            asyncio.run_coroutine_threadsafe(client.interrupt(), loop)

    def threshold(self, spec: AgentSpec) -> int | None:
        """The main-thread context in tokens at which a handoff starts, or None without generations: from
        the window of the model in use (once a session reported it), else the spec's, else ANTHROPIC_MODEL."""
        return self.handoff.threshold(spec.model, **self._window_facts()) if self.handoff else None

    def window(self, spec: AgentSpec) -> int | None:
        """The context window in tokens the threshold is computed from, or None without generations."""
        return self.handoff.resolve_window(spec.model, **self._window_facts()) if self.handoff else None

    def _window_facts(self) -> dict[str, Any]:
        return {"reported": self._model, "env_model": self._cli_env().get("ANTHROPIC_MODEL"),
                "calibrated": self._calibrated}

    # --- the step loop ----------------------------------------------------------------------------

    async def _drive(
        self, spec: AgentSpec, prompt: str, step: str, resume: str | None, fork: bool,
        meter: ContextMeter, tally: _Tally, on_event: OnEvent | None,
    ) -> tuple[str | None, _Attempt]:
        session = resume
        message = self._first_message(prompt)
        generation = 1
        generation_start = 0
        while True:
            attempt = await self._attempt(spec, message, session, fork and tally.attempts == 0, meter, tally,
                                          on_event)
            tally.add(attempt)
            session = attempt.session_id or session
            refreshed = attempt.refresh is not None and attempt.error is None
            if refreshed:
                tally.refreshes += 1
                emit(on_event, Event("system", f"refresh: session resumed to drop about {attempt.refresh:,} "
                                               f"stale tokens of {meter.current:,}",
                                     payload={"subtype": "refresh", "session_id": session,
                                              "stale": attempt.refresh, "context": meter.current}))
            # Runtime.interrupt that landed on the turn a refresh stopped: the resume carries the user's
            # message (L-5) instead of the refresh's, or it would be lost
            if attempt.interrupted or (refreshed and self._interrupt is not None):
                note = self._interrupt or ""
                self._interrupt = None
                message = texts.RESUME_AFTER_INTERRUPT.format(message=f"\n\n{note}" if note else "")
                continue
            if refreshed:
                message = texts.REFRESH_CONTINUE
                continue
            overflow = attempt.error is not None and is_context_overflow(attempt.error)
            if overflow:
                self._calibrate(attempt.error, meter, on_event)
            if attempt.handoff is not None or (overflow and self.handoff):
                assert self.handoff is not None
                if overflow:
                    reason = attempt.error or "context overflow"
                    degraded: str | None = reason
                    doc = degraded_handoff(prompt, attempt.text, reason)
                else:
                    degraded = attempt.degraded
                    doc = attempt.handoff or ""
                    if degraded:
                        tally.errors.append(f"handoff degraded: {degraded}")
                if degraded:
                    tally.degraded += 1
                    if tally.degraded >= 2:
                        attempt.error = self._overflow_diagnostic(spec, "two degraded handoffs in a row")
                        return session, attempt
                else:
                    tally.degraded = 0
                if generation > 1 and not overflow and len(meter.per_message) - generation_start <= 1:
                    attempt.error = self._overflow_diagnostic(
                        spec, f"a fresh session starts at {meter.current:,} tokens, over the threshold "
                              "(raise the window or lower the headroom)")
                    return session, attempt
                generation += 1
                if generation > self.handoff.max_generations:
                    path = self._save(step, doc)
                    tally.handoffs.append(str(path))
                    attempt.error = self._overflow_diagnostic(
                        spec, f"more than {self.handoff.max_generations} generations") + (
                        f"; the last handoff is saved at {path}: continue from it with a new step whose prompt "
                        f"is that document (flower run SPEC < {path}), or raise HandoffPolicy(max_generations=)")
                    return session, attempt
                message, path = self._next_generation(step, doc, generation)
                tally.handoffs.append(str(path))
                if session:
                    tally.retired.append(session)
                emit(on_event, Event("handoff", doc, payload={"generation": generation, "path": str(path),
                                                              "retired": session, "degraded": bool(degraded),
                                                              "reason": degraded}))
                session = None
                attempt.error = None
                tally.failures = 0
                generation_start = len(meter.per_message)
                tally.next_refresh = 0  # the waiting was for the retired session's context, not this one's
                continue
            if attempt.error is None or not await self._retry(attempt, tally, on_event):
                return session, attempt
            message = texts.RESUME_AFTER_ERROR

    async def _retry(self, attempt: _Attempt, tally: _Tally, on_event: OnEvent | None) -> bool:
        kind = "fatal" if attempt.fatal else classify(attempt.error, attempt.status)
        if is_context_overflow(attempt.error):  # generations are off: the same session cannot fit again
            kind = "fatal"
        tally.failures += 1
        endpoint = endpoint_of(self._cli_env())
        if self.retry is None or kind == "fatal" or tally.failures >= self.retry.max_attempts:
            api_side = attempt.status is not None or "API Error" in (attempt.error or "") or kind != "fatal"
            if api_side and not is_final(attempt.error) and endpoint not in (attempt.error or ""):
                attempt.error = f"{attempt.error} (endpoint {endpoint})"
            return False
        delay = self.retry.delay(tally.failures)
        number, most = tally.failures + 1, self.retry.max_attempts
        tally.retries.append({"attempt": number, "of": most, "kind": kind, "error": attempt.error,
                              "delay": round(delay, 3), "endpoint": endpoint})
        emit(on_event, Event("retry", attempt.error or "", payload={
            "kind": kind, "delay": delay, "attempt": number, "max_attempts": most, "endpoint": endpoint}))
        await anyio.sleep(delay)
        timeout = self.retry.probe_timeout
        target = probe_target(self._cli_env())

        def report(state: str, seconds: float) -> None:
            via = f" (through the proxy {target})" if target != endpoint else ""
            words = {"down": f"endpoint {endpoint} is unreachable{via}: probing it for up to {timeout:.0f}s",
                     "back": f"endpoint {endpoint} is back after {seconds:.0f}s",
                     "gone": f"endpoint {endpoint} still unreachable after {seconds:.0f}s: giving up"}
            emit(on_event, Event("system", words[state], payload={
                "subtype": f"endpoint_{state}", "endpoint": endpoint, "seconds": round(seconds, 1)}))

        if await wait_for_endpoint(target, timeout=timeout, interval=self.retry.probe_interval, report=report):
            return True
        attempt.error = f"endpoint {endpoint} did not accept connections for {timeout:.0f}s; last error: {attempt.error}"
        return False

    def _calibrate(self, error: str | None, meter: ContextMeter, on_event: OnEvent | None) -> None:
        """A real overflow: the window is at most what the error names, else at most the last context seen."""
        seen = overflow_window(error) or meter.current
        if seen and (self._calibrated is None or seen < self._calibrated):
            self._calibrated = seen
            emit(on_event, Event("system", f"context overflow: the window is taken as at most {seen:,} tokens",
                                 payload={"subtype": "window", "window": seen, "calibrated": True}))

    def _overflow_diagnostic(self, spec: AgentSpec, why: str) -> str:
        return (f"stopped: {why}; window {self.window(spec) or 0:,} tokens, handoff threshold "
                f"{self.threshold(spec) or 0:,} tokens")

    def _first_message(self, prompt: str) -> str:
        if self.workbench is None:
            return prompt
        return self.workbench.first_message(prompt, self.placement)

    def _save(self, step: str, doc: str) -> Path:
        notes = self.workbench.folder("notes") if self.workbench is not None else self.run_dir / "notes"
        return save_handoff(notes, step, doc)

    def _next_generation(self, step: str, doc: str, generation: int) -> tuple[str, Path]:
        path = self._save(step, doc)
        if self.workbench is not None:
            self.workbench.refresh()
        body = texts.HANDOFF_CONTINUE.format(generation=generation, path=path, handoff=doc.strip())
        return self._first_message(body), path

    # --- one client session -------------------------------------------------------------------

    async def _attempt(
        self, spec: AgentSpec, message: str, resume: str | None, fork: bool, meter: ContextMeter,
        tally: _Tally, on_event: OnEvent | None,
    ) -> _Attempt:
        # a fork runs as a new session: its id comes with its first message (the parent's stays in `_drive`)
        attempt = _Attempt(session_id=None if fork else resume, base_cost=await self._restored_cost(resume))
        if resume is not None:  # _restored_cost loaded it through the rewriting store: what that dropped
            report = self.store.last_report(self._key(resume))  # type: ignore[attr-defined]
            attempt.dropped = report.chars_saved if report is not None else 0
        seen_calls: set[str] = set()
        threshold = self.threshold(spec)
        watching = threshold is not None or self.refresh is not None
        stop_hook = self._stop_hook(attempt, seen_calls, meter, tally) if watching else None
        options = self._options(spec, resume, fork, stop_hook)
        client: ClaudeSDKClient | None = None
        try:
            client = ClaudeSDKClient(options)
            await client.connect()
            self._client, self._loop = client, asyncio.get_running_loop()
            await client.query(message)
            await self._receive(client, spec, attempt, meter, tally, seen_calls, threshold is not None, on_event)
            # A turn that ended by itself finished its work: no handoff now. A later step resuming this
            # session crosses again at its first tool boundary and hands over then.
            if attempt.stopped and attempt.refresh is None and not attempt.interrupted and attempt.error is None:
                await self._ask_handoff(client, attempt, tally, on_event)
        except Exception as exc:  # the CLI process or transport failed: classify and maybe retry
            attempt.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            # The SDK wraps a failing SessionStore.load() in a RuntimeError (resume materialization); a
            # deterministic cause under it (unreadable stored row, refused path) is fatal at once.
            attempt.fatal = attempt.fatal or _deterministic(exc)
        finally:
            self._client = None
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.disconnect()
        return attempt

    async def _receive(
        self, client: ClaudeSDKClient, spec: AgentSpec, attempt: _Attempt, meter: ContextMeter, tally: _Tally,
        seen_calls: set[str], generations: bool, on_event: OnEvent | None,
    ) -> None:
        endpoint = endpoint_of(self._cli_env())
        async for msg in client.receive_response():
            if attempt.session_id is None:
                attempt.session_id = getattr(msg, "session_id", None) or _init_session(msg)
                if attempt.session_id is not None:  # the instant it is known, so a workflow can record it (L-7)
                    emit(on_event, Event("system", "session", payload={"subtype": "session",
                                                                        "session_id": attempt.session_id}))
            _track_tasks(attempt, msg)
            for event in to_events(msg):
                if event.kind == "retry":  # the CLI's own retries: say where they go
                    event = replace(event, payload={**event.payload, "endpoint": endpoint})
                tally.observe(event)
                emit(on_event, event)
            if isinstance(msg, SystemMessage):
                if msg.subtype == "init" and isinstance(msg.data.get("model"), str):
                    self._use_model(spec, msg.data["model"], on_event)
                elif msg.subtype == "api_retry":
                    await self._stop_cli_retries(client, attempt, msg.data, endpoint)
            elif isinstance(msg, AssistantMessage) and msg.parent_tool_use_id is None and msg.model != "<synthetic>":
                self._use_model(spec, msg.model, on_event)
                if meter.observe(msg.message_id, msg.usage) and generations:
                    self._watch(spec, meter, attempt, on_event)
                seen_calls.update(b.id for b in msg.content if isinstance(b, ToolUseBlock))
                attempt.background.update(b.id for b in msg.content if isinstance(b, ToolUseBlock)
                                          and b.name in ("Agent", "Task") and b.input.get("run_in_background"))
            elif isinstance(msg, ResultMessage):
                self._settle(attempt, msg)
            if isinstance(msg, UserMessage) and isinstance(msg.content, list):
                for block in msg.content:
                    if isinstance(block, ToolResultBlock) and block.is_error:
                        attempt.background.discard(block.tool_use_id)  # a background call that never launched
                        if worker_cut_off(block.content):
                            self._worker_cut_off(attempt, on_event, block.tool_use_id, block.content,
                                                 msg.parent_tool_use_id)
            elif isinstance(msg, TaskNotificationMessage):
                if msg.status == "failed" and worker_cut_off(msg.summary):
                    self._worker_cut_off(attempt, on_event, msg.tool_use_id or msg.task_id, msg.summary, None)

    @staticmethod
    def _worker_cut_off(attempt: _Attempt, on_event: OnEvent | None, call: str, content: Any,
                        parent: str | None) -> None:
        """A worker cut off by an API failure past the CLI's retries ends its Agent call with an error
        (foreground: the tool result; background: a task notification) and the run would go on as if nothing
        happened: record it once per call and say so (issue #16 item 16)."""
        if call in attempt.cut_off:
            return
        attempt.cut_off.add(call)
        text = content if isinstance(content, str) else " ".join(
            b.get("text", "") for b in content or [] if isinstance(b, dict))
        line = f"worker cut off ({call}): {' '.join(text.split())}"
        attempt.worker_errors.append(line)
        emit(on_event, Event("error", line, payload={"subtype": "worker_cut_off", "tool_use_id": call,
                                                     "parent_tool_use_id": parent}))

    def _use_model(self, spec: AgentSpec, model: str, on_event: OnEvent | None) -> None:
        """The session reported the model it runs: the window follows it; say so when it is not the spec's."""
        if not model or model == self._model:
            return
        before = self.threshold(spec)
        self._model = model
        after = self.threshold(spec)
        if spec.model and spec.model.lower() not in model.lower():
            emit(on_event, Event("system", f"the model in use is {model}, not the spec's {spec.model}",
                                 payload={"subtype": "model_mismatch", "model": model, "spec_model": spec.model}))
        if after != before and after is not None:
            emit(on_event, Event("system", f"model {model}: window {self.window(spec) or 0:,} tokens, handoff "
                                           f"threshold {after:,}",
                                 payload={"subtype": "window", "model": model, "window": self.window(spec),
                                          "threshold": after}))

    async def _stop_cli_retries(self, client: ClaudeSDKClient, attempt: _Attempt, data: Mapping[str, Any],
                                endpoint: str) -> None:
        """The CLI retries a 401/403 for minutes though it cannot pass, and a refused connection for minutes
        in silence: stop the attempt at its first retry. A 401/403 ends the step; a down endpoint goes to the
        runtime's probe, which says when it is gone and when it is back."""
        status = data.get("error_status")
        if attempt.cut:
            return
        if status in (401, 403) or data.get("error") == "authentication_failed":
            attempt.status = status if isinstance(status, int) else 401
            attempt.error = (f"API Error: {attempt.status} {data.get('error') or 'authentication failed'}: "
                             f"{endpoint} refused the credentials (check ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL)")
            attempt.fatal = True
        elif status is None and self.retry is not None \
                and not await anyio.to_thread.run_sync(endpoint_reachable, probe_target(self._cli_env()), 2.0):
            attempt.error = f"API Error: connection to {endpoint} failed: it does not accept connections"
        else:
            return
        attempt.cut = True
        task = asyncio.get_running_loop().create_task(client.interrupt())
        attempt.tasks.add(task)
        task.add_done_callback(attempt.tasks.discard)

    def _watch(self, spec: AgentSpec, meter: ContextMeter, attempt: _Attempt, on_event: OnEvent | None) -> None:
        """Mark the crossing, and warn once when the context first comes near it."""
        assert self.handoff is not None
        threshold = self.threshold(spec) or 0
        warning = self.handoff.warning(spec.model, **self._window_facts())
        if meter.current >= threshold:
            attempt.crossed = True
        elif meter.current >= warning and not meter.warned:
            meter.warned = True
            emit(on_event, Event("system", f"main-thread context {meter.current:,} tokens: within "
                                           f"{threshold - warning:,} of the handoff threshold {threshold:,}",
                                 payload={"subtype": "context_warning", "context": meter.current,
                                          "threshold": threshold}))

    def _account(self, attempt: _Attempt, msg: ResultMessage) -> None:
        """Cost and turns of one query. `total_cost_usd` is the CLI process's running total from the restored
        base (docs/sdk-notes.md), so the attempt's cost is its last total minus the base."""
        attempt.turns += msg.num_turns
        total = msg.total_cost_usd
        if total is None:
            return
        attempt.cost = total - attempt.base_cost if total >= attempt.base_cost else total

    async def _restored_cost(self, session: str | None) -> float:
        """The last `cost-state` total of the transcript a resume hands the CLI (0 for a new session)."""
        if session is None:
            return 0.0
        try:
            entries = await self.store.load(self._key(session)) or []  # type: ignore[arg-type]
        except Exception:  # the resume itself will report a broken store
            return 0.0
        totals = [e.get("totalCostUSD") for e in entries if isinstance(e, Mapping) and e.get("type") == "cost-state"]
        known = [t for t in totals if isinstance(t, (int, float))]
        return float(known[-1]) if known else 0.0

    def _settle(self, attempt: _Attempt, msg: ResultMessage) -> None:
        attempt.result = msg
        attempt.session_id = msg.session_id or attempt.session_id
        self._account(attempt, msg)
        if attempt.cut:  # the runtime stopped this attempt and already said why
            return
        if self._interrupt is not None and msg.subtype == "error_during_execution":
            attempt.interrupted = True
        elif msg.is_error and not attempt.stopped:
            text = (msg.result or "; ".join(msg.errors or []) or msg.subtype).splitlines()[0]
            # A cap ("error_max_turns", "error_max_budget_usd") is named, so it is classified final.
            attempt.error = text if text == msg.subtype or not msg.subtype.startswith("error_max") \
                else f"{msg.subtype}: {text}"
            attempt.status = msg.api_error_status
        else:
            attempt.text = msg.result or ""

    async def _ask_handoff(
        self, client: ClaudeSDKClient, attempt: _Attempt, tally: _Tally, on_event: OnEvent | None,
    ) -> None:
        """The exempt round: the same session writes its handoff; one retry when sections are missing."""
        why = "the handoff was incomplete (no non-empty ## Doing and ## Next)"
        for request in (texts.HANDOFF_REQUEST, texts.HANDOFF_RETRY):
            await client.query(request)
            reply = ""
            async for msg in client.receive_response():
                for event in to_events(msg):
                    tally.observe(event)
                    emit(on_event, event)
                if isinstance(msg, AssistantMessage) and msg.parent_tool_use_id is None:
                    reply += "".join(b.text for b in msg.content if isinstance(b, TextBlock))
                elif isinstance(msg, ResultMessage):
                    self._account(attempt, msg)
                    if msg.is_error:
                        why = f"the handoff round failed: {(msg.result or msg.subtype).splitlines()[0]}"
            if parse_handoff(reply):
                attempt.handoff = reply.strip()
                return
        attempt.degraded = why
        attempt.handoff = degraded_handoff("(see the workbench notes)", attempt.text, why)

    def _key(self, session: str) -> dict[str, str]:
        return {"project_key": project_key_for_directory(str(self.workspace)), "session_id": session}

    async def _stale(self, attempt: _Attempt) -> int:
        """Tokens a resume of the live session would drop now that it has not dropped already."""
        if attempt.session_id is None:
            return 0
        key = self._key(attempt.session_id)
        try:
            await self.store.load(key)  # type: ignore[arg-type]
        except Exception:  # a store that cannot load now: no refresh (the resume would fail the same way)
            return 0
        report = self.store.last_report(key)  # type: ignore[attr-defined]
        saved = report.chars_saved if report is not None else 0
        return max(0, saved - attempt.dropped) // CHARS_PER_TOKEN

    async def _refresh_due(self, attempt: _Attempt, meter: ContextMeter, tally: _Tally) -> bool:
        """At a main-thread tool boundary: whether resuming the live session now drops enough (RefreshPolicy)."""
        policy, context = self.refresh, meter.current
        if policy is None or attempt.crossed or attempt.background or context < max(tally.next_refresh,
                                                                                      policy.min_tokens):
            return False
        stale = await self._stale(attempt)
        if policy.worth(context, stale):
            attempt.refresh = stale
            tally.next_refresh = 0
            return True
        tally.next_refresh = policy.next_check(context, stale)
        return False

    def _stop_hook(self, attempt: _Attempt, seen_calls: set[str], meter: ContextMeter, tally: _Tally) -> HookMatcher:
        """PostToolUse on the main thread: end the turn at this tool boundary once the threshold is crossed,
        or for a refresh that pays (`RefreshPolicy`)."""

        async def stop(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
            if input_data.get("agent_id"):
                return {}
            # The message stream and hook calls race; wait until the receive loop has seen this call's
            # assistant message (and so its usage) before deciding.
            for _ in range(300):
                if tool_use_id is None or tool_use_id in seen_calls:
                    break
                await anyio.sleep(0.01)
            if attempt.crossed:  # set only with generations on (`_watch`)
                attempt.stopped = True
                return {"continue_": False, "stopReason": "flower: handoff to a new generation"}
            if not attempt.stopped and await self._refresh_due(attempt, meter, tally):
                attempt.stopped = True
                return {"continue_": False, "stopReason": "flower: refresh (stale results dropped on resume)"}
            return {}

        return HookMatcher(matcher=None, hooks=[stop])

    def _cli_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _options(self, spec: AgentSpec, resume: str | None, fork: bool, stop_hook: HookMatcher | None) -> Any:
        from flower.walls.guard import merge_hooks
        from flower.workbench.spill import spill_guard
        from flower.workbench.bench import relay_input, workbench_hooks

        wb = self.workbench if spec.workbench else None
        env = dict(self.env)
        if self.handoff is not None and spec.compact is None:
            env.update(CompactPolicy("no_summary").env())
        rewrites: list[Rewrite] = [partial(relay_input, wb)] if wb is not None else []
        isolated = isolated_types(spec)
        if isolated:
            rewrites.append(partial(isolation_input, isolated=isolated))
        hooks = merge_hooks(
            workbench_hooks(wb, relay=False) if wb is not None else None,
            {"PreToolUse": [dispatch_guard(rewrites)]} if rewrites else None,
            spill_guard(wb, self.spill_threshold) if wb is not None else None,
            {"PostToolUse": [stop_hook]} if stop_hook is not None else None,
            {"PreToolUse": [approve_subagents(leads=spec.leads)]},
            {"PostToolUseFailure": [HookMatcher(matcher="Agent|Task", hooks=[redispatch_hook()])]},
        )
        options = build_options(
            spec, cwd=self.workspace, session_store=self.store, resume=resume, fork=fork,
            prelude=wb.system_append(self.placement) if wb is not None else "",
            add_dirs=[wb.root] if wb is not None and wb.external else (), portable=self.portable,
            hooks=hooks, artifacts=wb.artifacts if wb is not None else None, env=env,
        )
        return options

    def _record(self, result: StepResult, spec: AgentSpec) -> None:
        where = {
            "workspace": str(self.workspace),
            "workbench": str(self.workbench.root) if self.workbench is not None else None,
            "threshold": self.threshold(spec),
            "policies": self._policies,
            "window": self.window(spec),
            "model": self._model,
        }
        append_manifest(self.run_dir, {"run_id": self.run_id, **asdict(result), **where})


def rewrite_policies(store: Any) -> dict[str, Any]:
    """The rewrites a store applies on load, as plain data for the manifest (so `flower preview` shows
    exactly what this run's next resume would do)."""
    trim, ephemeral = getattr(store, "trim_policy", None), getattr(store, "ephemeral_policy", None)
    return {
        "trim": {"keep_recent": trim.keep_recent, "min_chars": trim.min_chars} if trim else None,
        "ephemeral": {"keep_recent": ephemeral.keep_recent} if ephemeral else None,
        "keep_denials": getattr(store, "keep_denials", 1),
    }


def _init_session(msg: Any) -> str | None:
    """The session id of the CLI's init frame: known before the first API reply."""
    data = getattr(msg, "data", None) if getattr(msg, "subtype", None) == "init" else None
    sid = data.get("session_id") if isinstance(data, dict) else None
    return sid if isinstance(sid, str) and sid else None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
