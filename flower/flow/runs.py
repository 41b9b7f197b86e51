"""Reading and managing workflow runs from their system database, without executing anything (L-7).

States: `finished` (the workflow ended and no step stopped it), `failed` (a step failed with on_fail="stop",
or the workflow raised), `running` (a process on this machine holds the run's lock, or it is queued),
`interrupted` (not finished and nobody runs it: a crash, a kill, Ctrl-C twice), `cancelled`.
Steps done / total counts each Step (each parallel member) whose context updates are checkpointed.
On PostgreSQL an unfinished run names who holds its parallel steps in flight and when each last beat
(`flower.flow.fleet`), so a queue stalled by a dead worker says why.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flower.errors import FlowerError, FlowError, StoreError
from flower.flow import engine, fleet
from flower.flow.durable import RUN_WORKFLOW, run_lock_held
from flower.flow.fleet import Beat
from flower.util.oneline import first_line

if TYPE_CHECKING:
    from dbos import DBOSClient, WorkflowStatus

__all__ = ["RunRow", "cancel_run", "list_runs", "run_meta", "stall_reason"]


@dataclass(frozen=True)
class RunRow:
    run_id: str
    workflow: str
    state: str
    done: int
    total: int
    cost_usd: float
    workspace: str
    started: str
    failed_at: str | None = None
    error: str | None = None
    holders: tuple[dict[str, Any], ...] = ()
    """Of an unfinished fleet run: who holds its parallel steps in flight (executor, items, last heartbeat)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _meta(status: WorkflowStatus) -> dict[str, Any]:
    given: Any = status.input or {}
    args: Any = given.get("args") or ({},)
    return args[0] if args and isinstance(args[0], dict) else {}


def _when(epoch_ms: Any) -> str:
    if not epoch_ms:
        return ""
    return datetime.fromtimestamp(int(epoch_ms) / 1000, timezone.utc).isoformat(timespec="seconds")


def _state(status: WorkflowStatus, run_dir: Path, output: Any) -> str:
    if status.status == "SUCCESS":
        return "failed" if isinstance(output, dict) and output.get("_failed_at") else "finished"
    if status.status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        return "failed"
    if status.status == "CANCELLED":
        return "cancelled"
    if status.status == "ENQUEUED":
        return "running"
    return "running" if run_lock_held(run_dir, status.workflow_id) else "interrupted"


def _cost(client: DBOSClient, run_id: str, failed_at: str | None = None) -> tuple[int, float]:
    """Steps done (settled without an error, not the step the run failed at, whose failure is settled too) and
    the cost of every attempt of the run and its branches."""
    steps = client.list_workflow_steps(run_id) or []
    done = sum(1 for s in steps if str(s.get("function_name", "")).startswith("settle:") and not s.get("error")
               and s.get("function_name") != f"settle:{failed_at}")
    cost = 0.0
    ids = [run_id] + [c.workflow_id for c in client.list_workflows(workflow_id_prefix=f"{run_id}/",
                                                                    load_input=False, load_output=False)]
    for wid in ids:
        for step in steps if wid == run_id else client.list_workflow_steps(wid) or []:
            if str(step.get("function_name", "")).startswith("agent:"):
                cost += float(getattr(step.get("output"), "cost_usd", 0.0) or 0.0)
    return done, round(cost, 6)


def _holders(client: DBOSClient, run_id: str, beats: dict[str, Beat] | None) -> tuple[dict[str, Any], ...]:
    """The executors holding the run's parallel steps in flight, with their items and last heartbeat (fleet
    runs only: `beats` is None on SQLite)."""
    if beats is None:
        return ()
    items: dict[str, list[str]] = {}
    for child in client.list_workflows(workflow_id_prefix=f"{run_id}/", status=["PENDING"], load_input=False,
                                       load_output=False):
        items.setdefault(str(child.executor_id), []).append(child.workflow_id.split("/", 1)[1])
    holders = []
    for executor, labels in sorted(items.items()):
        beat = beats.get(executor)
        holders.append({"executor": executor, "items": labels, "role": beat.role if beat else None,
                        "heartbeat_s": round(beat.age_s, 1) if beat else None,
                        "timeout_s": beat.timeout_s if beat else None, "silent": beat is None or beat.silent})
    return tuple(holders)


