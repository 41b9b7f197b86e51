"""`Runtime`: runs specs step by step, wiring every layer, across generations, failures and interrupts.

One step is one `run(spec, prompt)`. It may span several sessions (generations) and several attempts
(transient failures); the `StepResult` adds them up. Model and API failures never raise out of `run()`:
they land in the result. The step itself is `loops.run_step` (two small loops over `Session`s, whose
outcomes `decide` turns into moves); this class is the facade that holds the run's settings and state.

Invariants:
- The walls come from the spec (`build_options`), whatever the workbench setting.
- The system prompt is byte-identical across the steps and generations of a run: it holds only stable
  text; the workbench listing rides in each new session's first user message.
- Generations force `CompactPolicy("no_summary")` unless the spec sets `compact`.
- The manifest is written atomically under a file lock, so parallel processes never lose each other's rows.
- The window follows the model in use (the session's init message and replies), and a real overflow caps
  it for that endpoint and model in this run dir, across restarts (`calibration`, `resolve_window`).
- Every error that ends a step on the API's side names the endpoint (ANTHROPIC_BASE_URL or the default host).
- An endpoint that never answered this run dir and refuses connections (or never completes one) fails the
  step within seconds, naming it: it is most likely a typo, not an outage to wait for.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, SessionStore, project_key_for_directory
from claude_agent_sdk.types import SessionKey

from flower.agent.events import Event, OnEvent, emit
from flower.agent.options import build_options, check_isolation, isolated_types
from flower.agent.output import OutputType, output_schema, parse_output
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.runtime import child
from flower.runtime.calibration import Windows
from flower.runtime.checkpoints import Checkpoints, FileCheckpoints
from flower.runtime.config import RuntimeConfig, RuntimeOptions
from flower.runtime.control import Steering
from flower.runtime.handoff import ContextMeter, HandoffPolicy, generation_of, overflow_window
from flower.runtime.host import Step
from flower.runtime.layers import Generations, Layer, Spill, TurnStop, Walls, WorkbenchLayer, fold
from flower.runtime.loops import run_step
from flower.runtime.outcome import Outcome
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.resilience import RetryPolicy, endpoint_of
from flower.runtime.session import Session
from flower.runtime.steps import StepResult, append_manifest, now, read_manifest
from flower.runtime.stream import EventStream
from flower.runtime.tally import Tally
from flower.runtime.tracing import traced
from flower.stores._common import main_usages
from flower.stores.backfill import backfill, projects_dir
from flower.util.oneline import one_line
from flower.util.rundir import checked_sqlite, make_run_dir
from flower.workbench.bench import Placement, Workbench, outside_checkout

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from flower.runtime.rewind import Rewound

__all__ = ["Runtime", "StepResult", "append_manifest", "new_run_id"]

_FIELDS = frozenset(f.name for f in fields(RuntimeConfig))


def new_run_id() -> str:
    """A fresh run id: the start time (UTC), the process id and a random tail."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(3)}"


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
        self.run_dir = make_run_dir(Path(cfg.run_dir))  # a new run dir gets a .gitignore of `*`
        self.workbench = Workbench(self.workspace) if cfg.workbench is True else (cfg.workbench or None)
        if self.workbench is not None:
            self.workbench.ensure()
        self.checkpoints = FileCheckpoints(self.run_dir)
        """What each file held before an agent changed it (`rewind`)."""
        self.checkpoints.ensure()
        self.spill_threshold = cfg.spill_threshold
        self.handoff_policy: HandoffPolicy | None = cfg.handoff_policy()
        self._boundary: list[Callable[[], None]] = []
        self.refresh: RefreshPolicy | None = _policy(cfg.refresh, RefreshPolicy())
        self.retry: RetryPolicy | None = _policy(cfg.resilience, RetryPolicy())
        self.limit_wait = cfg.limit_wait
        self.portable = cfg.portable
        self.placement: Placement = cfg.placement
        self.env = dict(cfg.env)
        self.run_id = run_id or new_run_id()
        self.store = self._make_store(store, cfg.project, trim=cfg.trim, ephemeral=cfg.ephemeral,
                                      keep_denials=cfg.keep_denials)
        self._policies = {**rewrite_policies(self.store), "spill_threshold": cfg.spill_threshold,
                          "project": cfg.project}
        self._steering = Steering()
        """The interrupt waiting for the next resume, and the live client it stops."""
        self._model: str | None = None
        """The model the last session reported (init message, then its replies)."""
        self._windows = Windows(self.run_dir)
        """The smallest windows real overflows showed, by endpoint and model (this run dir's, kept across
        restarts)."""

    def _make_store(self, store: SessionStore | None, project: str | None, **policies: Any) -> SessionStore:
        """The rewriting layer over the injected store (SQLite in run_dir by default); with `project`, every
        session lives under that one project key, so machines with other checkout paths can resume it."""
        from flower.stores.rewrite import RewritingSessionStore
        from flower.stores.scoped import ProjectScopedStore
        from flower.stores.sqlite import SqliteSessionStore

        base: Any = store if store is not None else SqliteSessionStore(
            checked_sqlite(self.run_dir / "sessions.db", self.run_dir))
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
        resume_at: str | None = None,
        on_event: OnEvent | None = None,
        output_type: OutputType | None = None,
    ) -> StepResult:
        """Run one step; model and API failures land in the result, never raise. `resume_at` (an entry uuid
        of `resume`) forks that session at the message: the step goes on from it in a new session, the
        original unchanged (`rewind` also puts the files back). With `output_type` (a pydantic model class
        or a JSON schema) the final reply must satisfy it: the typed value is the result's `output`, and a
        reply that does not match after one retry fails the step."""
        if resume_at is not None and resume is None:
            raise ConfigError("resume_at needs resume=<session id>: there is nothing to fork at a message")
        fork = fork or resume_at is not None
        if output_type is not None:
            output_schema(output_type)  # a bad output type is the caller's error: one line, before any request
        spec = self.config.apply(spec)  # the config's model where the spec names none; its budget caps
        name = step_name or spec.name
        started, clock = now(), time.monotonic()
        self._steering.note = None  # an interrupt that arrived after the last step ended is void
        check_isolation(spec, self.workspace)
        if isolated_types(spec):
            self.isolate_workbench(on_event)
        if self.workbench is not None:
            self.workbench.refresh()
        self._bind_channel(spec)
        on_event = traced(on_event)  # spans from the events, when a tracer provider is configured
        await self._recover(self._end_orphans(on_event), on_event)
        emit(on_event, Event("step", name, payload={"phase": "start", "resume": resume, "agent_name": spec.name,
                                                    "model": spec.model, "run_id": self.run_id}))
        step = Step(spec, prompt, name, ContextMeter(), Tally(), on_event, resume_at, output_type)
        if resume is not None:
            await self._seed(step.meter, resume)
        shown = getattr(spec.channel, "show_approvals", None)  # its approval questions join this step's events
        if callable(shown):
            shown(on_event)
        try:
            end = await run_step(self, step, resume, fork)
        finally:
            if callable(shown):
                shown(None)
        tally, meter = step.tally, step.meter
        ok, output, error = end.error is None and end.outcome.settled, None, end.error
        if ok and output_type is not None:
            try:
                output = parse_output(output_type, end.outcome.output)
            except ValueError as exc:
                ok, error = False, f"the reply does not match the output type: {exc}"
        result = StepResult(
            step=name, session_id=end.session, ok=ok, output=output,
            cost_usd=round(tally.cost, 6), num_turns=tally.turns, text=end.outcome.text, error=error,
            errors=tuple(tally.errors), attempts=tally.attempts, resumed=resume is not None,
            retired=tuple(tally.retired), handoffs=tuple(tally.handoffs), refreshes=tally.refreshes,
            context=meter.current,
            contexts=tuple(meter.per_message[meter.seeded :]), retries=tuple(tally.retries), started=started, ended=now(),
            duration=round(time.monotonic() - clock, 3), tool_errors=tally.tool_errors,
            tool_error_samples=tuple(tally.tool_error_samples), usage=dict(tally.usage),
            fallbacks=tuple(tally.fallbacks), cache_costs=tuple(tally.cache_costs),
        )
        self._record(result, spec)
        emit(on_event, Event("step", name, payload={"phase": "end", "ok": result.ok, "cost_usd": result.cost_usd,
                                                    "error": result.error, "turns": result.num_turns,
                                                    "session_id": result.session_id, "context": result.context}))
        return result

    async def rewind(self, to: str) -> Rewound:
        """Fork this run dir's session at the message `to` names (a number or an entry uuid as
        `flower rewind RUN` lists them, or a step name: its start) into a new session, and put back the
        files the agents (workers too) changed after it. The original session is never changed; the fork is
        recorded in the manifest under its step's name. Bad input is a `ConfigError` before anything is
        written."""
        from flower.runtime.rewind import rewind

        base = getattr(self.store, "base", self.store)  # the stored entries, not a resume's rewrite of them
        steps = read_manifest(self.run_dir)
        sessions: dict[str, list[Any]] = {}
        keys: dict[str, SessionKey] = {}
        for row in steps:
            for session in [*(row.get("retired") or []), row.get("session_id")]:
                if isinstance(session, str) and session and session not in sessions:
                    keys[session] = cast(SessionKey, self._key(session))
                    sessions[session] = [e for e in await base.load(keys[session]) or [] if isinstance(e, dict)]
        return await rewind(self.run_dir, base, keys, sessions, to, steps=steps, workspace=self.workspace,
                            workbench=self.workbench.root if self.workbench is not None else None,
                            run_id=self.run_id)

    def _bind_channel(self, spec: AgentSpec) -> None:
        """The spec's human channel answers through this runtime's mailbox unless it has one already: a
        channel that only `coordinator(channel=)` saw is still reachable from `flower asks / answer / say`;
        and it steers this runtime (`flower handoff`, the web page's interrupt) at each tool boundary."""
        bind = getattr(spec.channel, "bind", None)
        if callable(bind) and getattr(spec.channel, "mailbox", None) is None:
            bind(self)
        steered = getattr(spec.channel, "steered_by", None)
        if callable(steered):
            steered(self)  # its steering letters are taken at this runtime's tool boundaries

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
        self._steering.interrupt(message)

    def on_boundary(self, callback: Callable[[], None]) -> None:
        """Call `callback` (from a worker thread) at each main-thread tool boundary, before the runtime decides
        whether the turn stops there: a bound human channel takes the letters that steer the run then
        (`flower handoff`). Registered once per callback."""
        if callback not in self._boundary:
            self._boundary.append(callback)

    def handoff(self, goal: str = "") -> None:
        """Hand over to a new generation at the next main-thread tool boundary, whatever the threshold, with
        `goal` as the focus the handoff document is written for (as Claude Code's `/compact <focus>`).
        Thread-safe; needs generations on (`handoff=` not None)."""
        if self.handoff_policy is None:
            raise ConfigError("a handoff needs generations: this runtime runs with handoff=None")
        self._steering.handoff = " ".join(goal.split())

    async def _seed(self, meter: ContextMeter, session_id: str) -> None:
        """A resumed session continues its generation (each generation is one session): the meter starts
        from the contexts its stored replies reported, so a restart neither restarts the cost-driven
        threshold's count nor measures the growth from the resumed, smaller context."""
        try:
            # the stored entries, not a resume's rewrite of them: a removed stale pair takes its reply along
            raw = getattr(self.store, "base", self.store)
            entries = await raw.load(self._key(session_id)) or []  # type: ignore[arg-type]
        except Exception:  # a store that cannot load: the resume itself reports it
            return
        for ident, model, usage in main_usages(entries):
            meter.observe(ident, usage, model)
        meter.seeded = len(meter.per_message)
        meter.resumed_generation = generation_of(entries)

    def isolate_workbench(self, on_event: OnEvent | None = None) -> Workbench | None:
        """The default workbench moved out of the checkout (`outside_checkout`), so that workers isolated in
        git worktrees can Write and Edit it; said once as an event. A workbench given to the runtime, or one
        already outside the workspace, stays where it is. Call it before the first step (`flower go
        --isolate` does); `run` calls it for a spec with isolated workers."""
        if self.workbench is None or self.config.workbench is not True or self.workbench.external:
            return self.workbench
        self.workbench = Workbench(self.workspace, root=outside_checkout(self.workspace)).ensure()
        emit(on_event, Event("system", f"isolated workers: the workbench is {self.workbench.root}, outside the "
                                       "checkout, where their Write and Edit are allowed",
                             payload={"subtype": "workbench", "root": str(self.workbench.root)}))
        return self.workbench

    async def has_history(self, session_id: str) -> bool:
        """The store holds a prompt or a reply of this session: a resume of it has a conversation to continue
        (a process killed right after the session began leaves its id with nothing stored under it). What the
        CLI's own transcript holds and the store lacks is back-filled first: a kill can beat the SDK's mirror
        by milliseconds, and the session is not lost for that."""
        key = self._key(session_id)
        with contextlib.suppress(Exception):  # a store that cannot take appends: judged on what it holds
            await backfill(self.store, projects_dir(self._cli_env()), key)  # type: ignore[arg-type]
        try:
            entries = await self.store.load(key) or []  # type: ignore[arg-type]
        except Exception:  # a store that cannot load: the resume itself reports it
            return True
        return any(isinstance(e, Mapping) and e.get("type") in ("user", "assistant") for e in entries)

    def threshold(self, spec: AgentSpec) -> int | None:
        """The main-thread context in tokens at which a handoff starts, or None without generations: from
        the window of the model in use (once a session reported it), else the spec's (under this runtime's
        config), else ANTHROPIC_MODEL."""
        model = self.config.apply(spec).model
        return self.handoff_policy.threshold(model, **self._window_facts()) if self.handoff_policy else None

    def window(self, spec: AgentSpec) -> int | None:
        """The context window in tokens the threshold is computed from, or None without generations."""
        model = self.config.apply(spec).model
        return self.handoff_policy.resolve_window(model, **self._window_facts()) if self.handoff_policy else None

    def _window_facts(self) -> dict[str, Any]:
        env = self._cli_env()
        return {"reported": self._model, "env_model": env.get("ANTHROPIC_MODEL"),
                "calibrated": self._windows.get(endpoint_of(env), self._model)}

    # --- what the step loop and its sessions use ----------------------------------------------------

    async def _attempt(self, step: Step, message: str, resume: str | None, fork: bool) -> Outcome:
        """One client session of `step`, started with `message` (resuming `resume`, forked when `fork`)."""
        return await Session(self, step, resume=resume, fork=fork).run(message)

    def _end_orphans(self, on_event: OnEvent | None) -> list[child.Child]:
        """A CLI that a killed flower left running here would go on working in the session this step may
        resume: end it first (flower.runtime.child). Every orphan found."""
        orphans = child.end_orphans(self.run_dir)
        for orphan in orphans:
            if orphan.ended:
                emit(on_event, Event("system", f"ended the Claude Code CLI (pid {orphan.pid}) that a killed "
                                               f"flower (pid {orphan.parent}) left running",
                                     payload={"subtype": "orphan", "pid": orphan.pid, "parent": orphan.parent}))
        return orphans

    async def _recover(self, orphans: list[child.Child], on_event: OnEvent | None) -> None:
        """The transcripts killed flowers' resumed sessions left in the SDK's temp folders: back-filled into
        the store (the SDK's mirror may not have delivered their last entries), then removed, with the copy
        of the credentials the SDK put there. A folder whose back-fill fails stays for the next step."""
        for orphan in orphans:
            folder = orphan.leftover()
            if folder is None:
                continue
            added = 0
            try:
                for project in (folder / "projects").iterdir():
                    for path in project.glob("*.jsonl"):
                        key = {"project_key": project.name, "session_id": path.stem}
                        added += sum((await backfill(self.store, folder / "projects", key)).values())  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - any store's failure: say so, keep the folder
                emit(on_event, Event("error", f"the transcript a killed flower left in {folder} could not be "
                                              f"back-filled ({one_line(exc)}); it is kept for the next step",
                                     payload={"subtype": "backfill_failed", "folder": str(folder)}))
                continue
            shutil.rmtree(folder, ignore_errors=True)
            if added:
                emit(on_event, Event("system", f"back-filled {added} entries a killed flower's resumed session "
                                               f"left in its transcript", payload={"subtype": "backfill",
                                                                                    "entries": added}))

    def _calibrate(self, error: str | None, meter: ContextMeter, on_event: OnEvent | None) -> None:
        """A real overflow: the window is at most what the error names, else at most the last context seen;
        kept per endpoint and model in the run dir, so a restart starts from it."""
        seen = overflow_window(error) or meter.current
        if seen and self._windows.learn(endpoint_of(self._cli_env()), self._model or meter.model, seen):
            emit(on_event, Event("system", f"context overflow: the window is taken as at most {seen:,} tokens",
                                 payload={"subtype": "window", "window": seen, "calibrated": True}))

    def _answered(self) -> None:
        """The endpoint answered a request: a later refused connection is an outage, not a typo."""
        self._windows.mark_answered(endpoint_of(self._cli_env()))

    def _ever_answered(self) -> bool:
        """Whether the endpoint answered any request of this run dir's runs (see `_answered`)."""
        return self._windows.answered(endpoint_of(self._cli_env()))

    def _use_model(self, spec: AgentSpec, model: str, on_event: OnEvent | None) -> None:
        """The session reported the model it runs: the window follows it; say so when it is not the spec's."""
        if not model or model == self._model:
            return
        before = self.threshold(spec)
        self._model = model
        after = self.threshold(spec)
        fallback = (spec.fallback_model or "").lower()
        if spec.model and spec.model.lower() not in model.lower() and not (fallback and fallback in model.lower()):
            emit(on_event, Event("system", f"the model in use is {model}, not the spec's {spec.model}",
                                 payload={"subtype": "model_mismatch", "model": model, "spec_model": spec.model}))
        if after != before and after is not None:
            emit(on_event, Event("system", f"model {model}: window {self.window(spec) or 0:,} tokens, handoff "
                                           f"threshold {after:,}",
                                 payload={"subtype": "window", "model": model, "window": self.window(spec),
                                          "threshold": after}))

    def _key(self, session: str) -> dict[str, str]:
        return {"project_key": project_key_for_directory(str(self.workspace)), "session_id": session}

    def _cli_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _layers(self, stop_hook: HookMatcher | None = None) -> list[Layer]:
        """The layers of a session, in the order their hooks run."""
        layers: list[Layer] = []
        if self.workbench is not None:
            layers += [WorkbenchLayer(self.workbench, self.placement), Spill(self.workbench, self.spill_threshold)]
        if self.handoff_policy is not None:
            layers.append(Generations())
        if stop_hook is not None:
            layers.append(TurnStop(stop_hook))
        layers.append(Walls())
        layers.append(Checkpoints(self.checkpoints))
        return layers

    def _first_message(self, prompt: str) -> str:
        """A new session's first message: `prompt` with what the layers put in front of it."""
        for layer in self._layers():
            prompt = layer.first_message(prompt)
        return prompt

    def _options(self, spec: AgentSpec, resume: str | None, fork: bool,
                 stop_hook: HookMatcher | None, resume_at: str | None = None,
                 output_type: OutputType | None = None) -> ClaudeAgentOptions:
        part = fold(self._layers(stop_hook), spec)
        return build_options(
            spec, cwd=self.workspace, session_store=self.store, resume=resume, fork=fork, resume_at=resume_at,
            prelude=part.system,
            add_dirs=part.add_dirs, portable=self.portable, hooks=dict(part.hooks or {}),
            artifacts=part.artifacts, env={**self.env, **part.env}, output_type=output_type,
        )

    def _record(self, result: StepResult, spec: AgentSpec) -> None:
        where = {
            "workspace": str(self.workspace),
            "workbench": str(self.workbench.root) if self.workbench is not None else None,
            "threshold": self.threshold(spec),
            "policies": self._policies,
            "window": self.window(spec),
            "model": self._model,
        }
        append_manifest(self.run_dir, {"run_id": self.run_id, **result.to_dict(), **where})


def rewrite_policies(store: object) -> dict[str, Any]:
    """The rewrites a store applies on load, as plain data for the manifest (so `flower preview` shows
    exactly what this run's next resume would do)."""
    trim, ephemeral = getattr(store, "trim_policy", None), getattr(store, "ephemeral_policy", None)
    return {
        "trim": {"keep_recent": trim.keep_recent, "min_chars": trim.min_chars} if trim else None,
        "ephemeral": {"keep_recent": ephemeral.keep_recent} if ephemeral else None,
        "keep_denials": getattr(store, "keep_denials", 1),
        "stages": list(getattr(store, "stages", ())),
    }

