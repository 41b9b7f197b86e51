"""The HTTP side of the scripted API: a threaded server on 127.0.0.1 and the request handler.

The handler records each request, asks its `Script` (the `ScriptedAPI`) for its step, and puts the step on
the wire: an SSE stream, a JSON message for `stream: false`, an error body, or a connection cut with RST.
The handler knows the scripted API only through the `Script` protocol, so this module imports nothing of
`flower.testing.server`.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Protocol

from flower.testing.replies import Drop, Error, Reply, Step, error_body, materialize, sse_events
from flower.testing.request import Request

__all__ = ["Script", "Server", "make_handler"]


class Script(Protocol):
    """What the handler asks of the scripted API behind it."""

    model: str
    _usages: dict[int, dict[str, int]]

    def _record(self, headers: Mapping[str, str], body: Mapping[str, Any], size: int) -> Request: ...

    def _next_step(self, request: Request) -> Step: ...

    def _cached_chars(self, request: Request) -> int: ...


class Server(ThreadingHTTPServer):
    """Tracks open client connections so that `stop()` ends kept-alive ones too: an outage, not a drain."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed CLI, a dropped connection) is normal here: say nothing. Anything
        else is printed as socketserver does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def drop_connections(self) -> None:
        with self._connections_lock:
            connections = list(self.open_connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    """One request of the scripted API: its subclass per `Script` (`make_handler`) names the API behind it."""

    api: ClassVar[Script]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet server
        return

    def do_GET(self) -> None:  # noqa: N802
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})

    do_HEAD = do_GET  # noqa: N815
    do_PUT = do_GET  # noqa: N815
    do_DELETE = do_GET  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if path == "/v1/messages/count_tokens":
            self._count_tokens(raw)
        elif path == "/v1/messages":
            self._messages(raw)
        else:
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})

    def _count_tokens(self, raw: bytes) -> None:
        self._json(200, {"input_tokens": max(1, len(raw) // 4)})

    def _messages(self, raw: bytes) -> None:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, error_body(Error(400, "request body is not valid JSON")))
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = self.api._record(headers, body, len(raw))
        step = self.api._next_step(request)
        if step.delay:
            time.sleep(step.delay)
        if isinstance(step, Error):
            self._json(step.status, error_body(step), request_id=f"req_fake_{request.index}", headers=step.headers)
        elif isinstance(step, Drop):
            self._drop(step, request)
        else:
            self._reply(step, request)

    def _reply(self, step: Reply, request: Request) -> None:
        usage = step.usage.resolve(request.size, self.api._cached_chars(request))
        self.api._usages[request.index] = usage
        message = materialize(step, str(request.body.get("model") or self.api.model), usage)
        if not request.stream:
            self._json(200, message, request_id=f"req_fake_{request.index}")
            return
        payload = b"".join(sse_events(message, step.chunk))
        self._sse_head(len(payload), request)
        self.wfile.write(payload)
        self.wfile.flush()

    def _drop(self, step: Drop, request: Request) -> None:
        usage = Reply(()).usage.resolve(request.size)
        message = materialize(Reply((), stop_reason="end_turn"), self.api.model, usage)
        events = list(sse_events(message, 40))[: step.after_events]
        self._sse_head(100_000, request)
        for event in events:
            self.wfile.write(event)
        self.wfile.flush()
        # RST instead of FIN: the client sees ECONNRESET, as on a real network drop.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True

    def _sse_head(self, length: int, request: Request) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", f"req_fake_{request.index}")
        self.send_header("content-length", str(length))
        self.end_headers()

    def _json(self, status: int, payload: Mapping[str, Any], request_id: str | None = None,
              headers: tuple[tuple[str, str], ...] = ()) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        if request_id:
            self.send_header("request-id", request_id)
        if status in (429, 529):
            self.send_header("retry-after", "0")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def make_handler(api: Script) -> type[BaseHTTPRequestHandler]:
    """The handler class for a server answering from `api`."""
    return type("_Handler", (_Handler,), {"api": api})
