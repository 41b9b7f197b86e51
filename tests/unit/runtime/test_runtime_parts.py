"""Pure parts of the runtime: handoff policy, context meter, handoff documents, classify, backoff,
compaction switches, events (issue #6, S-22..S-24, L-3, L-4)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ToolUseBlock,
    UserMessage,
)

from flower.agent.compact import CompactPolicy
from flower.agent.events import Event, emit, to_events
from flower.errors import ConfigError
from flower.runtime.config import RuntimeConfig, resolve_config
from flower.runtime.handoff import (
    ContextMeter,
    HandoffPolicy,
    is_context_overflow,
    message_context,
    parse_handoff,
    save_handoff,
)
from flower.runtime.resilience import RetryPolicy, classify, endpoint_reachable


def test_threshold_defaults_to_the_1m_window_minus_a_quarter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    policy = HandoffPolicy()
    assert policy.resolve_window("claude-opus-5-5") == 1_000_000
    assert policy.threshold() == 750_000 and policy.warning() == 730_000
    assert HandoffPolicy(window=200_000).threshold() == 150_000  # 50k floor beats 25% of 200k
    assert HandoffPolicy(window=200_000, headroom=10_000).threshold() == 190_000
    assert HandoffPolicy().resolve_window("claude-haiku-4") == 200_000


def test_window_from_the_environment(tmp_path: Path) -> None:
    """FLOWER_WINDOW reaches the handoff policy through the resolved config; the policy reads no variable."""
    config = resolve_config({}, env={"FLOWER_WINDOW": "300k"}, start=tmp_path).config
    assert config.handoff_policy() == HandoffPolicy(window=300_000)
    assert HandoffPolicy().resolve_window() == 1_000_000
    explicit = replace(config, handoff=HandoffPolicy(window=123_456)).handoff_policy()
    assert explicit is not None and explicit.resolve_window() == 123_456  # explicit wins
    with pytest.raises(ConfigError, match="FLOWER_WINDOW"):
        resolve_config({}, env={"FLOWER_WINDOW": "lots"}, start=tmp_path)


def test_invalid_policies_fail_at_construction() -> None:
    with pytest.raises(ConfigError):
        HandoffPolicy(window=0)
    with pytest.raises(ConfigError):
        HandoffPolicy(max_generations=0)
    with pytest.raises(ConfigError, match="leaves nothing"):
        HandoffPolicy(window=100_000, headroom=100_000).threshold()
    with pytest.raises(ConfigError, match="mode must be one of"):
        CompactPolicy("sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least 100,000"):
        CompactPolicy(window=50_000)


def test_compaction_switches() -> None:
    assert CompactPolicy().env() == {}
    assert CompactPolicy("no_summary").env() == {"DISABLE_AUTO_COMPACT": "1"}
    assert CompactPolicy("off", window=200_000).env() == {"DISABLE_COMPACT": "1",
                                                          "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "200000"}


def test_meter_counts_each_api_message_once() -> None:
    usage = {"input_tokens": 100, "cache_read_input_tokens": 2_000, "cache_creation_input_tokens": 30,
             "output_tokens": 999}
    assert message_context(usage) == 2_130
    meter = ContextMeter()
    assert meter.observe("msg_1", usage) and not meter.observe("msg_1", usage)  # text + tool_use entries
    assert meter.observe("msg_2", {"input_tokens": 5_000})
    assert not meter.observe("msg_3", None)
    assert meter.per_message == [2_130, 5_000] and meter.current == 5_000


def test_parse_handoff_needs_doing_and_next() -> None:
    doc = "## Doing\nX\n## Decided\nY because Z\n## Dead ends\n-\n## Next\n1. go\n## Scene\npaths"
    assert parse_handoff(doc) == {"doing": "X", "decided": "Y because Z", "dead ends": "-", "next": "1. go",
                                  "scene": "paths"}
    assert parse_handoff("## Doing\nX\n## Decided\nY") == {}
    assert parse_handoff("## Doing\n\n## Next\n") == {}


def test_save_handoff_archives_the_previous_one(tmp_path: Path) -> None:
    first = save_handoff(tmp_path / "notes", "fix bug/1", "one")
    assert first.name.startswith("handoff-fix-bug-1-") and first.read_text() == "one\n"
    second = save_handoff(tmp_path / "notes", "fix bug/1", "two")
    assert second == first and second.read_text() == "two\n"
    (archived,) = (tmp_path / "notes" / "handoffs").iterdir()
    assert archived.read_text() == "one\n"


def test_context_overflow_is_recognised() -> None:
    assert is_context_overflow("API Error: 400 prompt is too long: 1000001 tokens > 1000000 maximum")
    assert is_context_overflow("Prompt is too long")
    assert not is_context_overflow("API Error: 529 Overloaded") and not is_context_overflow(None)


@pytest.mark.parametrize(("error", "status", "kind"), [
    ("API Error: 529 Overloaded (fake). This is a server-side issue", None, "transient"),
    ("API Error: 500 Internal server error (fake)", None, "transient"),
    ("API Error: Connection to the API was lost (ECONNRESET).", None, "transient"),
    ("anything", 429, "transient"),
    ("request timed out", None, "transient"),
    ("API Error: 400 messages.1: invalid request", None, "fatal"),
    ("API Error: 401 invalid x-api-key", None, "fatal"),
    ("authentication_error: bad key", None, "fatal"),
    ("Reached maximum budget", None, "fatal"),
    ("some 400 timeout oddity", 400, "fatal"),  # fatal is checked first
    ("something odd happened", None, "unknown"),
])
def test_classify(error: str, status: int | None, kind: str) -> None:
    assert classify(error, status) == kind


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    policy = RetryPolicy(base=4.0, cap=120.0)
    rng = random.Random(7)
    delays = [policy.delay(n, rng) for n in range(1, 8)]
    ceilings = [4, 8, 16, 32, 64, 120, 120]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings))


def test_endpoint_probe() -> None:
    import socket

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert endpoint_reachable(f"http://127.0.0.1:{listening.getsockname()[1]}")
    assert not endpoint_reachable("http://127.0.0.1:9", timeout=0.5)


def test_events_are_flat_and_synthetic_errors_are_errors() -> None:
    call = AssistantMessage(content=[TextBlock("looking"), ToolUseBlock("t1", "Bash", {"command": "ls"})],
                            model="m", parent_tool_use_id="toolu_agent")
    assert [(e.kind, e.tool, e.payload.get("agent")) for e in to_events(call)] == [
        ("text", None, "toolu_agent"), ("tool_call", "Bash", "toolu_agent")]
    synthetic = AssistantMessage(content=[TextBlock("API Error: 529 Overloaded")], model="<synthetic>",
                                 error="server_error")
    (event,) = to_events(synthetic)
    assert event.kind == "error" and "529" in event.text and event.on_main
    result = ResultMessage(subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=2,
                           session_id="s", total_cost_usd=0.5, result="done")
    assert to_events(result)[0] == Event("result", "done", payload={
        "session_id": "s", "cost_usd": 0.5, "turns": 2, "subtype": "success", "api_error_status": None})
    retry = SystemMessage(subtype="api_retry", data={"error": "server_error", "attempt": 1})
    assert to_events(retry)[0].kind == "retry"
    assert to_events(UserMessage(content="hi"))[0].kind == "prompt"
    assert to_events(object())[0].kind == "unknown"


def test_a_failing_callback_never_kills_the_run() -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("UI bug")

    emit(broken, Event("text", "x"))  # does not raise


def _append_rows(run_dir: str, writer: int, count: int) -> None:
    from flower.runtime.runtime import append_manifest

    for i in range(count):
        append_manifest(Path(run_dir), {"run_id": f"run-{writer}", "i": i})


def test_parallel_processes_never_lose_manifest_rows(tmp_path: Path) -> None:
    """L-2: four processes with different run ids append at once; every row survives, in each writer's order."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_rows, args=(str(tmp_path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    import json

    rows = json.loads((tmp_path / "manifest.json").read_text())["steps"]
    assert len(rows) == 100
    for w in range(4):
        assert [r["i"] for r in rows if r["run_id"] == f"run-{w}"] == list(range(25))


