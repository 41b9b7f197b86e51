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
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    HookMatcher,
    ResultMessage,
    SessionStore,
    TextBlock,
    ToolUseBlock,
)

from flower.core import texts
from flower.core.agent import build_options
from flower.core.spec import AgentSpec
from flower.core.compact import CompactPolicy
from flower.core.events import Event, OnEvent, emit, to_events
from flower.core.guard import approve_subagents
from flower.core.handoff import (
    ContextMeter,
    HandoffPolicy,
    degraded_handoff,
    is_context_overflow,
    parse_handoff,
    save_handoff,
)
from flower.core.resilience import RetryPolicy, classify, wait_for_endpoint
from flower.core.steps import StepResult, append_manifest
from flower.errors import ConfigError

__all__ = ["Runtime", "StepResult", "append_manifest"]

Placement = Literal["user", "system"]


@dataclass
class _Attempt:
    """One client session: what came back and why it ended."""

    session_id: str | None = None
    result: ResultMessage | None = None
    text: str = ""
    error: str | None = None
    status: int | None = None
    cost: float = 0.0
    turns: int = 0
    crossed: bool = False
    stopped: bool = False
    """Our PostToolUse hook ended the turn at a tool boundary because the threshold was crossed."""
    handoff: str | None = None
    interrupted: bool = False


