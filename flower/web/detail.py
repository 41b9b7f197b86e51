"""One run for `flower web`: its steps, sessions and generations, context curve, timeline, cost and log.

The run's sessions are the ones its manifest rows name (finished attempts: each generation it retired,
then its last session) and the ones its attempts recorded in the run's DBOS stream the instant they began
(the attempt in flight), each with the machine that ran it (its workflow's DBOS executor). Everything below is what `flower report` and `flower logs` compute from those
sessions: `flower.report.analysis` for the numbers, `flower.report.html`'s SVG charts for the context curve
(handoffs and new sessions marked) and the threads over time, `flower.report.breakdown` for cost by worker
and model, `flower.report.logs` for the log of one session, line for line as `flower logs --full` prints it.

Invariants: pure reading; an unknown run is `UnknownRun` (the app answers 404); the charts are built by
the report's own functions, which escape every text they draw, and every other text stays plain data for
the page to put in as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flower.errors import FlowerError
from flower.web.runs import in_flight, question_json, run_rows, session_now
from flower.web.source import Source

__all__ = ["UnknownRun", "run_view"]

_STEP_KEYS = ("step", "ok", "cost_usd", "num_turns", "context", "refreshes", "tool_errors", "started", "ended",
              "duration", "error", "attempts")
MAX_LOG = 400
"""The last this many log items of a session are sent (the page is for watching, `flower logs` has all)."""


class UnknownRun(FlowerError):
    """No run of that id in the source."""


def _sessions_of(row: Mapping[str, Any]) -> list[str]:
    retired = row.get("retired")
    ids = [*(retired if isinstance(retired, list) else []), row.get("session_id")]
    return [s for s in ids if isinstance(s, str) and s]


def _flight_state(record: Mapping[str, Any], running: bool) -> str:
    """The state of an attempt no manifest row here names: a parallel branch another machine ran writes
    its row in that machine's run dir, so its branch workflow's DBOS status says how it ended."""
    status = record.get("workflow_status")
    if status == "SUCCESS" and "/" in str(record.get("workflow_id")):  # a branch: `RUN/step[i]`
        return "done"
    if status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
        return "failed"
    return "running" if running and status in ("PENDING", "ENQUEUED") else "unfinished"


def _steps(rows: Sequence[Mapping[str, Any]], flying: Sequence[Mapping[str, Any]], running: bool) -> list[dict[str, Any]]:
    """One entry per attempt, in order: the finished ones from the manifest, then each recorded session
    no finished row names (in flight while the run runs, else left unfinished)."""
    steps: list[dict[str, Any]] = []
    for row in rows:
        step = {key: row.get(key) for key in _STEP_KEYS}
        step["state"] = "done" if row.get("ok") else str(row.get("state") or "failed")
        step["sessions"] = _sessions_of(row)
        step["handoffs"] = len(row.get("retired") or [])
        steps.append(step)
    where = {r["session_id"]: r for r in flying}
    for step in steps:
        first = next((where[s] for s in step["sessions"] if s in where), {})
        step["machine"], step["branch"] = first.get("machine"), first.get("workflow_id")
    known = {s for step in steps for s in step["sessions"]}
    for record in flying:
        if record["session_id"] not in known:
            known.add(record["session_id"])
            steps.append({"step": record.get("label") or record.get("step"), "ok": None,
                          "state": _flight_state(record, running), "sessions": [record["session_id"]],
                          "branch": record.get("workflow_id"), "machine": record.get("machine"), "handoffs": 0})
    return steps


def _load(source: Source, sessions: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Any:
    """The sessions as one `RunData` (their subagents included), in run order."""
    from flower.report.rundata import RunData, load_session

    data = RunData("run", source.run_dir, [dict(row) for row in rows])
    with source.session_store() as base:
        for session in sessions:
            try:
                one = load_session(session, base, source.run_dir if source.run_dir.is_dir() else None)
            except FlowerError:
                continue  # recorded, but the CLI has stored nothing of it yet
            data.main.update(one.main)
            data.keys.update(one.keys)
            data.subagents.update(one.subagents)
            if data.workbench_root is None:
                data.workspace, data.workbench_root = one.workspace, one.workbench_root
                data.workbench_source, data.spill_log = one.workbench_source, one.spill_log
    for row in rows:
        data.retired.update(s for s in (row.get("retired") or []) if isinstance(s, str))
    costs = [row["cost_usd"] for row in rows if isinstance(row.get("cost_usd"), (int, float))]
    data.cost_usd = float(sum(costs)) if costs else None
    return data


def _charts(data: Any) -> dict[str, Any]:
    from flower.report.analysis import analyze
    from flower.report.breakdown import breakdown, breakdown_json
    from flower.report.html import context_chart, timeline_chart
    from flower.report.rundata import recorded_threshold
    from flower.report.timeline import build_timeline

    report = analyze(data.main, data.subagents, retired=data.retired, threshold=recorded_threshold(data, None),
                     spill_log=data.spill_log, cost_usd=data.cost_usd, cache_costs=data.cache_costs)
    return {
        "context_svg": context_chart(report),
        "timeline_svg": timeline_chart(build_timeline(data)),
        "contexts": list(report.contexts),
        "generations": [{"session_id": g.session_id, "first_turn": g.first_turn, "kind": g.kind}
                        for g in report.generations],
        "threshold": report.threshold,
        "model": report.model,
        "tool_errors": {"main": report.main.tool_errors, "subagents": report.subagents.tool_errors},
        "spills": report.spills.count,
        "cost_by_worker": breakdown_json(breakdown(data, "worker"), "worker")["rows"],
        "cost_by_model": breakdown_json(breakdown(data, "model"), "model")["rows"],
    }


def _log(data: Any, session: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """The chosen session's conversation as `flower logs` builds it (the newest session by default)."""
    from flower.report.logs import conversation, item_lines
    from flower.report.rundata import RunData

    chosen = session if session in data.main else (list(data.main)[-1] if data.main else None)
    if chosen is None:
        return None, []
    one = RunData(chosen, data.run_dir, data.steps, main={chosen: data.main[chosen]}, keys=data.keys,
                  subagents=data.subagents, workspace=data.workspace)
    items = conversation(one)[-MAX_LOG:]
    return chosen, [{"kind": item.kind, "depth": item.depth, "time": item.time,
                     "lines": [{"text": text, "style": style} for text, style in item_lines(item, full=True)]}
                    for item in items]