def test_an_unreadable_manifest_is_kept_aside_not_overwritten(tmp_path: Path) -> None:
    from flower.runtime.runtime import append_manifest

    (tmp_path / "manifest.json").write_text("{broken")
    append_manifest(tmp_path, {"run_id": "r"})
    (kept,) = tmp_path.glob("manifest.unreadable-*.json")
    assert kept.read_text() == "{broken"


# --- issue #17: generations and resilience over many hours ---------------------------------------------


def test_unicode_step_names_get_distinct_readable_handoff_files(tmp_path: Path) -> None:
    """Item 4: 调研 and 干活 used to map to one file and archive each other."""
    from flower.runtime.handoff import handoff_name

    notes = tmp_path / "notes"
    one, two = save_handoff(notes, "调研", "research"), save_handoff(notes, "干活", "work")
    assert (one.name, two.name) == ("handoff-调研.md", "handoff-干活.md")
    assert one.read_text() == "research\n" and not (notes / "handoffs").exists()
    assert handoff_name("a/b") != handoff_name("a b") and handoff_name("a/b").startswith("a-b-")
    assert handoff_name("///").startswith("step-") and handoff_name("solo") == "solo"


@pytest.mark.parametrize("error", [
    'API Error: 400 {"error":{"code":"context_length_exceeded","message":"This model\'s maximum context length is 128000"}}',
    "API Error: 400 input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000",
    "API Error: 400 请求的上下文长度超过模型上限",
    "API Error: 400 prompt is too long: 210000 tokens > 200000 maximum",
])
def test_overflow_is_recognised_by_code_and_shape_first(error: str) -> None:
    """Item 5: codes and shapes before English wording."""
    assert is_context_overflow(error)