def stall_reason(row: RunRow) -> str | None:
    """One line saying why an unfinished run's queue does not move: a holder that stopped beating."""
    silent = [h for h in row.holders if h["silent"]]
    if not silent:
        return None
    parts = []
    for h in silent:
        who = f"{h['role'] or 'executor'} {h['executor']}"
        if h["heartbeat_s"] is None:
            parts.append(f"{', '.join(h['items'])} held by {who}, which records no heartbeat")
            continue
        then = (f"its steps go back to the queue after {h['timeout_s']:g} s" if h["role"] == "worker"
                else "run `flower resume` to continue")
        if h["role"] == "worker" and h["heartbeat_s"] > h["timeout_s"]:
            then = "past its timeout: no live fleet process has released them yet"
        parts.append(f"{', '.join(h['items'])} held by {who}, last heartbeat {h['heartbeat_s']:.0f} s ago ({then})")
    return f"run {row.run_id} is stalled: " + "; ".join(parts)


def list_runs(run_dir: str | os.PathLike[str], store: str | None = None) -> list[RunRow]:
    """Every workflow run in the system database of this run dir (or store), oldest first."""
    client = engine.client(run_dir, store)
    if client is None:
        return []
    url = engine.database_url(run_dir, store)
    try:
        beats = fleet.heartbeats(url) if url.startswith("postgresql") else None
        return _rows(client, run_dir, beats)
    except FlowerError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged system database is one line naming it, not a traceback
        raise StoreError(f"cannot read runs from {engine.redact(url)}: {first_line(exc)}") from None
    finally:
        client.destroy()


def _rows(client: DBOSClient, run_dir: str | os.PathLike[str], beats: Any = None) -> list[RunRow]:
    """The rows of `list_runs`, oldest first; with the fleet's heartbeats, who holds a pending run's steps."""
    rows = []
    for status in client.list_workflows(name=RUN_WORKFLOW, load_input=True, load_output=True):
        meta = _meta(status)
        output = status.output if isinstance(status.output, dict) else None
        done, cost = _cost(client, status.workflow_id, output.get("_failed_at") if output else None)
        error = first_line(str(status.error)) if status.error else None
        rows.append(RunRow(
            run_id=status.workflow_id, workflow=str(meta.get("workflow", "?")),
            state=_state(status, Path(run_dir).resolve(), output), done=done, total=int(meta.get("total", 0)),
            cost_usd=cost, workspace=str(meta.get("workspace", "")), started=_when(status.created_at),
            failed_at=output.get("_failed_at") if output else None, error=error,
            holders=_holders(client, status.workflow_id, beats) if status.status == "PENDING" else (),
        ))
    return rows


@contextlib.contextmanager
def _found(run_dir: str | os.PathLike[str], store: str | None, run_id: str, *, load_input: bool,
           load_output: bool = False) -> Iterator[tuple[DBOSClient, WorkflowStatus]]:
    """A client of the run dir's (or store's) system database and the status of `run_id`; one line when
    there is no such run."""
    client = engine.client(run_dir, store)
    if client is None:
        raise FlowError(f"unknown run {run_id}: no runs in {Path(run_dir).resolve()}")
    try:
        found = client.list_workflows(workflow_ids=[run_id], name=RUN_WORKFLOW, load_input=load_input,
                                      load_output=load_output)
        if not found:
            raise FlowError(f"unknown run {run_id}")
        yield client, found[0]
    finally:
        client.destroy()


def run_meta(run_dir: str | os.PathLike[str], store: str | None, run_id: str) -> tuple[dict[str, Any], str, Any]:
    """The recorded metadata (workflow, workspace, source, ...), DBOS status and output of one run."""
    with _found(run_dir, store, run_id, load_input=True, load_output=True) as (_, status):
        return _meta(status), str(status.status), status.output


def cancel_run(run_dir: str | os.PathLike[str], store: str | None, run_id: str) -> str:
    """Cancel an unfinished run and its parallel branches; the state it had."""
    with _found(run_dir, store, run_id, load_input=False) as (client, found):
        status = str(found.status)
        if status in ("SUCCESS", "ERROR"):
            raise FlowError(f"run {run_id} has already ended ({'finished' if status == 'SUCCESS' else 'failed'})")
        children = client.list_workflows(workflow_id_prefix=f"{run_id}/", status=["PENDING", "ENQUEUED"],
                                         load_input=False, load_output=False)
        for child in children:
            client.cancel_workflow(child.workflow_id)
        client.cancel_workflow(run_id)
        return status
