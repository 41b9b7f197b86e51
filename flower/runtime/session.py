"""One CLI session (one attempt of a step): send the message, read what comes back, say how it ended.

A `Session` owns everything one client session learns: its id, its result, its cost, the tasks still
running, whether our hook stopped the turn (for a handoff or a refresh) and why it failed. Each message
type has its own handler; `run()` returns the frozen `Outcome` the step loop decides on.

Invariants:
- The session id is captured from the first message that carries it (the init frame's, before the first
  API reply) and announced at once, so a workflow can record it; the manifest gets a session row then (a
  resumed session's before its message is sent) naming the step, which `flower report --by step` reads.
- Only the main thread's context counts toward a handoff, each API message once. When it crosses the
  threshold, the PostToolUse hook stops the turn at the next tool boundary and the same session writes
  the handoff in an exempt round; a turn that ended by itself finished its work and hands over later.
- The hook decides only once the receive loop has seen the call's assistant message (and its usage):
  the message stream and hook calls race.
- A refresh ends the CLI process, and its background tasks with it: none while a task runs.
- Cost: the CLI's `total_cost_usd` is cumulative within one CLI process, starting from the resumed
  transcript's last `cost-state` line, so the session costs its last total minus that base.
- A 401/403 the CLI starts retrying stops the session at once (it cannot pass); so does a refused
  connection, which is the runtime's to wait for with reports, not the CLI's to retry in silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    HookMatcher,
    RateLimitEvent,
    ResultMessage,
    SystemMessage,
    TaskNotificationMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk.types import HookContext, HookInput, HookJSONOutput

from flower import texts
from flower.agent.eventinfo import USAGE_KEYS, usage_of
from flower.agent.events import Event, emit, to_events
from flower.agent.output import OUTPUT_RETRIES_SPENT, OUTPUT_TOOL, output_mismatch
from flower.agent.usage import message_cost
from flower.errors import ConfigError, StoredDataError, StoreError, UnsafePathError
from flower.runtime import child
from flower.runtime.control import Tasks
from flower.runtime.economics import request_cost
from flower.runtime.handoff import degraded_handoff, parse_handoff
from flower.runtime.host import Host, Step
from flower.runtime.outcome import Outcome, outcome_kind
from flower.runtime.refresh import CHARS_PER_TOKEN
from flower.runtime.resilience import (
    endpoint_of,
    endpoint_reachable,
    probe_target,
    usage_limit_reset,
    worker_cut_off,
)
from flower.runtime.steps import now, record_session
from flower.stores.backfill import backfill, projects_dir
from flower.util.oneline import disk_full, first_line, one_line

__all__ = ["Session"]

BACKFILL_PATIENCE = 60.0
"""Seconds a session's end waits for a store that cannot take appends, to back-fill what the SDK dropped."""
_BACKFILL_TRY, _BACKFILL_PAUSE = 20.0, 2.0
"""The bound of one back-fill attempt with no patience; the pause between attempts."""

_SEEN_WAIT = 3.0
"""Seconds the stop hook waits for the receive loop to see its call (then it decides on what it has)."""


