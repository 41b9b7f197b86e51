"""Unit tests of flower.testing's fake API over raw HTTP (issue #2, B-8)."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from flower.errors import ScriptError
from flower.testing import (
    Drop,
    ScriptedAPI,
    Usage,
    api_error,
    prompt_too_long,
    request_problems,
    text,
    thinking,
    tool_use,
)
from tests.support.scripted_http import USER, post


def sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in raw.decode().strip().split("\n\n"):
        name, data = chunk.split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        events.append((name[7:], json.loads(data[6:])))
    return events


def test_stream_frames_text_thinking_and_tool_use_like_the_real_api() -> None:
    reply = thinking("ponder", "answer")
    with ScriptedAPI([reply, tool_use("Bash", {"command": "ls"}, ("Read", {"file_path": "a"}))]) as api:
        status, raw = post(api, {"model": "m", "stream": True, "messages": [USER]})
        assert status == 200
        events = sse(raw)
        names = [n for n, _ in events]
        assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
        deltas = [d["delta"]["type"] for n, d in events if n == "content_block_delta"]
        assert deltas == ["thinking_delta", "signature_delta", "text_delta"]
        assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
        _, raw = post(api, {"model": "m", "stream": True, "messages": [USER]})
        events = sse(raw)
        starts = [d["content_block"] for n, d in events if n == "content_block_start"]
        assert [b["name"] for b in starts] == ["Bash", "Read"] and starts[0]["id"] != starts[1]["id"]
        partial = "".join(d["delta"]["partial_json"] for n, d in events
                          if n == "content_block_delta" and d["index"] == 0)
        assert json.loads(partial) == {"command": "ls"}
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_non_streaming_answer_is_the_whole_message_with_set_usage() -> None:
    usage = Usage(input_tokens=1234, output_tokens=5, cache_read_input_tokens=70, cache_creation_input_tokens=9)
    with ScriptedAPI([text("plain", usage=usage), text("derived")]) as api:
        status, raw = post(api, {"model": "m", "stream": False, "messages": [USER]})
        message = json.loads(raw)
        assert status == 200 and message["content"] == [{"type": "text", "text": "plain"}]
        assert message["usage"] == {"input_tokens": 1234, "output_tokens": 5,
                                    "cache_read_input_tokens": 70, "cache_creation_input_tokens": 9}
        big = {"model": "m", "messages": [{"role": "user", "content": "x" * 8000}]}
        _, raw = post(api, big)
        assert json.loads(raw)["usage"]["input_tokens"] >= 2000


@pytest.mark.parametrize(("step", "status", "kind"), [
    (api_error(529), 529, "overloaded_error"),
    (api_error(500), 500, "api_error"),
    (api_error(429), 429, "rate_limit_error"),
    (api_error(401), 401, "authentication_error"),
    (prompt_too_long(), 400, "invalid_request_error"),
])
def test_error_bodies_have_the_real_shape(step: Any, status: int, kind: str) -> None:
    with ScriptedAPI([step]) as api:
        got, raw = post(api, {"model": "m", "messages": [USER]})
    body = json.loads(raw)
    assert got == status and body["type"] == "error" and body["error"]["type"] == kind
    assert body["error"]["message"]


def test_prompt_too_long_message_reads_like_the_api() -> None:
    with ScriptedAPI([prompt_too_long(1_050_000)]) as api:
        _, raw = post(api, {"model": "m", "messages": [USER]})
    assert json.loads(raw)["error"]["message"] == "prompt is too long: 1050000 tokens > 1000000 maximum"


def test_drop_cuts_the_connection_mid_stream() -> None:
    with ScriptedAPI([Drop(after_events=2)]) as api:
        conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
        conn.request("POST", "/v1/messages", json.dumps({"stream": True, "messages": [USER]}))
        response = conn.getresponse()
        with pytest.raises((http.client.IncompleteRead, ConnectionError)):
            response.read()


def test_exhausted_script_answers_400_and_fails_loudly() -> None:
    api = ScriptedAPI([text("only one")]).start()
    try:
        assert post(api, {"messages": [USER]})[0] == 200
        status, raw = post(api, {"messages": [USER]})
    finally:
        api.stop()
    assert status == 400 and "script exhausted for thread main" in json.loads(raw)["error"]["message"]
    with pytest.raises(ScriptError, match="script exhausted"):
        api.assert_done()


def test_unused_steps_fail_assert_done() -> None:
    api = ScriptedAPI([text("a"), text("b")], subagents={"MARK": [text("s")]}).start()
    post(api, {"messages": [USER]})
    api.stop()
    with pytest.raises(ScriptError, match=r"1 step\(s\) never used in thread main.*unclaimed subagent script 'MARK'"):
        api.assert_done()


def test_threads_are_split_by_agent_header_and_scripts_claimed_by_marker() -> None:
    api = ScriptedAPI([text("main-1")], subagents={"ALPHA": [text("a-1"), text("a-2")], "BETA": [text("b-1")]})
    with api:
        beta = {"messages": [{"role": "user", "content": "do BETA work"}]}
        alpha = {"messages": [{"role": "user", "content": "do ALPHA work"}]}
        answers = [
            json.loads(post(api, beta, headers={"x-claude-code-agent-id": "agent-b"})[1])["content"][0]["text"],
            json.loads(post(api, alpha, headers={"x-claude-code-agent-id": "agent-a"})[1])["content"][0]["text"],
            json.loads(post(api, {"messages": [USER]})[1])["content"][0]["text"],
            json.loads(post(api, beta, headers={"x-claude-code-agent-id": "agent-a"})[1])["content"][0]["text"],
        ]
    assert answers == ["b-1", "a-1", "main-1", "a-2"]
    assert api.subagent_ids == ["agent-b", "agent-a"] and [r.thread for r in api.main_requests] == ["main"]


def test_handler_sees_the_request_and_can_answer() -> None:
    def handler(request: Any) -> Any:
        return text(f"saw {len(request.messages)} message(s)") if "ECHO" in request.text else None

    with ScriptedAPI([text("scripted")], handler=handler) as api:
        first = json.loads(post(api, {"messages": [{"role": "user", "content": "ECHO"}]})[1])
        second = json.loads(post(api, {"messages": [USER]})[1])
    assert first["content"][0]["text"] == "saw 1 message(s)" and second["content"][0]["text"] == "scripted"


def test_count_tokens_answers_and_other_paths_are_404() -> None:
    with ScriptedAPI() as api:
        status, raw = post(api, {"messages": [USER]}, path="/v1/messages/count_tokens")
        assert status == 200 and json.loads(raw)["input_tokens"] > 0
        assert post(api, {}, path="/v1/complete")[0] == 404


def _use(*ids: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "Bash", "input": {}} for i in ids]}


def _result(*ids: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]}


def test_strict_pairing_rules_name_the_ids() -> None:
    assert request_problems([USER, _use("a", "b"), _result("a", "b"), USER]) == []
    missing = request_problems([USER, _use("a", "b"), _result("a"), USER])
    assert len(missing) == 1 and "without `tool_result` blocks immediately after: b" in missing[0]
    stray = request_problems([USER, _use("a"), _result("a", "zz")])
    assert len(stray) == 1 and "unexpected `tool_use_id` found in `tool_result` blocks: zz" in stray[0]
    late = request_problems([USER, _use("a"), USER, _result("a")])
    assert any("immediately after: a" in p for p in late) and any("unexpected `tool_use_id`" in p for p in late)
    dup = request_problems([USER, _use("a"), _result("a"), _use("a"), _result("a")])
    assert any("must be unique: a" in p for p in dup)


def test_strict_content_rules() -> None:
    assert request_problems([{"role": "user", "content": []}])[0].startswith("messages.0: all messages must have")
    assert "non-whitespace" in request_problems([{"role": "user", "content": [{"type": "text", "text": " "}]}])[0]
    assert request_problems([USER, {"role": "assistant", "content": ""}]) == []  # final prefill may be empty
    assert request_problems([USER, {"role": "system", "content": "env"}, _use("a"), _result("a")]) == []
    bad = request_problems([USER, _use("bad id"), _result("bad id")])
    assert bad == ["messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"]


def test_violations_are_answered_400_and_recorded() -> None:
    api = ScriptedAPI([text("never")]).start()
    try:
        status, raw = post(api, {"messages": [USER, _use("a"), USER]})
    finally:
        api.stop()
    assert status == 400 and json.loads(raw)["error"]["type"] == "invalid_request_error"
    assert "immediately after: a" in api.failures[0]
    with pytest.raises(ScriptError):
        api.assert_done()


def test_stop_and_start_keep_the_port() -> None:
    api = ScriptedAPI([text("one"), text("two")]).start()
    port = api.port
    post(api, {"messages": [USER]})
    api.stop()
    with pytest.raises(ConnectionRefusedError):
        post(api, {"messages": [USER]})
    api.start()
    assert api.port == port and post(api, {"messages": [USER]})[0] == 200
    api.stop()
    api.assert_done()


def test_prompt_cache_is_simulated_on_shared_prefixes() -> None:
    """Derived usage splits into cache read (the prefix shared with an earlier request) and creation."""
    mark = {"type": "ephemeral"}
    history = [{"role": "user", "content": [{"type": "text", "text": "p" * 20_000, "cache_control": mark}]},
               {"role": "assistant", "content": "ok"}]

    def system(fill: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": fill * 8000, "cache_control": mark}]

    with ScriptedAPI([text("a"), text("b"), text("c"), text("d")]) as api:
        first = json.loads(post(api, {"system": system("S"), "messages": history[:1]})[1])["usage"]
        second = json.loads(post(api, {"system": system("S"), "messages": [*history, USER]})[1])["usage"]
        other = json.loads(post(api, {"system": system("T"), "messages": history[:1]})[1])["usage"]
        unmarked = json.loads(post(api, {"system": "S" * 8000, "messages": [USER]})[1])["usage"]
    assert first["cache_read_input_tokens"] == 0 and first["input_tokens"] > 6000
    assert second["cache_read_input_tokens"] > 6000 and second["input_tokens"] == 1
    assert second["cache_creation_input_tokens"] > 0  # read only up to the last breakpoint; the tail is new
    assert unmarked["cache_read_input_tokens"] == 0  # no cache_control, no cache
    total = sum(second[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
    assert abs(total - api.requests[1].size // 4) <= 1
    assert other["cache_read_input_tokens"] == 0  # the system prompt changed: the prefix broke early


def test_prompt_cache_simulation_can_be_turned_off() -> None:
    body = {"system": "S" * 8000, "messages": [USER]}
    with ScriptedAPI([text("a"), text("b")], cache=False) as api:
        post(api, body)
        usage = json.loads(post(api, body)[1])["usage"]
    assert usage["cache_read_input_tokens"] == 0 and usage["input_tokens"] > 2000


def test_prompt_cache_reads_the_previous_turn_when_the_breakpoint_moves() -> None:
    """As the CLI sends a conversation: the breakpoint sits on the newest message, so the message that held
    it last turn comes back without it. The API reads what last turn wrote (the whole earlier prefix), not
    only up to the system prompt's breakpoint: the content is compared without `cache_control`."""
    mark = {"type": "ephemeral"}
    system = [{"type": "text", "text": "S" * 8_000, "cache_control": mark}]

    def turn(n: int, marked: int) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": f"turn {n} " + "x" * 6_000}
        if n == marked:
            block["cache_control"] = mark
        return {"role": "user" if n % 2 == 0 else "assistant", "content": [block]}

    with ScriptedAPI([text("a"), text("b"), text("c")]) as api:
        post(api, {"system": system, "messages": [turn(0, 0)]})
        second = json.loads(post(api, {"system": system, "messages": [turn(0, 2), turn(1, 2), turn(2, 2)]})[1])
        moved = json.loads(post(api, {"system": system, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "other " + "y" * 6_000, "cache_control": mark}]}]})[1])
    # the first request wrote system + turn 0 (about 14,000 chars); the second reads all of it
    assert second["usage"]["cache_read_input_tokens"] >= 14_000 // 4
    assert second["usage"]["cache_creation_input_tokens"] >= 12_000 // 4 - 10  # turns 1 and 2 are new
    # a different first message shares only the system prompt, up to its breakpoint
    assert 8_000 // 4 <= moved["usage"]["cache_read_input_tokens"] < 9_000 // 4


