"""The runs list of `flower web`: every run of a source as plain data, for the page and its live stream.

A row is `flower runs`'s row (`flower.flow.runs.list_runs`: state, steps done / total, cost of the finished
attempts) plus the main thread's context now and the questions waiting on the run (`flower asks`'s
`pending_questions` over the same mailbox). The context of a finished step comes from its manifest row; of
a step in flight, from its session's stored transcript, found through the session the attempt recorded.

Invariants: pure reading (see `flower.web.source`); the result is JSON-ready, and two reads of an unchanged
source give equal results (the live stream sends only what changed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flower.web.source import Source

__all__ = ["question_json", "run_rows", "runs_view", "session_context"]


def question_json(question: Any) -> dict[str, Any]:
    return {"run": question.run, "id": question.id, "question": question.question,
            "options": list(question.options), "asked_at": question.asked_at}


def session_context(source: Source, session: str) -> int | None:
    """The main thread's context (tokens) at the session's last API message, from the store."""
    from flower.report.analysis import analyze
    from flower.report.rundata import load_session

    with source.session_store() as base:
        try:
            data = load_session(session, base, source.run_dir if source.run_dir.is_dir() else None)
        except Exception:  # noqa: BLE001 - a session the CLI has not stored yet has no context to show
            return None
    contexts = analyze(data.main).contexts
    return contexts[-1] if contexts else None


def _manifest(source: Source) -> list[dict[str, Any]]:
    from flower.report.rundata import read_manifest

    return read_manifest(source.run_dir if source.run_dir.is_dir() else None)


def _context_now(source: Source, run: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> int | None:
    mine = [row for row in rows if row.get("run_id") == run["run_id"]]
    if run["state"] == "running":
        done = {row.get("session_id") for row in mine}
        flying = [s["session_id"] for s in source.stream_sessions(run["run_id"]) if s["session_id"] not in done]
        if flying:
            return session_context(source, str(flying[-1]))
    recorded = [row.get("context") for row in mine if isinstance(row.get("context"), int)]
    return recorded[-1] if recorded else None


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
        run["context"] = _context_now(source, run, manifest)
        run["questions"] = [q for q in waiting if q["run"] == run["run_id"]]
        runs.append(run)
    return {"source": source.label, "runs": runs, "questions": waiting}
