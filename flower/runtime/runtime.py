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

import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, SessionStore, project_key_for_directory

from flower.agent.events import Event, OnEvent, emit
from flower.agent.options import build_options, check_isolation
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.runtime import child
from flower.runtime.calibration import Windows
from flower.runtime.config import RuntimeConfig, RuntimeOptions
from flower.runtime.control import Steering
from flower.runtime.handoff import ContextMeter, HandoffPolicy, overflow_window
from flower.runtime.host import Step
from flower.runtime.layers import Generations, Layer, Spill, TurnStop, Walls, WorkbenchLayer, fold
from flower.runtime.loops import run_step
from flower.runtime.outcome import Outcome
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.resilience import RetryPolicy, endpoint_of
from flower.runtime.session import Session
from flower.runtime.steps import StepResult, append_manifest
from flower.runtime.stream import EventStream
from flower.runtime.tally import Tally
from flower.runtime.tracing import traced
from flower.stores._common import main_usages
from flower.util.rundir import checked_sqlite, make_run_dir
from flower.workbench.bench import Placement, Workbench

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Runtime", "StepResult", "append_manifest"]

_FIELDS = frozenset(f.name for f in fields(RuntimeConfig))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")  # orders steps finer than a second


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
        self.spill_threshold = cfg.spill_threshold
        self.handoff_policy: HandoffPolicy | None = cfg.handoff_policy()
        self._boundary: list[Callable[[], None]] = []
        self.refresh: RefreshPolicy | None = _policy(cfg.refresh, RefreshPolicy())
        self.retry: RetryPolicy | None = _policy(cfg.resilience, RetryPolicy())
        self.limit_wait = cfg.limit_wait
        self.portable = cfg.portable
        self.placement: Placement = cfg.placement
        self.env = dict(cfg.env)
        self.run_id = run_id or (datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
                                 + f"-{os.getpid()}-{secrets.token_hex(3)}")
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
        on_event: OnEvent | None = None,
    ) -> StepResult:
        """Run one step; model and API failures land in the result, never raise."""
        spec = self.config.apply(spec)  # the config's model where the spec names none; its budget caps
        name = step_name or spec.name
        started, clock = _now(), time.monotonic()
        self._steering.note = None  # an interrupt that arrived after the last step ended is void
        check_isolation(spec, self.workspace)
        if self.workbench is not None:
            self.workbench.refresh()
        self._bind_channel(spec)
        on_event = traced(on_event)  # spans from the events, when a tracer provider is configured
        self._end_orphans(on_event)
        emit(on_event, Event("step", name, payload={"phase": "start", "resume": resume, "agent_name": spec.name,
                                                    "model": spec.model, "run_id": self.run_id}))
        step = Step(spec, prompt, name, ContextMeter(), Tally(), on_event)
        if resume is not None:
            await self._seed(step.meter, resume)
        end = await run_step(self, step, resume, fork)
        tally, meter = step.tally, step.meter
        result = StepResult(
            step=name, session_id=end.session, ok=end.error is None and end.outcome.settled,
            cost_usd=round(tally.cost, 6), num_turns=tally.turns, text=end.outcome.text, error=end.error,
            errors=tuple(tally.errors), attempts=tally.attempts, resumed=resume is not None,
            retired=tuple(tally.retired), handoffs=tuple(tally.handoffs), refreshes=tally.refreshes,
            context=meter.current,
            contexts=tuple(meter.per_message[meter.seeded :]), retries=tuple(tally.retries), started=started, ended=_now(),
            duration=round(time.monotonic() - clock, 3), tool_errors=tally.tool_errors,
            tool_error_samples=tuple(tally.tool_error_samples), usage=dict(tally.usage),
            fallbacks=tuple(tally.fallbacks), cache_costs=tuple(tally.cache_costs),
        )
        self._record(result, spec)
        emit(on_event, Event("step", name, payload={"phase": "end", "ok": result.ok, "cost_usd": result.cost_usd,
                                                    "error": result.error, "turns": result.num_turns,
                                                    "session_id": result.session_id, "context": result.context}))
        return result

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
            entries = await self.store.load(self._key(session_id)) or []  # type: ignore[arg-type]
        except Exception:  # a store that cannot load: the resume itself reports it
            return
        for ident, model, usage in main_usages(entries):
            meter.observe(ident, usage, model)
        meter.seeded = len(meter.per_message)

    async def has_history(self, session_id: str) -> bool:
        """The store holds a prompt or a reply of this session: a resume of it has a conversation to continue
        (a process killed right after the session began leaves its id with nothing stored under it)."""
        try:
            entries = await self.store.load(self._key(session_id)) or []  # type: ignore[arg-type]
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

    def _end_orphans(self, on_event: OnEvent | None) -> None:
        """A CLI that a killed flower left running here would go on working in the session this step may
        resume: end it first (flower.runtime.child)."""
        for orphan in child.end_orphans(self.run_dir):
            emit(on_event, Event("system", f"ended the Claude Code CLI (pid {orphan.pid}) that a killed flower "
                                           f"(pid {orphan.parent}) left running",
                                 payload={"subtype": "orphan", "pid": orphan.pid, "parent": orphan.parent}))

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
        return layers

    def _first_message(self, prompt: str) -> str:
        """A new session's first message: `prompt` with what the layers put in front of it."""
        for layer in self._layers():
            prompt = layer.first_message(prompt)
        return prompt

    def _options(self, spec: AgentSpec, resume: str | None, fork: bool,
                 stop_hook: HookMatcher | None) -> ClaudeAgentOptions:
        part = fold(self._layers(stop_hook), spec)
        return build_options(
            spec, cwd=self.workspace, session_store=self.store, resume=resume, fork=fork, prelude=part.system,
            add_dirs=part.add_dirs, portable=self.portable, hooks=dict(part.hooks or {}),
            artifacts=part.artifacts, env={**self.env, **part.env},
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
        append_manifest(self.run_dir, {"run_id": self.run_id, **asdict(result), **where})


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

