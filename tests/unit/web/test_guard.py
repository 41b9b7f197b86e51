"""`flower web`'s guard: the bind rule, the token, the host and the action header (issue #29 item 5)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from flower.cli.app import cli
from flower.errors import ConfigError
from flower.web.guard import COOKIE, Guard, check_bind


def test_a_loopback_bind_needs_no_token_and_any_other_bind_does() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        check_bind(host, None)
    check_bind("0.0.0.0", "s3cret")
    with pytest.raises(ConfigError, match="--host 0.0.0.0 needs --token"):
        check_bind("0.0.0.0", None)


def test_the_command_refuses_a_public_bind_without_a_token_in_one_line(tmp_path: Any) -> None:
    done = CliRunner().invoke(cli, ["web", str(tmp_path), "--host", "0.0.0.0"], env={"FLOWER_WEB_TOKEN": None})
    assert done.exit_code == 1
    assert done.output.count("\n") == 1 and done.output.startswith("flower: flower web binds 127.0.0.1")


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def call(guard: Guard, method: str = "GET", *, host: str = "127.0.0.1:8420", query: str = "",
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    sent: list[dict[str, Any]] = []
    raw = [(k.encode(), v.encode()) for k, v in {"host": host, **(headers or {})}.items()]
    scope = {"type": "http", "method": method, "path": "/", "query_string": query.encode(), "headers": raw}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(guard, scope, receive, send)
    start = sent[0]
    return start["status"], {k.decode(): v.decode() for k, v in start.get("headers", [])}


def test_only_the_bound_host_names_are_answered() -> None:
    guard = Guard(_app, host="127.0.0.1", token=None)
    assert call(guard)[0] == 200
    assert call(guard, host="localhost:8420")[0] == 200
    assert call(guard, host="[::1]:8420")[0] == 200
    assert call(guard, host="evil.example:8420")[0] == 421  # a rebinding page's name


def test_an_action_needs_the_pages_header() -> None:
    guard = Guard(_app, host="127.0.0.1", token=None)
    assert call(guard, "POST")[0] == 403
    assert call(guard, "POST", headers={"x-flower": "1"})[0] == 200


def test_with_a_token_every_request_carries_it_and_the_first_sets_the_cookie() -> None:
    guard = Guard(_app, host="10.0.0.5", token="s3cret")
    assert call(guard, host="10.0.0.5:8420")[0] == 401
    assert call(guard, host="10.0.0.5:8420", query="token=wrong")[0] == 401
    status, headers = call(guard, host="10.0.0.5:8420", query="token=s3cret")
    assert status == 200 and headers["set-cookie"].startswith(f"{COOKIE}=s3cret; HttpOnly")
    assert call(guard, host="10.0.0.5:8420", headers={"cookie": f"{COOKIE}=s3cret"})[0] == 200
    assert call(guard, host="10.0.0.5:8420", headers={"authorization": "Bearer s3cret"})[0] == 200
    assert call(guard, host="10.0.0.5:8420", headers={"cookie": f"{COOKIE}=nope"})[0] == 401