@dataclass
class _Tally:
    cost: float = 0.0
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    handoffs: list[str] = field(default_factory=list)
    retries: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    degraded: int = 0

    def add(self, attempt: _Attempt) -> None:
        self.attempts += 1
        self.cost += attempt.cost
        self.turns += attempt.turns
        if attempt.error:
            self.errors.append(attempt.error)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        run_dir: str | os.PathLike[str] = "runs",
        workbench: bool | Any = True,
        spill_threshold: int | None = 4000,
        trim: bool | Any = False,
        ephemeral: bool | Any = True,
        keep_denials: int = 1,
        handoff: bool | HandoffPolicy = True,
        resilience: bool | RetryPolicy = True,
        store: SessionStore | None = None,
        portable: bool = True,
        placement: Placement = "user",
        env: Mapping[str, str] | None = None,
        run_id: str | None = None,
        project: str | None = None,
    ) -> None:
        from flower.core.workbench import Workbench

        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise ConfigError(f"workspace {self.workspace} is not a directory")
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.workbench = Workbench(self.workspace) if workbench is True else (workbench or None)
        if self.workbench is not None:
            self.workbench.ensure()
        self.spill_threshold = spill_threshold
        self.handoff: HandoffPolicy | None = _policy(handoff, HandoffPolicy())
        self.retry: RetryPolicy | None = _policy(resilience, RetryPolicy())
        self.portable = portable
        self.placement: Placement = placement
        self.env = dict(env or {})
        self.run_id = run_id or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        self.store = self._make_store(store, project, trim=trim, ephemeral=ephemeral, keep_denials=keep_denials)
        self._policies = {**rewrite_policies(self.store), "spill_threshold": spill_threshold, "project": project}
        self._client: ClaudeSDKClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._interrupt: str | None = None

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
        step = step_name or spec.name
        started, clock = _now(), time.monotonic()
        self._interrupt = None  # an interrupt that arrived after the last step ended is void
        if self.workbench is not None:
            self.workbench.refresh()
        emit(on_event, Event("step", step, payload={"phase": "start", "resume": resume}))
        meter = ContextMeter()
        tally = _Tally()
        session, last = await self._drive(spec, prompt, step, resume, fork, meter, tally, on_event)
        result = StepResult(
            step=step, session_id=session, ok=last.error is None and last.result is not None,
            cost_usd=round(tally.cost, 6), num_turns=tally.turns, text=last.text, error=last.error,
            errors=tuple(tally.errors), attempts=tally.attempts, resumed=resume is not None,
            retired=tuple(tally.retired), handoffs=tuple(tally.handoffs), context=meter.current,
            contexts=tuple(meter.per_message), retries=tuple(tally.retries), started=started, ended=_now(),
            duration=round(time.monotonic() - clock, 3),
        )
        self._record(result, spec)
        emit(on_event, Event("step", step, payload={"phase": "end", "ok": result.ok, "cost_usd": result.cost_usd}))
        return result

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
        """The main-thread context in tokens at which a handoff starts, or None without generations."""
        return self.handoff.threshold(spec.model) if self.handoff else None

    # --- the step loop ----------------------------------------------------------------------------

    async def _drive(
        self, spec: AgentSpec, prompt: str, step: str, resume: str | None, fork: bool,
        meter: ContextMeter, tally: _Tally, on_event: OnEvent | None,
    ) -> tuple[str | None, _Attempt]:
        session = resume
        message = self._first_message(prompt)
        generation = 1
        while True:
            attempt = await self._attempt(spec, message, session, fork and tally.attempts == 0, meter, on_event)
            tally.add(attempt)
            session = attempt.session_id or session
            if attempt.interrupted:
                note = self._interrupt or ""
                self._interrupt = None
                message = texts.RESUME_AFTER_INTERRUPT.format(message=f"\n\n{note}" if note else "")
                continue
            overflow = attempt.error is not None and is_context_overflow(attempt.error)
            if attempt.handoff is not None or (overflow and self.handoff):
                if overflow:
                    tally.degraded += 1
                    if tally.degraded >= 2:
                        attempt.error = self._overflow_diagnostic(spec, "two degraded handoffs in a row")
                        return session, attempt
                    doc = degraded_handoff(prompt, attempt.text, attempt.error or "context overflow")
                else:
                    tally.degraded = 0
                    doc = attempt.handoff or ""
                generation += 1
                assert self.handoff is not None
                if generation > self.handoff.max_generations:
                    attempt.error = self._overflow_diagnostic(spec, f"more than {self.handoff.max_generations} generations")
                    return session, attempt
                message, path = self._next_generation(step, doc, generation)
                tally.handoffs.append(str(path))
                if session:
                    tally.retired.append(session)
                emit(on_event, Event("handoff", doc, payload={"generation": generation, "path": str(path),
                                                              "retired": session, "degraded": overflow}))
                session = None
                attempt.error = None
                continue
            if attempt.error is None or not await self._retry(attempt, tally, on_event):
                return session, attempt
            message = texts.RESUME_AFTER_ERROR

    async def _retry(self, attempt: _Attempt, tally: _Tally, on_event: OnEvent | None) -> bool:
        kind = classify(attempt.error, attempt.status)
        if self.retry is None or kind == "fatal" or tally.attempts >= self.retry.max_attempts:
            return False
        delay = self.retry.delay(tally.attempts)
        tally.retries.append({"attempt": tally.attempts, "kind": kind, "error": attempt.error, "delay": round(delay, 3)})
        emit(on_event, Event("retry", attempt.error or "", payload={"kind": kind, "delay": delay,
                                                                    "attempt": tally.attempts}))
        await anyio.sleep(delay)
        base_url = self._cli_env().get("ANTHROPIC_BASE_URL")
        return await wait_for_endpoint(base_url, timeout=self.retry.probe_timeout)

    def _overflow_diagnostic(self, spec: AgentSpec, why: str) -> str:
        assert self.handoff is not None
        return (f"stopped: {why}; window {self.handoff.resolve_window(spec.model):,} tokens, handoff threshold "
                f"{self.handoff.threshold(spec.model):,} tokens")

    def _first_message(self, prompt: str) -> str:
        if self.workbench is None:
            return prompt
        return self.workbench.first_message(prompt, self.placement)

    def _next_generation(self, step: str, doc: str, generation: int) -> tuple[str, Path]:
        notes = self.workbench.notes if self.workbench is not None else self.run_dir / "notes"
        path = save_handoff(notes, step, doc)
        if self.workbench is not None:
            self.workbench.refresh()
        body = texts.HANDOFF_CONTINUE.format(generation=generation, path=path, handoff=doc.strip())
        return self._first_message(body), path

    # --- one client session -------------------------------------------------------------------

    async def _attempt(
        self, spec: AgentSpec, message: str, resume: str | None, fork: bool, meter: ContextMeter,
        on_event: OnEvent | None,
    ) -> _Attempt:
        attempt = _Attempt(session_id=resume)
        seen_calls: set[str] = set()
        threshold = self.threshold(spec)
        stop_hook = self._stop_hook(attempt, seen_calls) if threshold is not None else None
        options = self._options(spec, resume, fork, stop_hook)
        client: ClaudeSDKClient | None = None
        try:
            client = ClaudeSDKClient(options)
            await client.connect()
            self._client, self._loop = client, asyncio.get_running_loop()
            await client.query(message)
            await self._receive(client, attempt, meter, seen_calls, threshold, on_event)
            # A turn that ended by itself finished its work: no handoff now. A later step resuming this
            # session crosses again at its first tool boundary and hands over then.
            if attempt.stopped and not attempt.interrupted and attempt.error is None:
                await self._ask_handoff(client, attempt, on_event)
        except Exception as exc:  # the CLI process or transport failed: classify and maybe retry
            attempt.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        finally:
            self._client = None
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.disconnect()
        return attempt

    async def _receive(
        self, client: ClaudeSDKClient, attempt: _Attempt, meter: ContextMeter, seen_calls: set[str],
        threshold: int | None, on_event: OnEvent | None,
    ) -> None:
        async for msg in client.receive_response():
            if attempt.session_id is None:
                attempt.session_id = getattr(msg, "session_id", None) or _init_session(msg)
                if attempt.session_id is not None:  # the instant it is known, so a workflow can record it (L-7)
                    emit(on_event, Event("system", "session", payload={"subtype": "session",
                                                                        "session_id": attempt.session_id}))
            for event in to_events(msg):
                emit(on_event, event)
            if isinstance(msg, AssistantMessage) and msg.parent_tool_use_id is None and msg.model != "<synthetic>":
                if meter.observe(msg.message_id, msg.usage) and threshold is not None:
                    self._watch(meter, threshold, attempt, on_event)
                seen_calls.update(b.id for b in msg.content if isinstance(b, ToolUseBlock))
            elif isinstance(msg, ResultMessage):
                self._settle(attempt, msg)

    def _watch(self, meter: ContextMeter, threshold: int, attempt: _Attempt, on_event: OnEvent | None) -> None:
        """Mark the crossing, and warn once when the context first comes within 20k tokens of it."""
        if meter.current >= threshold:
            attempt.crossed = True
        elif meter.current >= threshold - 20_000 and not meter.warned:
            meter.warned = True
            emit(on_event, Event("system", f"main-thread context {meter.current:,} tokens: within 20,000 of the "
                                           f"handoff threshold {threshold:,}",
                                 payload={"subtype": "context_warning", "context": meter.current,
                                          "threshold": threshold}))

    def _settle(self, attempt: _Attempt, msg: ResultMessage) -> None:
        attempt.result = msg
        attempt.session_id = msg.session_id or attempt.session_id
        attempt.cost += msg.total_cost_usd or 0.0
        attempt.turns += msg.num_turns
        if self._interrupt is not None and msg.subtype == "error_during_execution":
            attempt.interrupted = True
        elif msg.is_error and not attempt.stopped:
            attempt.error = (msg.result or "; ".join(msg.errors or []) or msg.subtype).splitlines()[0]
            attempt.status = msg.api_error_status
        else:
            attempt.text = msg.result or ""

    async def _ask_handoff(self, client: ClaudeSDKClient, attempt: _Attempt, on_event: OnEvent | None) -> None:
        """The exempt round: the same session writes its handoff; one retry when sections are missing."""
        for request in (texts.HANDOFF_REQUEST, texts.HANDOFF_RETRY):
            await client.query(request)
            reply = ""
            async for msg in client.receive_response():
                for event in to_events(msg):
                    emit(on_event, event)
                if isinstance(msg, AssistantMessage) and msg.parent_tool_use_id is None:
                    reply += "".join(b.text for b in msg.content if isinstance(b, TextBlock))
                elif isinstance(msg, ResultMessage):
                    attempt.cost += msg.total_cost_usd or 0.0
                    attempt.turns += msg.num_turns
            if parse_handoff(reply):
                attempt.handoff = reply.strip()
                return
        attempt.handoff = degraded_handoff("(see the workbench notes)", attempt.text, "the handoff was incomplete")

    def _stop_hook(self, attempt: _Attempt, seen_calls: set[str]) -> HookMatcher:
        """PostToolUse on the main thread: end the turn at this tool boundary once the threshold is crossed."""

        async def stop(input_data: Any, tool_use_id: str | None, context: Any) -> Any:
            if input_data.get("agent_id"):
                return {}
            # The message stream and hook calls race; wait until the receive loop has seen this call's
            # assistant message (and so its usage) before deciding.
            for _ in range(300):
                if tool_use_id is None or tool_use_id in seen_calls:
                    break
                await anyio.sleep(0.01)
            if attempt.crossed:
                attempt.stopped = True
                return {"continue_": False, "stopReason": "flower: handoff to a new generation"}
            return {}

        return HookMatcher(matcher=None, hooks=[stop])

    def _cli_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _options(self, spec: AgentSpec, resume: str | None, fork: bool, stop_hook: HookMatcher | None) -> Any:
        from flower.core.guard import merge_hooks
        from flower.core.spill import spill_guard
        from flower.core.workbench import workbench_hooks

        wb = self.workbench if spec.workbench else None
        env = dict(self.env)
        if self.handoff is not None and spec.compact is None:
            env.update(CompactPolicy("no_summary").env())
        hooks = merge_hooks(
            workbench_hooks(wb) if wb is not None else None,
            spill_guard(wb, self.spill_threshold) if wb is not None else None,
            {"PostToolUse": [stop_hook]} if stop_hook is not None else None,
            {"PreToolUse": [approve_subagents(leads=spec.leads)]},
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
