"""The runs list of `flower web`: every run of a source as plain data, for the page and its live stream.

A row is `flower runs`'s row (`flower.flow.runs.list_runs`: state, steps done / total, cost of the finished
attempts) plus the main thread's context now and the questions waiting on the run (`flower asks`'s
`pending_questions` over the same mailbox). The context of a finished step comes from its manifest row; of
a step in flight, from its session's stored transcript, found through the session the attempt recorded,
and what that session has cost so far is added to the run's cost; `machines` names who runs the attempts
in flight (the DBOS executor of the run or of its parallel branch: on a fleet, a worker's `--id`).

Invariants: pure reading (see `flower.web.source`); the result is JSON-ready, and two reads of an unchanged
source give equal results (the live stream sends only what changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flower.web.source import Source

__all__ = ["in_flight", "question_json", "run_rows", "runs_view", "session_now"]


def question_json(question: Any) -> dict[str, Any]:
    return {"run": question.run, "id": question.id, "question": question.question,
            "options": list(question.options), "asked_at": question.asked_at}


def session_now(source: Source, session: str) -> tuple[int | None, float]:
    """A session in flight, from the store: the main thread's context (tokens) at its last API message, and
    what its API messages (its workers' included) cost so far, priced as `flower report --by` prices them."""
    from flower.errors import FlowerError
    from flower.report.analysis import analyze
    from flower.report.breakdown import breakdown
    from flower.report.rundata import load_session

    with source.session_store() as base:
        try:
            data = load_session(session, base, source.run_dir if source.run_dir.is_dir() else None)
        except FlowerError:  # recorded, but the CLI has stored nothing of it yet
            return None, 0.0
    contexts = analyze(data.main).contexts
    return (contexts[-1] if contexts else None), breakdown(data, "worker")[-1].cost_usd


def in_flight(records: Sequence[Mapping[str, Any]], run_id: str, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The recorded sessions (`Source.stream_sessions`) no manifest row of the run names yet: in flight."""
    done = {s for row in rows if row.get("run_id") == run_id
            for s in [row.get("session_id"), *(row.get("retired") or [])]}
    return list({r["session_id"]: r for r in records if r["session_id"] not in done}.values())


def _manifest(source: Source) -> list[dict[str, Any]]:
    from flower.report.rundata import read_manifest

    return read_manifest(source.run_dir if source.run_dir.is_dir() else None)


def _now(source: Source, run: dict[str, Any], rows: Sequence[Mapping[str, Any]]) -> None:
    """Set the run's context now, and add what its attempts in flight have cost so far to its cost."""
    mine = [row for row in rows if row.get("run_id") == run["run_id"]]
    recorded = [row.get("context") for row in mine if isinstance(row.get("context"), int)]
    run["context"], run["machines"] = (recorded[-1] if recorded else None), []
    if run["state"] != "running":
        return
    for record in in_flight(source.stream_sessions(run["run_id"]), run["run_id"], mine):
        context, cost = session_now(source, str(record["session_id"]))
        run["context"] = context if context is not None else run["context"]
        run["cost_usd"] = round(run["cost_usd"] + cost, 6)
        if record.get("machine") and record["machine"] not in run["machines"]:
            run["machines"].append(record["machine"])


def run_rows(source: Source) -> list[dict[str, Any]]:
    """`flower runs --json`'s rows of the source, oldest first."""
    from flower.flow.runs import list_runs

    return [row.as_dict() for row in list_runs(source.run_dir, source.store)]


def runs_view(source: Source) -> dict[str, Any]:
    """Every run with its context now and waiting questions; `questions` holds every waiting question of
    the mailbox (a channel given its own run key belongs to no run row, and is answered from here)."""
    from flower.human.mailbox import pending_questions

    waiting = [question_json(q) for q in pending_questions(source.letters())]
    manifest = _manifest(source)
    runs = []
    for run in run_rows(source):
        _now(source, run, manifest)
        run["questions"] = [q for q in waiting if q["run"] == run["run_id"]]
        runs.append(run)
    return {"source": source.label, "runs": runs, "questions": waiting}