def run_view(source: Source, run_id: str, *, session: str | None = None) -> dict[str, Any]:
    """Everything the run page shows, as plain data (the two charts as SVG the report drew)."""
    from flower.human.mailbox import pending_questions
    from flower.report.rundata import read_manifest

    every = run_rows(source)
    found = [row for row in every if row["run_id"] == run_id]
    if not found:
        raise UnknownRun(f"unknown run {run_id}")
    run = found[0]
    rows = [r for r in read_manifest(source.run_dir if source.run_dir.is_dir() else None)
            if r.get("run_id") == run_id]
    records = source.stream_sessions(run_id)
    steps = _steps(rows, records, run["state"] == "running")
    if run["state"] == "running":  # cost so far: the finished attempts' recorded cost, and the ones in flight
        run["cost_usd"] = round(run["cost_usd"] + sum(session_now(source, str(r["session_id"]))[1]
                                                      for r in in_flight(records, run_id, rows)), 6)
    sessions = list(dict.fromkeys(s for step in steps for s in step["sessions"]))
    data = _load(source, sessions, rows)
    chosen, log = _log(data, session)
    waiting = [question_json(q) for q in pending_questions(source.letters())]
    known = {row["run_id"] for row in every}
    return {
        "run": run, "steps": steps, "sessions": [s for s in sessions if s in data.main], "log_session": chosen,
        "log": log, "questions": [q for q in waiting if q["run"] == run_id or q["run"] not in known],
        **_charts(data),
    }
