"""Serving `flower web`: the bind rule first, then uvicorn on a socket bound here (so `--port 0` works and
the address printed is the one listened on).

Invariant: nothing is bound before `guard.check_bind` passed; the printed address carries the token when
there is one (the page's first request sets its cookie from it).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import quote

from flower.errors import ConfigError
from flower.web.app import create_app
from flower.web.guard import check_bind
from flower.web.source import Source

__all__ = ["serve"]


def _bound(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)  # listening before the address is printed: an early browser waits, is not refused
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve(source: Source, *, host: str = "127.0.0.1", port: int = 8420, token: str | None = None,
          say: Callable[[str], None] = print, interval: float = 1.0) -> None:
    """Serve until stopped (Ctrl-C, SIGTERM)."""
    import uvicorn

    check_bind(host, token)
    sock = _bound(host, port)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{sock.getsockname()[1]}/" + (f"?token={quote(token)}" if token else "")
    app = create_app(source, host=host, token=token, interval=interval)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    say(f"flower web: {address} (runs of {source.label}; Ctrl-C to stop)")
    server.run(sockets=[sock])