class Session:
    """One client session of a step: the facts it gathers, written by its message handlers and its hook."""

    def __init__(self, runtime: Host, step: Step, *, resume: str | None = None, fork: bool = False) -> None:
        self.runtime, self.step, self.resume, self.fork = runtime, step, resume, fork
        # a fork runs as a new session: its id comes with its first message (the parent's stays the step's)
        self.session_id: str | None = None if fork else resume
        self.heard = False
        """The CLI sent a message of this session: it began (a session whose CLI died first never did)."""
        self.result: ResultMessage | None = None
        self.text = ""
        self.output: Any = None
        """The structured output the CLI accepted (with an output type)."""
        self.error: str | None = None
        self.status: int | None = None
        self.cost = self.base_cost = 0.0
        self.turns = 0
        self.crossed = False
        self.stopped = False
        """Our PostToolUse hook ended the turn (threshold crossed, or a refresh)."""
        self.refresh: int | None = None
        """The hook ended the turn for a refresh, which drops about this many stale tokens."""
        self.dropped = 0
        """Characters the resume that started this session already dropped (the store's rewrite report)."""
        self.tasks = Tasks()
        self.handoff: str | None = None
        self.degraded: str | None = None
        self.handoff_usage: dict[str, int] = dict.fromkeys(USAGE_KEYS, 0)
        """Tokens of the handoff round (its result messages' usage: every API message of the round)."""
        self.interrupted = False
        self.fatal = False
        """Retrying cannot help: a 401/403, or a deterministic failure (unreadable stored data, a refused path)."""
        self.cut = False
        """The runtime stopped the CLI's own retries (and already said why)."""
        self.worker_errors: list[str] = []
        self.resets_at: float | None = None
        """A usage limit refused the session's request: when it resets (the CLI's rate_limit_event)."""
        self._cut_off: set[str] = set()
        self._seen: set[str] = set()
        self._waits: dict[str, anyio.Event] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._endpoint = endpoint_of(runtime._cli_env())

    # --- the session ------------------------------------------------------------------------------

    async def run(self, message: str) -> Outcome:
        """Connect, send `message`, read the reply through; write the handoff when our hook stopped the turn."""
        runtime, spec = self.runtime, self.step.spec
        generations = runtime.threshold(spec) is not None
        hook = self.stop_hook() if generations or runtime.refresh is not None else None
        options = runtime._options(spec, self.resume, self.fork, hook, self.step.resume_at if self.fork else None,
                                   self.step.output_type)
        # before a resume: what an earlier process's session left in the local transcript only
        await self._backfill(projects_dir(options.env), self.resume, patience=0.0)
        await self._restore()
        if self.resume is None:  # a new session: its id chosen here and said before the CLI can write a line
            self.session_id = str(uuid.uuid4())
            options = replace(options, extra_args={**options.extra_args, "session-id": self.session_id})
            self._started(self.session_id)
        spawn = child.prepare(runtime.run_dir)
        if spawn is not None:  # the CLI in its own process group, ended with flower (flower.runtime.child)
            options = replace(options, cli_path=spawn.cli_path, env={**options.env, **spawn.env})
        client: ClaudeSDKClient | None = None
        ended = False  # by itself or by a failure, not by a cancellation (Ctrl-C twice, a stop)
        try:
            client = ClaudeSDKClient(options)
            await client.connect()
            runtime._steering.attach(client)
            if self.resume is not None and not self.fork:
                self._record_start(self.resume)
            await client.query(message)
            await self._receive(client, generations)
            # A turn that ended by itself finished its work: no handoff now. A later step resuming this
            # session crosses again at its first tool boundary and hands over then.
            if self.stopped and self.refresh is None and not self.interrupted and self.error is None:
                await self._ask_handoff(client)
            ended = True
        except Exception as exc:  # the CLI process or transport failed: classify and maybe retry
            self.error = one_line(exc)
            # The SDK wraps a failing SessionStore.load() in a RuntimeError (resume materialization); a
            # deterministic cause under it (unreadable stored row, refused path) is fatal at once.
            self.fatal = self.fatal or _deterministic(exc)
            ended = True
        except BaseException:
            # Cancelled (`flower cancel` preempts the step, Ctrl-C twice) or stopped: end the CLI now; the
            # SDK's disconnect would give a CLI that is still working seconds to go on.
            if spawn is not None:
                child.end_record(spawn.record)
            raise
        finally:
            runtime._steering.detach()
            if client is not None:
                # Before the disconnect: a resumed session's transcript lives in a temp dir removed then. Not
                # when cancelled: stopping comes first, and the next resume back-fills from the local transcript.
                if ended:
                    await self._backfill(_projects(client), self.session_id, patience=BACKFILL_PATIENCE)
                with contextlib.suppress(Exception):
                    await client.disconnect()
            if spawn is not None:
                child.forget(spawn.record)
        return self.outcome()

    def _started(self, session: str) -> None:
        """A new session: its manifest row, then the event a durable step records it on (`flower.flow.durable`),
        both before the CLI can have written anything of it, so a kill at any instant leaves it findable."""
        self._record_start(session)
        emit(self.step.on_event, Event("system", "session", payload={"subtype": "session", "session_id": session}))

    def _record_start(self, session: str) -> None:
        """The manifest's session row: which step this session (or this resume of it) works for."""
        row = {"run_id": self.runtime.run_id, "step": self.step.name, "session_id": session,
               "resumed": self.resume is not None and not self.fork, "forked_from": self.resume if self.fork else None,
               "started": now()}
        try:
            record_session(self.runtime.run_dir, row)
        except StoreError as exc:  # the step's own row at its end reports a manifest that cannot be written
            emit(self.step.on_event, Event("error", f"session {session}: {exc}",
                                           payload={"subtype": "manifest", "session_id": session}))

    def outcome(self) -> Outcome:
        kind = outcome_kind(interrupted=self.interrupted, stale=self.refresh, handoff=self.handoff,
                            error=self.error, fatal=self.fatal)
        began = self.heard or (self.resume is not None and not self.fork)
        return Outcome(kind, session_id=self.session_id if began else None, text=self.text, error=self.error, status=self.status,
                       handoff=self.handoff, degraded=self.degraded, stale=self.refresh,
                       output=self.output, settled=self.result is not None, cost=self.cost, turns=self.turns,
                       worker_errors=tuple(self.worker_errors),
                       handoff_usage=dict(self.handoff_usage) if self.handoff is not None else {},
                       resets_at=(self.resets_at or usage_limit_reset(self.error)) if self.error else None)

    async def _restore(self) -> None:
        """The cost base and what the rewriting store dropped, from the transcript a resume hands the CLI."""
        if self.resume is None:
            return
        runtime = self.runtime
        key = runtime._key(self.resume)
        try:
            entries = await runtime.store.load(key) or []  # type: ignore[arg-type]
        except Exception:  # the resume itself will report a broken store
            entries = []
        totals = [e.get("totalCostUSD") for e in entries if isinstance(e, Mapping) and e.get("type") == "cost-state"]
        known = [t for t in totals if isinstance(t, (int, float))]
        self.base_cost = float(known[-1]) if known else 0.0
        report = runtime.store.last_report(key)  # type: ignore[attr-defined]
        self.dropped = report.chars_saved if report is not None else 0

    async def _backfill(self, projects: Path, session: str | None, *, patience: float) -> None:
        """Append to the store what the CLI's transcript holds and the store lacks (a mirror batch the SDK
        dropped), waiting up to `patience` seconds for a store that cannot take appends; say what happened."""
        if session is None:
            return
        key, why = self.runtime._key(session), "it did not answer in time"
        added: dict[str, int] | None = None
        with anyio.move_on_after(max(patience, _BACKFILL_TRY)):
            deadline = anyio.current_time() + patience
            while added is None:
                try:
                    added = await backfill(self.runtime.store, projects, key)  # type: ignore[arg-type]
                except Exception as exc:  # noqa: BLE001 - any store's failure: wait, then say so
                    why = one_line(exc)
                    if anyio.current_time() >= deadline or _deterministic(exc) or disk_full(exc):
                        break  # a damaged row or a full disk fails every try alike: waiting cannot help
                    await anyio.sleep(_BACKFILL_PAUSE)
        if added is None:
            emit(self.step.on_event, Event("error", f"session {session}: the store may lack entries of the CLI's "
                                                    f"transcript ({why}); they are appended at its next resume",
                                           payload={"subtype": "backfill_failed", "session_id": session}))
        elif added:
            count = sum(added.values())
            emit(self.step.on_event, Event("system", f"session {session}: back-filled {count} entries the store "
                                                     "lacked from the CLI's transcript",
                                           payload={"subtype": "backfill", "session_id": session,
                                                    "entries": count, "files": added}))

    # --- message handlers -------------------------------------------------------------------------

    async def _receive(self, client: ClaudeSDKClient, generations: bool) -> None:
        async for msg in client.receive_response():
            self._on_any(msg)
            if isinstance(msg, SystemMessage):
                await self._on_system(client, msg)
            elif isinstance(msg, AssistantMessage):
                self._on_assistant(msg, generations)
            elif isinstance(msg, ResultMessage):
                self._on_result(msg)
            elif isinstance(msg, UserMessage):
                self._on_user(msg)
            elif isinstance(msg, RateLimitEvent) and msg.rate_limit_info.status == "rejected":
                self.resets_at = msg.rate_limit_info.resets_at or self.resets_at
            if isinstance(msg, TaskNotificationMessage):
                self._on_task_notification(msg)

    def _on_any(self, msg: object) -> None:
        """Every message: the session id the instant it is known, the tasks, the events."""
        self.heard = self.heard or getattr(msg, "session_id", None) is not None or _init_session(msg) is not None
        if self.session_id is None:  # a fork: the CLI names its new session in its first message
            self.session_id = getattr(msg, "session_id", None) or _init_session(msg)
            if self.session_id is not None:
                self._started(self.session_id)
        self.tasks.track(msg)
        for event in to_events(msg):
            if event.kind == "retry":  # the CLI's own retries: say where they go
                event = replace(event, payload={**event.payload, "endpoint": self._endpoint})
            self.step.tally.observe(event)
            emit(self.step.on_event, event)

    async def _on_system(self, client: ClaudeSDKClient, msg: SystemMessage) -> None:
        if msg.subtype == "init" and isinstance(msg.data.get("model"), str):
            self.runtime._use_model(self.step.spec, msg.data["model"], self.step.on_event)
        elif msg.subtype == "api_retry":
            await self._stop_cli_retries(client, msg.data)

    def _on_assistant(self, msg: AssistantMessage, generations: bool) -> None:
        if msg.model != "<synthetic>":
            self.runtime._answered()
        if msg.parent_tool_use_id is not None or msg.model == "<synthetic>":
            return
        self.runtime._use_model(self.step.spec, msg.model, self.step.on_event)
        if self.step.meter.observe(msg.message_id, msg.usage, msg.model):
            self._price_pending(msg)
            if generations:
                self._watch()
        for block in msg.content:
            if isinstance(block, ToolUseBlock):
                self._seen.add(block.id)
                waiting = self._waits.pop(block.id, None)
                if waiting is not None:
                    waiting.set()
                if block.name in ("Agent", "Task") and block.input.get("run_in_background"):
                    self.tasks.running.add(block.id)

    def _on_result(self, msg: ResultMessage) -> None:
        self.result = msg
        self.session_id = msg.session_id or self.session_id
        self._account(msg)
        if self.cut:  # the runtime stopped this session and already said why
            return
        if self.runtime._steering.note is not None and msg.subtype == "error_during_execution":
            self.interrupted = True
        elif msg.is_error and not self.stopped:
            if msg.api_error_status is not None:  # an HTTP status: the endpoint answered
                self.runtime._answered()
            text = first_line(msg.result or "; ".join(msg.errors or []) or msg.subtype)
            # A cap ("error_max_turns", "error_max_budget_usd") is named, so it is classified final.
            self.error = text if text == msg.subtype or not msg.subtype.startswith("error_max") \
                else f"{msg.subtype}: {text}"
            self.status = msg.api_error_status
            if msg.subtype == OUTPUT_RETRIES_SPENT:  # another attempt would not help
                self.error, self.fatal = output_mismatch(text), True
        else:
            self.text = msg.result or ""
            self._on_output(msg)

    def _on_output(self, msg: ResultMessage) -> None:
        """A successful result of a step with an output type carries the structured output; a reply that
        ended without it (it never called the tool, even when the CLI reminded it) fails the step."""
        if self.step.output_type is None or self.stopped:
            return
        self.output = msg.structured_output
        if self.output is None:
            said = first_line(self.text)
            self.error = f"the reply gave no structured output (it never called {OUTPUT_TOOL})" + \
                (f": {said}" if said else "")
            self.fatal = True

    def _on_user(self, msg: UserMessage) -> None:
        if not isinstance(msg.content, list):
            return
        for block in msg.content:
            if isinstance(block, ToolResultBlock) and block.is_error:
                self.tasks.running.discard(block.tool_use_id)  # a background call that never launched
                if worker_cut_off(block.content):
                    self._worker_cut_off(block.tool_use_id, block.content, msg.parent_tool_use_id)

    def _on_task_notification(self, msg: TaskNotificationMessage) -> None:
        if msg.status == "failed" and worker_cut_off(msg.summary):
            self._worker_cut_off(msg.tool_use_id or msg.task_id, msg.summary, None)

    # --- what the handlers decide -----------------------------------------------------------------

    def _account(self, msg: ResultMessage) -> None:
        """Cost and turns of one query: the CLI process's running total minus the restored base."""
        self.turns += msg.num_turns
        total = msg.total_cost_usd
        if total is None:
            return
        self.cost = total - self.base_cost if total >= self.base_cost else total

    def _price_pending(self, msg: AssistantMessage) -> None:
        """The first request after a refresh or handoff: what it wrote to the cache and cost, said once."""
        tally, meter = self.step.tally, self.step.meter
        if tally.pending is None:
            return
        record, tally.pending = tally.pending, None
        usage = usage_of({"usage": msg.usage})
        input_side = {**usage, "output_tokens": 0}
        record.update(session_id=self.session_id, message_id=msg.message_id, context=meter.current,
                      input=usage["input_tokens"], cache_read=usage["cache_read_input_tokens"],
                      cache_write=usage["cache_creation_input_tokens"],
                      priced=round(request_cost(usage, meter.prices)), usd=round(message_cost(msg.model, input_side), 6))
        tally.cache_costs.append(record)
        emit(self.step.on_event, Event(
            "system", f"{record['kind']} cost: its first request wrote {record['cache_write']:,} tokens to the "
                      f"cache and read {record['cache_read']:,} ({record['priced']:,} input-token eq., "
                      f"${record['usd']:.4f})",
            payload={"subtype": "cache_cost", **record}))

    def _watch(self) -> None:
        """Mark the crossing, and warn once when the context first comes near it."""
        runtime, spec, meter = self.runtime, self.step.spec, self.step.meter
        assert runtime.handoff_policy is not None
        threshold = runtime.threshold(spec) or 0
        warning = runtime.handoff_policy.warning(spec.model, **runtime._window_facts())
        cost = meter.cost_threshold(runtime.handoff_policy.min_turns) if runtime.handoff_policy.auto else None
        if cost is not None and cost < threshold:
            self._announce(cost)
            threshold, warning = cost, cost  # no warning: a cost-driven handoff is routine, not a squeeze
        if meter.current >= threshold:
            self.crossed = True
        elif meter.current >= warning and not meter.warned:
            meter.warned = True
            emit(self.step.on_event, Event(
                "system", f"main-thread context {meter.current:,} tokens: within {threshold - warning:,} of the "
                          f"handoff threshold {threshold:,}",
                payload={"subtype": "context_warning", "context": meter.current, "threshold": threshold}))

    def _announce(self, threshold: int) -> None:
        """Say the cost-driven threshold once per generation, and again when it moved by a tenth."""
        meter = self.step.meter
        if meter.announced is not None and abs(threshold - meter.announced) < meter.announced / 10:
            return
        meter.announced = threshold
        contexts = meter.per_message[meter.generation_start :]
        growth = (contexts[-1] - contexts[0]) // max(len(contexts) - 1, 1)
        emit(self.step.on_event, Event(
            "system", f"handoff threshold {threshold:,} tokens (cost-driven: this generation started at "
                      f"{contexts[0]:,} and grows {growth:,} a turn)",
            payload={"subtype": "threshold", "threshold": threshold, "start": contexts[0], "growth": growth,
                     "cost_driven": True}))

    def _worker_cut_off(self, call: str, content: Any, parent: str | None) -> None:
        """A worker cut off by an API failure past the CLI's retries ends its Agent call with an error
        (foreground: the tool result; background: a task notification) and the run would go on as if nothing
        happened: record it once per call and say so."""
        if call in self._cut_off:
            return
        self._cut_off.add(call)
        text = content if isinstance(content, str) else " ".join(
            b.get("text", "") for b in content or [] if isinstance(b, dict))
        line = f"worker cut off ({call}): {' '.join(text.split())}"
        self.worker_errors.append(line)
        emit(self.step.on_event, Event("error", line, payload={"subtype": "worker_cut_off", "tool_use_id": call,
                                                               "parent_tool_use_id": parent}))

    async def _stop_cli_retries(self, client: ClaudeSDKClient, data: Mapping[str, Any]) -> None:
        """Stop the session at the CLI's first retry of an error that cannot pass or of a refused connection.
        A 401/403 ends the step; a down endpoint goes to the runtime's probe, which reports on it."""
        status, endpoint, runtime = data.get("error_status"), self._endpoint, self.runtime
        if self.cut:
            return
        if status in (401, 403) or data.get("error") == "authentication_failed":
            self.status = status if isinstance(status, int) else 401
            self.error = (f"API Error: {self.status} {data.get('error') or 'authentication failed'}: "
                          f"{endpoint} refused the credentials (check ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL)")
            self.fatal = True
        elif status is None and runtime.retry is not None and not await anyio.to_thread.run_sync(
                endpoint_reachable, probe_target(runtime._cli_env()), 2.0):
            self.error = f"API Error: connection to {endpoint} failed: it does not accept connections"
        else:
            return
        self.cut = True
        task = asyncio.get_running_loop().create_task(client.interrupt())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _ask_handoff(self, client: ClaudeSDKClient) -> None:
        """The exempt round: the same session writes its handoff; one retry when sections are missing."""
        why = "the handoff was incomplete (no non-empty ## Doing and ## Next)"
        goal, self.runtime._steering.handoff = self.runtime._steering.handoff, None
        focus = texts.HANDOFF_FOCUS.format(goal=goal) if goal else ""
        if goal is not None:
            emit(self.step.on_event, Event("system", "handoff asked for" + (f": {goal}" if goal else ""),
                                           payload={"subtype": "handoff_asked", "goal": goal}))
        for request in (texts.HANDOFF_REQUEST + focus, texts.HANDOFF_RETRY):
            await client.query(request)
            reply = ""
            async for msg in client.receive_response():
                for event in to_events(msg):
                    self.step.tally.observe(event)
                    emit(self.step.on_event, event)
                if isinstance(msg, AssistantMessage) and msg.parent_tool_use_id is None:
                    reply += "".join(b.text for b in msg.content if isinstance(b, TextBlock))
                elif isinstance(msg, ResultMessage):
                    self._account(msg)
                    # the round's own tokens, output included (a streamed reply's message carries only its start)
                    for key, value in usage_of({"usage": msg.usage}).items():
                        self.handoff_usage[key] += value
                    if msg.is_error:
                        why = f"the handoff round failed: {first_line(msg.result or msg.subtype)}"
            if parse_handoff(reply):
                self.handoff = reply.strip()
                return
        self.degraded = why
        self.handoff = degraded_handoff(self.step.prompt, self.text, why)

    # --- the stop hook ----------------------------------------------------------------------------

    def stop_hook(self) -> HookMatcher:
        """PostToolUse on the main thread: end the turn at this tool boundary once the threshold is crossed,
        or for a refresh that pays (`RefreshPolicy`)."""

        async def stop(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
            if input_data.get("agent_id"):
                return {}
            await self._wait_seen(tool_use_id)
            for callback in self.runtime._boundary:
                with contextlib.suppress(Exception):  # a steering source that fails must not stop the run
                    await anyio.to_thread.run_sync(callback)
            if self.runtime._steering.handoff is not None and self.runtime.handoff_policy is not None:
                self.crossed = True  # a person asked for it (`Runtime.handoff`)
            if self.crossed:  # set only with generations on (`_watch`, `Runtime.handoff`)
                self.stopped = True
                return {"continue_": False, "stopReason": "flower: handoff to a new generation"}
            if not self.stopped and await self.refresh_due():
                self.stopped = True
                return {"continue_": False, "stopReason": "flower: refresh (stale results dropped on resume)"}
            return {}

        return HookMatcher(matcher=None, hooks=[stop])

    async def _wait_seen(self, call: str | None) -> None:
        """Until the receive loop has seen the assistant message of `call` (at most a few seconds)."""
        if call is None or call in self._seen:
            return
        waiting = self._waits.setdefault(call, anyio.Event())
        with anyio.move_on_after(_SEEN_WAIT):
            await waiting.wait()

    async def refresh_due(self) -> bool:
        """At a main-thread tool boundary: whether resuming the live session now drops enough (RefreshPolicy)."""
        policy, context, tally = self.runtime.refresh, self.step.meter.current, self.step.tally
        if policy is None or self.crossed or self.tasks.running \
                or context < max(tally.next_refresh, policy.min_tokens):
            return False
        stale = await self._stale()
        if policy.worth(context, stale):
            self.refresh = stale
            tally.next_refresh = 0
            return True
        tally.next_refresh = policy.next_check(context, stale)
        return False

    async def _stale(self) -> int:
        """Tokens a resume of the live session would drop now that it has not dropped already."""
        if self.session_id is None:
            return 0
        store, key = self.runtime.store, self.runtime._key(self.session_id)
        try:
            await store.load(key)  # type: ignore[arg-type]
        except Exception:  # a store that cannot load now: no refresh (the resume would fail the same way)
            return 0
        report = store.last_report(key)  # type: ignore[attr-defined]
        saved = report.chars_saved if report is not None else 0
        return max(0, saved - self.dropped) // CHARS_PER_TOKEN


def _projects(client: ClaudeSDKClient) -> Path:
    """The projects folder the session's CLI writes to: the SDK's temp config dir for a store-backed resume
    (private to the SDK, so read defensively), else the one of the options' env."""
    materialized = getattr(client, "_materialized", None)
    config = getattr(materialized, "config_dir", None)
    return Path(config) / "projects" if config is not None else projects_dir(client.options.env)


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


def _init_session(msg: object) -> str | None:
    """The session id of the CLI's init frame: known before the first API reply."""
    data = getattr(msg, "data", None) if getattr(msg, "subtype", None) == "init" else None
    sid = data.get("session_id") if isinstance(data, dict) else None
    return sid if isinstance(sid, str) and sid else None
