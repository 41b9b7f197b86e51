"""Who may use `flower web`: the bind rule, the token, and what a request must carry.

- Bound to a loopback address, the app needs no token; any other bind needs one (`check_bind`), since the
  page can answer a run's questions and cancel it.
- With a token, every request carries it: once as `?token=...` (the address printed at start), which sets
  an HttpOnly cookie for the rest, or as `Authorization: Bearer ...`. Compared in constant time.
- A request must name a host the server is bound as (a page of another site that rebinds its name to
  127.0.0.1 is refused), and an action (POST) must carry the `X-Flower` header, which a page of another
  origin cannot send without a preflight the app never grants.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from flower.errors import ConfigError

__all__ = ["ACTION_HEADER", "COOKIE", "LOOPBACK", "Guard", "check_bind"]

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
COOKIE = "flower_web_token"
ACTION_HEADER = "x-flower"
Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def check_bind(host: str, token: str | None) -> None:
    """One line when a non-loopback bind has no token."""
    if host not in LOOPBACK and not token:
        raise ConfigError(f"flower web binds 127.0.0.1 unless told otherwise: --host {host} needs --token TOKEN "
                          "(anyone who reaches the page can answer and cancel runs)")


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """ASGI middleware enforcing the rules of the module docstring."""

    def __init__(self, app: ASGIApp, *, host: str, token: str | None) -> None:
        self.app, self.token = app, token
        self.hosts = LOOPBACK | {host}

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [""])[0]
        if _hostname(headers.get("host", "")) not in self.hosts:
            await _refuse(send, 421, "this server does not answer to that host name")
        elif self.token and not self._authorized(headers, given):
            await _refuse(send, 401, "flower web needs its token: open the address it printed at start")
        elif scope["method"] not in ("GET", "HEAD") and headers.get(ACTION_HEADER) != "1":
            await _refuse(send, 403, "an action needs the X-Flower header (sent by the page)")
        elif self.token and given:
            await self.app(scope, receive, _with_cookie(send, self.token))
        else:
            await self.app(scope, receive, send)

    def _authorized(self, headers: dict[str, str], given: str) -> bool:
        assert self.token is not None
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        candidates = [given, cookie[COOKIE].value if COOKIE in cookie else "",
                      headers.get("authorization", "").removeprefix("Bearer ").strip()]
        return any(c and hmac.compare_digest(c.encode(), self.token.encode()) for c in candidates)


def _with_cookie(send: Callable[[Any], Awaitable[None]], token: str) -> Callable[[Any], Awaitable[None]]:
    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            value = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
            message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", value.encode())]}
        await send(message)

    return sending


async def _refuse(send: Callable[[Any], Awaitable[None]], status: int, why: str) -> None:
    body = f"flower web: {why}\n".encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