def test_prompt_cache_looks_back_at_most_20_blocks_from_a_breakpoint() -> None:
    """As the API: a prefix written more than 20 blocks before the request's breakpoint is not found (only
    the system prompt's own breakpoint still reads)."""
    mark = {"type": "ephemeral"}
    system = [{"type": "text", "text": "S" * 8_000, "cache_control": mark}]
    first = {"role": "user", "content": [{"type": "text", "text": "f" * 8_000, "cache_control": mark}]}

    def later(blocks: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": f"{blocks}.{n} " + "z" * 100} for n in range(blocks)]
        content[-1]["cache_control"] = mark
        return {"role": "assistant", "content": content}

    unmarked = {"role": "user", "content": [{"type": "text", "text": "f" * 8_000}]}
    with ScriptedAPI([text("a"), text("b"), text("c"), text("d")]) as api:
        post(api, {"system": system, "messages": [first]})
        near = json.loads(post(api, {"system": system, "messages": [unmarked, later(20)]})[1])["usage"]
        post(api, {"system": system, "messages": [first]})
        far = json.loads(post(api, {"system": system, "messages": [unmarked, later(21)]})[1])["usage"]
    assert near["cache_read_input_tokens"] >= 16_000 // 4  # system + the first message, 20 blocks back
    assert 8_000 // 4 <= far["cache_read_input_tokens"] < 9_000 // 4  # 21 back: the system prompt only
