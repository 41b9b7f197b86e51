"""The DBOS executor: flower's workflows as DBOS workflows and steps.

`Live` is the executor (`flower.flow.executor.Executor`) of one run in this process; the semantics it runs
are `flower.flow.execution`'s.

- A run is the DBOS workflow `flower.run` whose id is the run id. Its input is plain metadata (workflow
  name, workspace, run dir, source target, step count, the runtime's config as plain data); the `Workflow`
  object itself lives in this process (`_LIVE`), or is loaded from its source by a process that adopts the run
  (a fleet worker loads `FILE.py:ATTR` itself: a workflow, or a callable returning one), which runs it under
  that recorded config.
- Each agent attempt is a DBOS step (`agent:<label>`) whose checkpoint is the `StepResult`; gates, feedback
  and each step's context updates are checkpointed too (`gate:`, `feedback:`, `settle:`), so a replay after a
  crash reaches the same place without calling the model or the user's code again.
- The session id of an attempt is appended to the workflow's DBOS stream `flower.sessions` the instant the
  runtime reports it (each generation's). When DBOS runs an attempt again (its process died mid-step), the
  attempt resumes the last recorded session that has history (`Runtime.has_history` back-fills from the
  CLI's transcript first) with `texts.RESUME_AFTER_CRASH` (or the step's `resume_prompt`) instead of
  starting a fresh session: a generation killed before anything of it was written gives way to the one
  before it.
- Parallel steps are child workflows `flower.branch` on a DBOS queue `flower:<run>:<group>` with a global
  concurrency limit; any process on the same system database (`flower worker`) may take them. Results come
  back in order. The steps a worker holds when it goes silent are put back in their queue after its heartbeat
  timeout (`flower.flow.fleet`).
- A run is executed by one process at a time on a machine: a lock file in `run_dir/locks/` says which.
- A failed run continued by name (`run(..., run_id=...)`) is retried: DBOS forks it into a new run from its
  failed step (`flower.flow.previous.retry_from`); the checkpoints before it are copied, so its finished
  steps replay, and the failed attempt resumes its own session (read from the failed run's stream) with
  `texts.RESUME_AFTER_FAILURE`. A failed run is retried once: a second try names its retry. A failure in a
  parallel step is refused in one line (its branches would all run again).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID
from dbos import error as dbos_error
from filelock import FileLock, Timeout

from flower import texts
from flower.agent.events import Event, OnEvent, emit
from flower.agent.output import json_value
from flower.errors import ConfigError, FlowError, RunEnded
from flower.flow import engine, fleet
from flower.flow.execution import as_definition, execute, member
from flower.flow.executor import Attempt, Branch, Definition
from flower.flow.isolation import branch_runtime, safe_name
from flower.flow.previous import RUN_WORKFLOW, ended, failed, lost_runs, previous, refuse_lost, retry_from
from flower.runtime import child
from flower.runtime.config import RuntimeConfig
from flower.runtime.runtime import Runtime, new_run_id
from flower.runtime.steps import StepResult
from flower.stores.opening import StoreReader, open_store
from flower.util.loader import load_target
from flower.util.oneline import first_line
from flower.util.rundir import checked_path

__all__ = [
    "BRANCH_WORKFLOW",
    "RUN_WORKFLOW",
    "InFlight",
    "Live",
    "fence",
    "fenced",
    "live_runs",
    "load_source",
    "run",
    "run_lock_held",
    "set_worker",
    "unfence",
]

BRANCH_WORKFLOW = "flower.branch"
SESSIONS = "flower.sessions"


@dataclass
class InFlight:
    """An agent attempt running in this process right now (for signals and interrupts)."""

    step: str
    label: str
    session_id: str | None
    runtime: Runtime
    task: asyncio.Task[Any] | None = None
    """The task running it (on its event loop), so a fenced worker can stop it (`stop_inflight`)."""


@dataclass
class Live:
    """A run being executed (or helped along) by this process: the DBOS executor of its workflow."""

    workflow: Definition
    runtime: Runtime
    on_event: OnEvent | None
    run_id: str
    meta: dict[str, Any]
    """What the run recorded as its input (workflow name, workspace, run dir, source, total, context)."""
    recorded: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """Per DBOS workflow id: label -> the session ids recorded for it, in order (one per generation)."""
    retry_of: str | None = None
    """The failed run this run retries (a DBOS fork of it), whose failed attempt's session it resumes."""
    retried: set[str] = field(default_factory=set)
    """Labels whose session comes from `retry_of`'s record: their attempt failed there."""
    inflight: dict[str, InFlight] = field(default_factory=dict)

    async def checkpoint(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run `fn()` (sync or async) once as a DBOS step named `name`; a replay returns its recorded value."""

        async def body() -> Any:
            value = fn()
            if inspect.isawaitable(value):
                value = await value
            return value

        return await DBOS.run_step_async({"name": name}, body)

    async def agent(self, runtime: Runtime, attempt: Attempt) -> StepResult:
        """One agent attempt as a DBOS step; a re-run of an attempt that was in flight resumes its session."""

        async def body() -> StepResult:
            result = await _attempt(self, runtime, attempt)
            # recorded as plain JSON: a process that never loaded the user's model class can read the record
            return replace(result, output=json_value(result.output))

        # Preemptible: DBOS watches the run's status and cancels the attempt in flight when the run is
        # cancelled (`flower cancel`, from any process or machine), instead of letting it run to its end.
        result: StepResult = await DBOS.run_step_async({"name": f"agent:{attempt.label}", "preemptible": True},
                                                       body)
        return result

    async def branches(self, group: str, limit: int | None, branches: list[Branch]) -> list[dict[str, Any]]:
        """Each branch as a `flower.branch` child workflow through a DBOS queue; results in order."""
        name = f"flower:{self.run_id}:{group}"
        queue = await DBOS.register_queue_async(name, global_concurrency=limit)
        handles = []
        for branch in branches:
            payload = Branch(run_id=self.run_id, meta=self.meta, **branch)
            with SetWorkflowID(f"{self.run_id}/{branch['label']}"):
                handles.append(await queue.enqueue_async(_branch_workflow, payload))
        results = [await handle.get_result() for handle in handles]
        with contextlib.suppress(Exception):  # one worker thread per queue in every process: retire it
            await DBOS.delete_queue_async(name)
        return results


_LIVE: dict[str, Live] = {}
"""The runs of this process by run id: DBOS calls its workflow functions by name, and they find their run here."""
_WORKER: dict[str, Any] = {}


def live_runs() -> list[Live]:
    """The runs this process executes or helps with now."""
    return list(_LIVE.values())


_WORKER_STORES: list[Any] = []
"""The PostgreSQL session stores of the runs this worker adopted (`fence` stops their writes)."""
_FENCED = threading.Event()
"""Set while this fleet worker's lease has run out (`fence`): it starts no attempt and stores nothing."""


def fence() -> int:
    """This fleet worker's lease ran out (no heartbeat landed, `flower.flow.fleet`): its steps may run elsewhere
    by now, so end them here at once (thread-safe, without the event loop, which a hung database call may hold):
    no new attempt starts, no transcript is stored, every running attempt is cancelled and its CLI process
    group ended (its tool call with it). How many attempts were running."""
    _FENCED.set()
    for store in _WORKER_STORES:
        store.fenced = True
    stopped = 0
    for live in list(_LIVE.values()):
        for flight in list(live.inflight.values()):
            task = flight.task
            if task is not None and not task.done():
                with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                    task.get_loop().call_soon_threadsafe(task.cancel)
                stopped += 1
    child.end_mine(grace=1.0)
    return stopped


def unfence() -> None:
    """A heartbeat landed again: this worker takes steps again."""
    _FENCED.clear()
    for store in _WORKER_STORES:
        store.fenced = False


def fenced() -> bool:
    return _FENCED.is_set()


def set_worker(*, store: str | None, run_dir: str | os.PathLike[str]) -> None:
    """Settings a process uses for runs it adopts (a `flower worker`): its store and run dir."""
    _WORKER.update(store=store, run_dir=str(Path(run_dir).resolve()))


# --- the DBOS workflows ---------------------------------------------------------------------------


@DBOS.workflow(name=RUN_WORKFLOW)
async def _run_workflow(meta: dict[str, Any]) -> dict[str, Any]:
    run_id = DBOS.workflow_id
    assert run_id is not None
    live = _LIVE.get(run_id) or _adopt(run_id, meta)
    return await execute(live.workflow, live)


@DBOS.workflow(name=BRANCH_WORKFLOW)
async def _branch_workflow(payload: Branch) -> dict[str, Any]:
    live = _LIVE.get(payload["run_id"]) or _adopt(payload["run_id"], payload["meta"])
    step = live.workflow.find(payload["step"])
    runtime = branch_runtime(live, payload["label"], step.writes and payload.get("isolate", True))
    updates = await member(live.workflow, live, payload, runtime)
    current = engine.current()
    updates["_ran_by"] = {payload["label"]: current.executor_id if current else "?"}
    if runtime.workspace != live.runtime.workspace:
        updates["_workspaces"] = {payload["label"]: str(runtime.workspace)}
    return updates


# --- agent attempts -------------------------------------------------------------------------------


async def _recorded(live: Live, workflow_id: str) -> dict[str, list[str]]:
    """The sessions recorded for this workflow's attempts, per label in order (read once per process and
    workflow)."""
    if workflow_id not in live.recorded:
        found = await _read_sessions(workflow_id)
        if workflow_id == live.run_id and live.retry_of:
            earlier = await _read_sessions(live.retry_of)
            live.retried.update(label for label, sids in earlier.items()
                                if sids and (found.get(label) or [""])[-1] != sids[-1])
            found = {**earlier, **found}
        live.recorded[workflow_id] = found
    return live.recorded[workflow_id]


async def _read_sessions(workflow_id: str) -> dict[str, list[str]]:
    """A workflow's recorded sessions per label, in order (a session recorded again moves to the end)."""
    found: dict[str, list[str]] = {}
    with contextlib.suppress(dbos_error.DBOSStreamTimeoutError):
        async for value in DBOS.read_stream_async(
            workflow_id, SESSIONS, timeout_seconds=0.01, polling_interval_sec=0.005
        ):
            if isinstance(value, dict) and value.get("label") and value.get("session_id"):
                sessions = found.setdefault(str(value["label"]), [])
                sessions[:] = [s for s in sessions if s != value["session_id"]] + [str(value["session_id"])]
    return found


async def _resumable(live: Live, runtime: Runtime, label: str, sessions: list[str]) -> str | None:
    """The session a re-run attempt resumes: the last recorded one that has history. A session whose history
    is nowhere (killed in its first milliseconds) is dropped; an earlier generation's then continues, since a
    new generation that never began must not cost the step the work its predecessors did."""
    while sessions and not await runtime.has_history(sessions[-1]):
        gone = sessions.pop()
        then = f"resuming its previous session {sessions[-1]}" if sessions else "starting the step afresh"
        emit(live.on_event, Event("system", f"{label}: its session {gone} has no stored history; {then}",
                                  payload={"subtype": "workflow", "afresh": gone, "label": label}))
    return sessions[-1] if sessions else None


def _record_now(record: dict[str, str]) -> None:
    """Append to this step's workflow stream and wait until it is stored (callable inside the event loop)."""
    context = contextvars.copy_context()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            DBOS.write_stream(SESSIONS, record)
        except BaseException as exc:  # noqa: BLE001 - reported below, in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=context.run, args=(write,), name="flower-record-session")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


async def _attempt(live: Live, runtime: Runtime, attempt: Attempt) -> StepResult:
    """The body of an agent step: resume the attempt's recorded session if it has one, else start it."""
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    label = attempt.label
    sessions = (await _recorded(live, workflow_id)).setdefault(label, [])
    text, session, branch = attempt.prompt, attempt.resume, attempt.fork
    earlier = await _resumable(live, runtime, label, sessions)
    if earlier is not None:
        again = texts.RESUME_AFTER_FAILURE if label in live.retried else texts.RESUME_AFTER_CRASH
        text, session, branch = attempt.resume_prompt or again, earlier, False
        if label in live.retried:  # this run's own record: a crash of the retry resumes the same session
            _record_now({"step": attempt.step, "label": label, "session_id": session})
            live.retried.discard(label)
        emit(live.on_event, Event("system", f"resuming {label} in its session {session}",
                                  payload={"subtype": "workflow", "resumed": session, "label": label}))
    elif session and not branch:
        _record_now({"step": attempt.step, "label": label, "session_id": session})
        sessions.append(session)
    if _FENCED.is_set():
        raise FlowError(f"{label}: this worker is cut off from the fleet's database; the step runs elsewhere")
    flight = InFlight(attempt.step, label, session, runtime, asyncio.current_task())
    live.inflight[label] = flight

    def on_event(event: Event) -> None:
        if event.kind == "system" and event.payload.get("subtype") == "session":
            sid = str(event.payload.get("session_id"))
            if not sessions or sessions[-1] != sid:
                _record_now({"step": attempt.step, "label": label, "session_id": sid})
                sessions[:] = [s for s in sessions if s != sid] + [sid]
        elif event.kind == "system" and event.payload.get("subtype") == "init" and event.payload.get("session_id"):
            # the CLI's first frame: the session began. The recorded id (above) may never begin, so the
            # interrupted row a signal writes names only a session with something stored (flower run -c)
            flight.session_id = str(event.payload["session_id"])
        emit(live.on_event, event)

    try:
        return await runtime.run(attempt.spec, text, step_name=label, resume=session, fork=branch,
                                 resume_at=attempt.resume_at if branch else None, on_event=on_event,
                                 output_type=attempt.output_type)
    finally:
        live.inflight.pop(label, None)


# --- adopting a run started elsewhere (fleet) -----------------------------------------------------


def load_source(source: str) -> Any:
    """The object named by `FILE.py:ATTR`: how another process finds a workflow (loaded once per process)."""
    path, sep, _ = source.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise ConfigError(f"workflow source {source!r} must look like FILE.py:ATTR")
    if not Path(path).is_file():
        raise ConfigError(f"workflow source {path} not found on this machine")
    value, _ = load_target(source, reuse=True)
    return value


def _adopt(run_id: str, meta: dict[str, Any]) -> Live:
    """Take up a run this process did not start: load its workflow from the recorded source."""
    source = meta.get("source")
    if not source:
        raise FlowError(f"run {run_id} was started from Python without a source; only its own process can run it")
    workflow = as_definition(load_source(str(source)), str(source))
    store_url = _WORKER.get("store")
    store: StoreReader | None = None
    if store_url and engine.database_url(".", store_url).startswith("postgresql"):
        store = open_store(store_url)
        _WORKER_STORES.append(store)
    run_dir = meta.get("run_dir") if meta.get("run_dir") and Path(meta["run_dir"]).is_dir() else None
    workspace = Path(meta["workspace"])
    if not workspace.is_dir():
        raise FlowError(f"run {run_id}: workspace {workspace} does not exist on this machine")
    # The starter's settings, whatever this process's environment says; the run dir is this machine's
    # when the starter's does not exist here.
    config = RuntimeConfig.from_dict(meta.get("config") or {})
    config = replace(config, run_dir=str(run_dir or _WORKER.get("run_dir") or "runs"))
    runtime = Runtime(workspace, config=config, store=store, run_id=run_id)
    live = Live(workflow, runtime, None, run_id, meta)
    _LIVE[run_id] = live
    return live


# --- starting and continuing a run ----------------------------------------------------------------


@contextlib.contextmanager
def _run_lock(run_dir: Path, run_id: str) -> Iterator[None]:
    path = checked_path(run_dir / "locks" / f"{safe_name(run_id)}.lock", run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path, timeout=0)  # portable (no fcntl): `import flower.flow` works on Windows too
    try:
        lock.acquire()
    except Timeout:
        raise FlowError(f"run {run_id} is running in another process (lock {path})") from None
    try:
        yield
    finally:
        lock.release()


def run_lock_held(run_dir: Path, run_id: str) -> bool:
    """Another process on this machine is executing the run now."""
    path = checked_path(run_dir / "locks" / f"{safe_name(run_id)}.lock", run_dir)
    if not path.exists():
        return False
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return True
    lock.release()
    return False


def _fleet(current: engine.Engine) -> contextlib.AbstractContextManager[Any]:
    """On PostgreSQL the starter beats too, and releases the steps of workers that went silent."""
    if not current.postgres:
        return contextlib.nullcontext()
    return fleet.beating(current.url, current.executor_id, "starter")


def _notice(on_event: OnEvent | None, text: str) -> None:
    emit(on_event, Event("system", text, payload={"subtype": "workflow"}))


async def _continue(run_id: str) -> Any:
    """Put a stopped run (and the branches its dead process was running) back to work; the handle. A
    cancelled run is refused in one line."""
    found = await DBOS.list_workflows_async(workflow_ids=[run_id], load_input=False, load_output=False)
    if not found:
        raise FlowError(f"unknown run {run_id}")
    status = found[0]
    refused = ended(run_id, str(status.status))
    if refused is not None and refused.state == "cancelled":
        raise refused
    if status.status in ("PENDING", "ENQUEUED") and status.executor_id:
        children = await DBOS.list_workflows_async(workflow_id_prefix=f"{run_id}/", status=["PENDING"],
                                                   executor_id=status.executor_id, load_input=False,
                                                   load_output=False)
        for child in children:
            await DBOS.resume_workflow_async(child.workflow_id)
    if status.status in ("SUCCESS", "ERROR"):
        return await DBOS.retrieve_workflow_async(run_id)
    return await DBOS.resume_workflow_async(run_id)


async def _to_retry(run_id: str) -> tuple[str, int] | None:
    """Of a failed run: the step that stopped it and the DBOS step id to fork it from; None when it did not
    fail. One line when it was retried already (that retry is the run to continue)."""
    found = await DBOS.list_workflows_async(workflow_ids=[run_id], load_input=False, load_output=True)
    if not found or not failed(str(found[0].status), found[0].output):
        return None
    forks = await DBOS.list_workflows_async(forked_from=run_id, load_input=False, load_output=False)
    if forks:
        raise FlowError(f"run {run_id} failed and was retried as run {forks[-1].workflow_id}: continue that one")
    output = found[0].output
    where = str(output.get("_failed_at")) if isinstance(output, dict) and output.get("_failed_at") else None
    branches = await DBOS.list_workflows_async(workflow_id_prefix=f"{run_id}/", load_input=False, load_output=True)
    if any(failed(str(b.status), b.output) for b in branches):
        # Its branches are child workflows whose ids the retry could not keep: it would run them all again.
        raise FlowError(f"run {run_id} failed in parallel step {where or '?'}: a failed parallel step is not "
                        "retried (it would run its finished branches again); flower run --new starts over")
    steps = await DBOS.list_workflow_steps_async(run_id) or []
    return where or "its failing checkpoint", retry_from(list(steps))


async def _earlier(name: str, runtime: Runtime, context: dict[str, Any], on_event: OnEvent | None, *,
                   new: bool) -> str | None:
    """The unfinished run to continue (`flower.flow.previous`): refuses an ended one and, on SQLite, a run
    the system database lost; with `new`, a fresh run, and the lock files of lost runs are dropped."""
    current = engine.current()
    sqlite = current is not None and not current.postgres
    lost = await lost_runs(runtime.run_dir) if sqlite else []
    if new:
        for stem in lost:
            if not run_lock_held(runtime.run_dir, stem):
                with contextlib.suppress(OSError):
                    (runtime.run_dir / "locks" / f"{stem}.lock").unlink()
        return None
    found = await previous(name, runtime.workspace, context, on_event)
    if found is None and lost:
        raise refuse_lost(runtime.run_dir, current.where if current else "the system database", lost)
    return found


async def run(
    workflow: Definition,
    runtime: Runtime,
    *,
    on_event: OnEvent | None = None,
    store: str | None = None,
    source: str | None = None,
    run_id: str | None = None,
    new: bool = False,
    verbose: bool = False,
) -> dict[str, Any]:
    """Start a run of `workflow`, or continue its unfinished run in this workspace (or `run_id`)."""
    settings = runtime.config.to_dict(local=False)  # a setting that cannot travel stops the start here
    current = engine.launch(runtime.run_dir, store=store, verbose=verbose)
    meta: dict[str, Any] = {
        "workflow": workflow.name,
        "workspace": str(runtime.workspace),
        "run_dir": str(runtime.run_dir),
        "source": source,
        "total": workflow.total,
        "context": dict(workflow.context or {}),
        "config": settings,
    }
    if run_id is None:
        run_id = await _earlier(workflow.name, runtime, meta["context"], on_event, new=new)
    resuming = run_id is not None
    retry = await _to_retry(run_id) if run_id is not None else None
    failed_run = run_id if retry is not None else None
    if failed_run is not None:
        run_id = runtime.run_id if runtime.run_id != failed_run else new_run_id()
    run_id = run_id or runtime.run_id
    runtime.run_id = run_id
    with _run_lock(runtime.run_dir, run_id), _fleet(current):
        live = Live(workflow, runtime, on_event, run_id, meta, retry_of=failed_run)
        _LIVE[run_id] = live
        try:
            if retry is not None:
                _notice(on_event, f"run {failed_run} failed at {retry[0]}: retrying that step as run {run_id} "
                                  "(its finished steps are kept)")
                with SetWorkflowID(run_id):
                    handle = await DBOS.fork_workflow_async(str(failed_run), retry[1])
            elif resuming:
                _notice(on_event, f"continuing run {run_id}")
                handle = await _continue(run_id)
            else:
                with SetWorkflowID(run_id):
                    handle = await DBOS.start_workflow_async(_run_workflow, meta)
            result: dict[str, Any] = await handle.get_result()
        except dbos_error.DBOSAwaitedWorkflowCancelledError:
            # `flower cancel` while this process ran it: the step in flight was preempted (see `Live.agent`).
            raise RunEnded(f"run {run_id} was cancelled; it stays stopped, its finished steps stay recorded",
                           run_id=run_id, state="cancelled") from None
        except dbos_error.DBOSException as exc:
            # E.g. a run continued with a workflow whose steps changed since it was recorded: one line.
            raise FlowError(f"run {run_id} cannot continue: {first_line(exc)}") from None
        finally:
            _LIVE.pop(run_id, None)
    return result
