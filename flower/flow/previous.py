"""What a start of a workflow finds of its earlier runs in the same run dir (L-7, issue #26 item 4).

Running the same workflow (the same name and initial context; for an AgentSpec target, the same prompt) in
the same workspace and run dir again:

- continues the latest run when it is unfinished;
- refuses, in one line saying how the latest run ended and its id, when it finished, failed or was
  cancelled: a finished run is never started over silently (`new=True` / `--new` does that);
- refuses when the run dir holds a run its system database does not know: a lost SQLite write-ahead log
  (`dbos.sqlite-wal` deleted, or a run dir copied without it) drops the newest records, and a fresh run
  would repeat every step that run had finished. The run dir's own files say what was there: the run's
  lock file (`locks/RUN.lock`, made when the run started) and its manifest rows.

A run recorded for another workspace (a copied or moved directory) is left alone: a one-line notice when it
is unfinished, and a fresh run starts.

A failed run is woken only when asked by name (`flower resume RUN`, or `flower go` waking its workspace's
run, issue #26 item 7): DBOS forks it into a new run (`fork_workflow`) that keeps the checkpoints recorded
before `retry_from(...)` and runs again from there, so its finished steps are replayed, never repeated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dbos import DBOS

from flower.agent.events import Event, OnEvent, emit
from flower.errors import FlowError, RunEnded
from flower.flow.isolation import safe_name
from flower.util.oneline import first_line

__all__ = ["ended", "failed", "lost_runs", "previous", "refuse_lost", "retry_from"]

RUN_WORKFLOW = "flower.run"
UNFINISHED = ("PENDING", "ENQUEUED")


def ended(run_id: str, status: str, output: Any = None, error: Any = None, *, name: str | None = None
          ) -> RunEnded | None:
    """Why a run with this DBOS status (and output) is not continued, as the error to raise; None when it
    can be. A cancelled run stays stopped for good: cancelling it was the user's decision."""
    run = f"run {run_id}" + (f" of {name}" if name else "")
    hint = "flower run --new starts a fresh run"
    retry = f"flower resume {run_id} retries its failed step; " + hint
    if status == "CANCELLED":
        return RunEnded(f"{run} was cancelled: a cancelled run stays stopped ({hint})", run_id=run_id,
                        state="cancelled")
    failed_at = output.get("_failed_at") if isinstance(output, dict) else None
    if status == "SUCCESS" and not failed_at:
        return RunEnded(f"{run} has already finished: nothing to continue ({hint})", run_id=run_id,
                        state="finished")
    if status == "SUCCESS" or status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        why = f" at step {failed_at}" if failed_at else (f": {first_line(error)}" if error else "")
        return RunEnded(f"{run} failed{why}: nothing to continue ({retry})", run_id=run_id, state="failed")
    return None


def failed(status: str, output: Any) -> bool:
    """A run with this DBOS status and output ended failed: a step stopped it, or the workflow raised."""
    stopped = isinstance(output, dict) and bool(output.get("_failed_at"))
    return (status == "SUCCESS" and stopped) or status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


def _name(row: Any) -> str:
    return str(row.get("function_name") or "")


def retry_from(steps: list[Any]) -> int:
    """The DBOS step id a failed run is forked from (its checkpoints before it are kept): a checkpoint that
    raised; else, within the step that stopped the run, its last agent attempt when that attempt failed, or
    what followed it (the gate that said stop); else the first step after the last one that settled."""
    rows = sorted(steps, key=lambda row: int(row["function_id"]))
    for row in rows:
        if row.get("error") is not None:
            return int(row["function_id"])
    start, stop = 1, None
    for row in rows:
        if _name(row).startswith("settle:"):
            output = row.get("output")
            if isinstance(output, dict) and output.get("_failed_at"):
                stop = int(row["function_id"])
                break
            start = int(row["function_id"]) + 1
    if stop is None:
        return start
    attempts = [row for row in rows if start <= int(row["function_id"]) < stop and _name(row).startswith("agent:")]
    if not attempts:
        return start
    last = attempts[-1]
    return int(last["function_id"]) + (0 if not getattr(last.get("output"), "ok", False) else 1)


def _meta(row: Any) -> dict[str, Any]:
    given: Any = row.input or {}
    args: Any = given.get("args") or ({},)
    return args[0] if args and isinstance(args[0], dict) else {}


async def previous(name: str, workspace: Path, context: dict[str, Any], on_event: OnEvent | None) -> str | None:
    """The run to continue: the latest run of this workflow in this workspace with the same initial context,
    when it is unfinished. `RunEnded` when that run ended; None when there is none."""
    rows = await DBOS.list_workflows_async(name=RUN_WORKFLOW, sort_desc=True, load_output=True)
    for row in rows:
        meta = _meta(row)
        if meta.get("workflow") != name or meta.get("context", {}) != context:
            continue
        status = str(row.status)
        if meta.get("workspace") == str(workspace):
            refused = ended(str(row.workflow_id), status, row.output, row.error, name=name)
            if refused is not None:
                raise refused
            return str(row.workflow_id)
        if status in UNFINISHED:
            emit(on_event, Event("system", f"run {row.workflow_id} of {name} belongs to {meta.get('workspace')}; "
                                           f"starting a fresh run in {workspace}",
                                 payload={"subtype": "workflow"}))
            return None
    return None


async def lost_runs(run_dir: Path) -> list[str]:
    """The runs this run dir started (their lock files) that its system database does not know."""
    folder = run_dir / "locks"
    if not folder.is_dir():
        return []
    stems = sorted(p.stem for p in folder.glob("*.lock"))
    if not stems:
        return []
    known = await DBOS.list_workflows_async(name=RUN_WORKFLOW, load_input=False, load_output=False)
    names = {safe_name(str(row.workflow_id)) for row in known}
    return [stem for stem in stems if stem not in names]


def _steps(run_dir: Path, run_id: str) -> list[str]:
    """The steps the manifest recorded for a run (nothing when it cannot be read)."""
    try:
        rows = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("steps", [])
        return [str(r.get("step")) for r in rows if isinstance(r, dict) and r.get("run_id") == run_id]
    except (OSError, ValueError, AttributeError):
        return []


def refuse_lost(run_dir: Path, database: str, lost: list[str]) -> FlowError:
    """The one line that says what the run dir holds that the system database lost."""
    run = lost[-1]
    steps = _steps(run_dir, run)
    did = f" with {len(steps)} recorded step(s) ({', '.join(steps[:5])})" if steps else ""
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return FlowError(f"{run_dir} holds run {run}{did}{more} (its lock file in {run_dir / 'locks'}), but {database} "
                     f"does not know it: its newest records were lost (a deleted or uncopied dbos.sqlite-wal?). "
                     "Not starting a fresh run that would repeat its steps: --new starts one")
