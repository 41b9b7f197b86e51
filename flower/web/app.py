"""The Starlette app of `flower web`: two pages, their live streams, and the steering actions.

    GET  /                         the runs list          GET /events                 its stream
    GET  /runs/RUN                 one run (404 page)     GET /runs/RUN/events        its stream (?session=)
    GET  /api/runs, /api/runs/RUN  the same data once, as JSON
    POST /api/answer               {"qid", "text", "decline", "run"}: answer or decline a waiting question
    POST /api/runs/RUN/say         {"text"}: mail for the run's inbox
    POST /api/runs/RUN/cancel      cancel the run
    POST /api/runs/RUN/interrupt   {"text"}: stop the turn at the next tool boundary, resume with the remark
    POST /api/runs/RUN/handoff     {"text"}: hand over at the next tool boundary, the text as the focus

Invariants:
- A stream reads the source every `interval` seconds (in a worker thread: the readers block) and sends
  an event only when what it read changed; a read that fails sends one `problem` line and the stream goes on.
- An action answers `{"ok": true, "message": ...}` with the line the CLI would print, or
  `{"ok": false, "message": ...}` with the line it would refuse with (status 400; an unknown run 404).
- Every HTML response carries `page.POLICY`; the guard (`flower.web.guard`) wraps the whole app.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from flower.errors import FlowerError
from flower.util.oneline import first_line
from flower.web import page, steer
from flower.web.detail import UnknownRun, run_view
from flower.web.guard import Guard
from flower.web.runs import run_rows, runs_view
from flower.web.source import Source

__all__ = ["create_app"]

_TYPES = {"web.js": "text/javascript; charset=utf-8", "web.css": "text/css; charset=utf-8"}


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={"content-security-policy": page.POLICY,
                                                           "x-content-type-options": "nosniff"})


async def _read(work: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(work)


def _stream(read: Callable[[], dict[str, Any]], event: str, interval: float) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, str]]:
        last = None
        while True:
            try:
                data = json.dumps(await _read(read), default=str, ensure_ascii=False)
                kind = event
            except Exception as exc:  # noqa: BLE001 - a store that fails mid-run is one line on the page
                data, kind = json.dumps({"message": first_line(exc)}), "problem"
            if data != last:
                yield {"event": kind, "data": data}
                last = data
            await anyio.sleep(interval)

    return EventSourceResponse(events(), ping=15, headers={"cache-control": "no-store"})


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise HTTPException(400, "the action's body must be a JSON object")
    return body


async def _reply(work: Callable[[], str]) -> JSONResponse:
    """Run an action in a worker thread: its line, or the line it refused with."""
    try:
        message = await _read(work)
    except UnknownRun as exc:
        return JSONResponse({"ok": False, "message": first_line(exc)}, status_code=404)
    except FlowerError as exc:
        return JSONResponse({"ok": False, "message": first_line(exc)}, status_code=400)
    return JSONResponse({"ok": True, "message": message})


def create_app(source: Source, *, host: str = "127.0.0.1", token: str | None = None,
               interval: float = 1.0) -> Any:
    """The app over `source`, wrapped in its guard."""

    def known(run_id: str) -> None:
        if not any(row["run_id"] == run_id for row in run_rows(source)):
            raise UnknownRun(f"unknown run {run_id}")

    async def home(request: Request) -> Response:
        return _html(page.runs_page(source.label))

    async def one_run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            await _read(lambda: known(run_id))
        except UnknownRun as exc:
            return _html(page.not_found_page(first_line(exc)), 404)
        return _html(page.run_page(run_id))

    async def runs_events(request: Request) -> Response:
        return _stream(lambda: runs_view(source), "runs", interval)

    async def run_events(request: Request) -> Response:
        run_id, session = request.path_params["run_id"], request.query_params.get("session") or None
        try:
            await _read(lambda: known(run_id))
        except UnknownRun as exc:
            return JSONResponse({"ok": False, "message": first_line(exc)}, status_code=404)
        return _stream(lambda: run_view(source, run_id, session=session), "run", interval)

    async def runs_json(request: Request) -> Response:
        return JSONResponse(await _read(lambda: runs_view(source)))

    async def run_json(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            return JSONResponse(json.loads(json.dumps(await _read(lambda: run_view(source, run_id)), default=str)))
        except UnknownRun as exc:
            return JSONResponse({"ok": False, "message": first_line(exc)}, status_code=404)

    async def answer(request: Request) -> Response:
        body = await _body(request)
        run = body.get("run")
        return await _reply(lambda: steer.answer(source, str(body.get("qid", "")), str(body.get("text", "")),
                                                 decline=bool(body.get("decline")),
                                                 run=run if isinstance(run, str) else None))

    async def say(request: Request) -> Response:
        run_id, body = request.path_params["run_id"], await _body(request)

        def work() -> str:
            known(run_id)
            return steer.say(source, run_id, str(body.get("text", "")))

        return await _reply(work)

    async def steering(request: Request) -> Response:
        run_id, body = request.path_params["run_id"], await _body(request)
        handoff = request.url.path.endswith("/handoff")

        def work() -> str:
            known(run_id)
            return steer.steer_run(source, run_id, "handoff" if handoff else "interrupt", str(body.get("text", "")))

        return await _reply(work)

    async def cancel(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return await _reply(lambda: steer.cancel(source, run_id))

    async def static(request: Request) -> Response:
        name = request.url.path.lstrip("/")
        return Response(page.asset(name), media_type=_TYPES[name], headers={"cache-control": "no-cache"})

    async def missing(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        if request.url.path.startswith("/api/"):
            return JSONResponse({"ok": False, "message": getattr(exc, "detail", "not found")}, status_code=status)
        return _html(page.not_found_page(f"no page at {request.url.path}"), 404)

    routes = [
        Route("/", home), Route("/events", runs_events), Route("/api/runs", runs_json),
        Route("/api/answer", answer, methods=["POST"]),
        Route("/runs/{run_id}", one_run), Route("/runs/{run_id}/events", run_events),
        Route("/api/runs/{run_id}", run_json), Route("/api/runs/{run_id}/say", say, methods=["POST"]),
        Route("/api/runs/{run_id}/cancel", cancel, methods=["POST"]),
        Route("/api/runs/{run_id}/interrupt", steering, methods=["POST"]),
        Route("/api/runs/{run_id}/handoff", steering, methods=["POST"]),
        *(Route(f"/{name}", static) for name in _TYPES),
    ]
    app = Starlette(routes=routes, exception_handlers={404: missing, 400: missing, 405: missing})
    return Guard(app, host=host, token=token)