def test_overflow_names_the_window() -> None:
    from flower.runtime.handoff import overflow_window

    assert overflow_window("prompt is too long: 210000 tokens > 200000 maximum") == 200_000
    assert overflow_window("input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000") == 200_000
    assert overflow_window("API Error: 529 Overloaded") is None


def test_window_follows_the_model_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 3: explicit/FLOWER_WINDOW, then the reported model, then the spec, then ANTHROPIC_MODEL; a
    calibrated overflow caps it."""
    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    policy = HandoffPolicy()
    assert policy.resolve_window(None, env_model="claude-haiku-4-5") == 200_000
    assert policy.resolve_window("claude-opus-5-5", reported="claude-3-7-sonnet") == 200_000
    assert policy.resolve_window("claude-haiku-4-5", reported="claude-opus-5-5") == 200_000  # name says nothing
    assert policy.resolve_window(None, reported="claude-haiku-4-5[1m]") == 1_000_000
    assert policy.resolve_window(None, calibrated=174_000) == 174_000
    assert HandoffPolicy(window=500_000).resolve_window(None, reported="claude-haiku-4-5") == 500_000
    configured = RuntimeConfig(window=300_000).handoff_policy()  # FLOWER_WINDOW=300k, resolved
    assert configured is not None and configured.resolve_window(None, reported="claude-haiku-4-5") == 300_000


def test_default_headroom_scales_with_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 6: FLOWER_WINDOW=40000 alone used to be a ConfigError (headroom at least 50k)."""
    policy = RuntimeConfig(window=40_000).handoff_policy()
    assert policy is not None and policy.threshold() == 30_000 and policy.warning() == 20_000
    assert HandoffPolicy().threshold() == 750_000 and HandoffPolicy().max_generations == 64


@pytest.mark.parametrize(("error", "kind"), [
    ("API Error: Unable to connect to API: getaddrinfo ENOTFOUND api.anthropic.com", "transient"),  # item 8
    ("API Error: 404 model not found", "fatal"),
    ("error_max_turns: Reached maximum number of turns (3)", "fatal"),  # item 9
    ("You exceeded your current quota, please check your plan", "fatal"),
    ("TypeError: fetch failed", "transient"),
    ("API Error: Unable to connect to API (EPIPE)", "transient"),
    ("CLINotFoundError: Claude Code not found at /x", "fatal"),
])
def test_dns_outages_retry_and_caps_are_final(error: str, kind: str) -> None:
    assert classify(error) == kind


def test_a_quota_429_is_final_not_a_rate_limit() -> None:
    assert classify("insufficient_quota", 429) == "fatal" and classify("slow down", 429) == "transient"


def test_the_probe_also_checks_the_default_host() -> None:
    """Item 10: with ANTHROPIC_BASE_URL unset the endpoint is the default API host, not "always up"."""
    from flower.runtime.resilience import DEFAULT_ENDPOINT, endpoint_of

    assert endpoint_of({}) == DEFAULT_ENDPOINT and endpoint_of({"ANTHROPIC_BASE_URL": "http://x:1"}) == "http://x:1"
    assert RetryPolicy(probe_timeout=5).probe_timeout == 5
    with pytest.raises(ConfigError, match="probe_timeout"):
        RetryPolicy(probe_timeout=-1)


def test_runtimes_made_together_get_distinct_run_ids(tmp_path: Path) -> None:
    """Item 11."""
    from flower.runtime.runtime import Runtime

    ids = {Runtime(tmp_path, run_dir=tmp_path / "runs", workbench=False).run_id for _ in range(5)}
    assert len(ids) == 5


def test_a_fenced_heading_in_a_handoff_is_content() -> None:
    """Item 7: a line "## Next" inside a code fence replaced the Next section (the handoff now uses the shared
    section parser)."""
    doc = ("## Doing\nWriting the docs; the template is:\n```markdown\n## Next\n(placeholder)\n```\n"
           "## Next\n1. Publish.\n")
    sections = parse_handoff(doc)
    assert sections["next"] == "1. Publish." and "(placeholder)" in sections["doing"]


