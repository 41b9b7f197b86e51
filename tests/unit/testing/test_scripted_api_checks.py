"""flower.testing fails loudly on a wrong script (issue #17 item 15): a bare string step, a tool the
session does not have, input keys the tool does not accept, and an exhausted script reported once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flower.errors import ScriptError
from flower.testing import ScriptedAPI, text, tool_use
from tests.support.scripted_http import USER, post

BASH = {"name": "Bash", "input_schema": {"type": "object", "additionalProperties": False,
                                         "properties": {"command": {}, "description": {}, "timeout": {}}}}


def body(**extra: Any) -> dict[str, Any]:
    return {"messages": [USER], "tools": [BASH], **extra}


def test_a_bare_string_step_is_a_clear_error() -> None:
    with pytest.raises(ScriptError, match=r"step 2 of the main script is a str, not a step .*write text\('done'\)"):
        ScriptedAPI([text("a"), "done"])  # type: ignore[list-item]
    with pytest.raises(ScriptError, match=r"subagent script 'SUB' is a string, not a list of steps"):
        ScriptedAPI(subagents={"SUB": "done"})  # type: ignore[dict-item]


def test_a_tool_the_session_does_not_have_fails_naming_the_step() -> None:
    api = ScriptedAPI([text("a"), tool_use("Reed", {"file_path": "x"})]).start()
    try:
        assert post(api, body())[0] == 200
        status, raw = post(api, body())
    finally:
        api.stop()
    message = json.loads(raw)["error"]["message"]
    assert status == 400 and "step 2 of thread main: tool_use 'Reed' names a tool" in message
    with pytest.raises(ScriptError, match=r"step 2 of thread main: .*'Reed'.*it has Bash"):
        api.assert_done()


def test_unknown_input_keys_fail_naming_the_step() -> None:
    api = ScriptedAPI([tool_use("Bash", {"cmd": "ls"})]).start()
    try:
        assert post(api, body())[0] == 400
    finally:
        api.stop()
    with pytest.raises(ScriptError, match=r"step 1 of thread main: .*input keys \['cmd'\].*accepts command"):
        api.assert_done()


def test_the_check_can_be_turned_off_and_needs_the_requests_tools() -> None:
    with ScriptedAPI([tool_use("Reed", {})], check_tools=False) as api:
        assert post(api, body())[0] == 200
    with ScriptedAPI([tool_use("Reed", {})]) as api:
        assert post(api, {"messages": [USER]})[0] == 200  # no tools offered: nothing to check against


def test_an_exhausted_script_is_reported_once_with_what_was_asked() -> None:
    api = ScriptedAPI([text("only one")]).start()
    try:
        post(api, body())
        for _ in range(3):  # the CLI retries a 400 with variants of the same request
            post(api, {"messages": [{"role": "user", "content": "PLEASE-DO-X"}]})
    finally:
        api.stop()
    (failure,) = api.failures
    assert failure.startswith("script exhausted for thread main at request 1: its 1 step(s) are used up")
    assert "the request asked: 'PLEASE-DO-X'" in failure and failure.endswith("[+2 more request(s) after it]")