def test_a_model_other_than_the_specs_is_warned_about_and_sets_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3: the gateway serves another model than the spec names: say so, and follow its window."""
    from flower.agent.spec import AgentSpec
    from flower.runtime.runtime import Runtime

    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    rt = Runtime(tmp_path, run_dir=tmp_path / "runs", workbench=False, env={"ANTHROPIC_MODEL": ""})
    spec = AgentSpec(name="s", instructions="x", model="claude-opus-5-5")
    events: list[Event] = []
    assert rt.threshold(spec) == 750_000
    rt._use_model(spec, "claude-haiku-4-5", events.append)
    rt._use_model(spec, "claude-haiku-4-5", events.append)  # the same model again: nothing new
    assert [e.payload["subtype"] for e in events] == ["model_mismatch", "window"]
    assert events[1].payload["threshold"] == 150_000 and rt.threshold(spec) == 150_000


def test_behind_a_proxy_the_proxy_is_probed() -> None:
    """Item 10: with ANTHROPIC_BASE_URL unset the default host is probed, unless the CLI goes through a proxy
    for it (a direct probe would fail while the CLI works)."""
    from flower.runtime.resilience import DEFAULT_ENDPOINT, probe_target

    assert probe_target({}) == DEFAULT_ENDPOINT
    assert probe_target({"HTTPS_PROXY": "proxy.corp:3128"}) == "http://proxy.corp:3128"
    assert probe_target({"HTTPS_PROXY": "http://p:1", "NO_PROXY": ".anthropic.com"}) == DEFAULT_ENDPOINT
    local = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080", "HTTP_PROXY": "http://127.0.0.1:9",
             "NO_PROXY": "127.0.0.1,localhost"}  # flower.testing's environment
    assert probe_target(local) == "http://127.0.0.1:8080"


def test_a_cost_driven_threshold_is_never_above_the_windows() -> None:
    """HandoffPolicy(at=): hand off at a fixed context far below the window, or at the window's own threshold
    if that comes first; the warning stays below the threshold it warns of."""
    assert HandoffPolicy(window=200_000, at=40_000).threshold() == 40_000
    assert HandoffPolicy(window=40_000, at=100_000).threshold() == 30_000
    assert 0 < HandoffPolicy(window=200_000, at=40_000).warning() < 40_000
    assert HandoffPolicy(window=200_000).warning() == 130_000  # unchanged without `at`
    with pytest.raises(ConfigError, match="at must be a positive"):
        HandoffPolicy(at=0)


def test_the_cost_driven_threshold_comes_from_flower_handoff_at(tmp_path: Path) -> None:
    """FLOWER_HANDOFF_AT, like FLOWER_WINDOW, reaches every entry point (run, once, go, workflows) through
    the resolved config."""
    config = resolve_config({}, env={"FLOWER_HANDOFF_AT": "40k"}, start=tmp_path).config
    policy = replace(config, window=200_000).handoff_policy()
    assert policy is not None and policy.threshold() == 40_000
    own = replace(config, handoff=HandoffPolicy(window=200_000, at=30_000)).handoff_policy()
    assert own is not None and own.threshold() == 30_000  # the policy's own wins
    with pytest.raises(ConfigError, match="FLOWER_HANDOFF_AT must be a token count like 40000 or 40k, not 'soon'"):
        resolve_config({}, env={"FLOWER_HANDOFF_AT": "soon"}, start=tmp_path)


def test_the_generation_of_a_stored_session_is_the_one_its_first_prompt_names() -> None:
    from flower import texts
    from flower.runtime.handoff import generation_of

    said = texts.HANDOFF_CONTINUE.format(generation=7, path="notes/h.md", handoff="## Doing\nx\n## Next\n1. y")
    prompt = {"type": "user", "message": {"role": "user", "content": said}}
    blocks = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "<note/>"},
                                                                      {"type": "text", "text": said}]}}
    first = {"type": "user", "message": {"role": "user", "content": "Paint the shed."}}
    meta = {"type": "system", "subtype": "init"}
    assert generation_of([meta, prompt, first]) == 7
    assert generation_of([blocks]) == 7
    assert generation_of([meta, first, prompt]) == 1  # only the first prompt counts: a later quote does not
    quoting = {"type": "user", "message": {"role": "user", "content": "Explain this text: " + said}}
    assert generation_of([quoting]) == 1  # a prompt that quotes the continuation is not one
    assert generation_of([]) == 1
