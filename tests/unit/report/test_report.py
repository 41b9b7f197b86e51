"""The run report and the resume preview as pure functions over entries (B-10, B-11: usage once per API
message, main vs subagent by key structure, denials by marker)."""

from __future__ import annotations

import json
import math

import pytest

from flower.report.analysis import analyze, api_messages, least_squares_slope, report_json, visible_chars
from flower.report.html import render_html
from flower.report.preview import PRICING, build_preview, preview_json, render_entry
from flower.runtime.economics import Prices
from tests.support.sessions import (
    AGENT_INPUT,
    BASH_INPUT,
    REAL,
    REAL_ID,
    glance_session,
    jsonl_entries,
    main_session,
    reply,
    sub_session,
    usage,
    user,
)
from tests.support.transcripts import Transcript, bash, text, tool_use

SPILLS = [
    {"hash": "h1", "tool": "Bash", "field": "stdout", "chars": 5000, "agent": "a1", "tool_use_id": "t4"},
    {
        "hash": "h2",
        "tool": "Read",
        "field": "content",
        "chars": 99,
        "agent": "main",
        "tool_use_id": "from-another-run",
    },
]


def test_hand_made_run_counts_each_api_message_once() -> None:
    """B-10: m1 and s1 are stored as 2 and 3 entries with the same usage; each counts once."""
    report = analyze(main_session(), {"a1": sub_session()}, threshold=10_000, spill_log=SPILLS)
    assert (report.main.turns, report.subagents.turns) == (3, 2)
    assert report.main.usage.input == 100 + 10 + 5  # 115; per-entry summing would give 215
    assert report.main.usage.cache_read == 900 + 1990 + 2995
    assert report.main.usage.cache_creation == 50 + 100
    assert report.main.usage.output == 20 + 30 + 7  # the last entry of m1 carries the final count
    assert (report.subagents.usage.input, report.subagents.usage.cache_creation) == (550, 500)
    assert report.subagents.usage.output == 50
    assert report.contexts == (1050, 2100, 3000)
    assert report.subagent_turn_share == pytest.approx(2 / 5)
    # cache read / (input + cache read + cache creation), both threads, per API message
    assert report.cache_hit_rate == pytest.approx((5885 + 1000) / (6150 + 2050))


def test_hand_made_run_characters_tools_spills_cost() -> None:
    report = analyze(main_session(), {"a1": sub_session()}, threshold=10_000, spill_log=SPILLS)
    main_chars = (
        len("fix the bug")
        + len("Looking.")
        + len(BASH_INPUT)
        + len("clean")
        + len(AGENT_INPUT)
        + len("fixed at a.py:3")
        + len("Done.")
    )
    sub_chars = (
        len("FIX IT")
        + len("hm")
        + len('{"file_path": "a.py"}')
        + len('{"command": "pytest"}')
        + len("ok")
        + len("1 passed")
        + len("fixed at a.py:3")
    )
    assert (report.main.chars, report.subagents.chars) == (main_chars, sub_chars)
    assert report.subagent_char_share == pytest.approx(sub_chars / (main_chars + sub_chars))
    assert dict(report.main.tool_calls) == {"Bash": 1, "Agent": 1}
    assert dict(report.subagents.tool_calls) == {"Edit": 1, "Bash": 1}
    assert dict(report.per_agent["a1"].tool_calls) == {"Edit": 1, "Bash": 1}
    spills = report.spills
    assert (spills.count, spills.chars, spills.main, spills.subagents, spills.unattributed) == (
        1,
        5000,
        0,
        1,
        1,
    )
    assert (
        report.cost_usd == pytest.approx(0.15) and report.cost_source == "cost-state"
    )  # the last, cumulative
    assert analyze(main_session(), {}, cost_usd=0.5).cost_source == "manifest"


def test_slope_is_least_squares_and_projects_turns_to_the_threshold() -> None:
    """B-10: contexts 1050, 2100, 3000 -> slope 975 tokens/turn; (10000 - 3000) / 975 turns to go."""
    assert least_squares_slope([1050, 2100, 3000]) == pytest.approx(975.0)
    assert least_squares_slope([5]) is None
    report = analyze(main_session(), {}, threshold=10_000)
    assert report.slope == pytest.approx(975.0)
    assert report.turns_to_threshold == pytest.approx(7000 / 975)
    flat = analyze(main_session()[:3], {}, threshold=10_000)  # one point: no slope, no projection
    assert flat.slope is None and flat.turns_to_threshold is None


def test_default_threshold_comes_from_the_handoff_policy_for_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flower.runtime.handoff import HandoffPolicy

    monkeypatch.delenv("FLOWER_WINDOW", raising=False)
    report = analyze(main_session(), {})
    assert report.model == "claude-opus-5-5"
    assert report.threshold == HandoffPolicy().threshold("claude-opus-5-5") == 750_000


def test_generations_forks_and_inline_sidechains() -> None:
    """S-22 boundaries from `retired`; a fork's copied replies are not counted again; inline sidechain
    entries (CLI 1.0.x) are subagent turns by their isSidechain field, not by any key substring."""
    second = [
        user("g2", "continue", session="S2"),
        *reply("n1", "q1", [{"type": "text", "text": "a"}], usage(400, 0, 0, 1), session="S2"),
        *reply("n2", "q2", [{"type": "text", "text": "b"}], usage(800, 0, 0, 1), session="S2"),
    ]
    fork = [*main_session()[:3], *reply("k1", "qk", [text("fork")], usage(9, 0, 0, 1), session="S3")]
    inline = reply("x1", "qx", [text("side")], usage(70, 0, 0, 1), sidechain=True, agent="old")
    report = analyze(
        {"S1": main_session() + inline, "S2": second, "S3": fork}, {}, retired={"S1"}, threshold=5000
    )
    assert [(g.session_id, g.kind, g.first_turn, g.turns) for g in report.generations] == [
        ("S1", "start", 0, 3),
        ("S2", "handoff", 3, 2),
        ("S3", "session", 5, 1),
    ]
    assert report.contexts == (1050, 2100, 3000, 400, 800, 9)
    assert report.main.turns == 6  # m1 copied into the fork is not a new turn
    assert report.generations[1].slope == pytest.approx(400.0)
    assert set(report.per_agent) == {"old"} and report.subagents.turns == 1


def test_a_key_path_containing_subagent_is_still_main() -> None:
    """The earlier analyzer split main from subagent by the substring "subagent" in the store key."""
    entries = [dict(e, cwd="/home/u/subagents/agent-x") for e in main_session()]
    report = analyze({"subagents-session": entries}, {})
    assert report.main.turns == 3 and report.subagents.turns == 0


def test_expiries_and_denials_pruned_come_from_the_real_rewrite() -> None:
    """S-19 via the pure rewrite: 7 glance results keep 6, two denials keep 1 (marker, not wording)."""
    t = Transcript()
    t.prompt("look around")
    for n in range(7):
        t.assistant(bash(f"g{n}", f"ls dir{n}"))
        t.result(f"g{n}", "".join(f"dir{n}/file_{k}.txt\n" for k in range(20)))  # longer than its expiry note
    for n in range(2):
        t.assistant(tool_use(f"d{n}", "Write", file_path="x.py", content="x"))
        t.denial(f"d{n}", "walled off")
    t.assistant(text("ok"))
    report = analyze(t.entries, {})
    assert (report.pruned.expired, report.pruned.denials_dropped) == (1, 1)
    assert report.pruned.chars_saved == report.pruned.main_chars_saved > 0


def test_report_json_has_the_documented_shape() -> None:
    data = report_json(analyze(main_session(), {"a1": sub_session()}, threshold=10_000, spill_log=SPILLS))
    json.dumps(data)  # plain data only
    assert data["main"]["turns"] == 3 and data["main"]["usage"]["prompt"] == 6150
    assert data["subagent_turn_share"] == 0.4 and data["subagent_count"] == 1
    assert data["slope"] == 975.0 and data["contexts"] == [1050, 2100, 3000]
    assert data["spills"]["count"] == 1 and data["cost_source"] == "cost-state"
    assert set(data) >= {
        "sessions",
        "per_agent",
        "generations",
        "threshold",
        "turns_to_threshold",
        "pruned",
        "workbench",
        "cache_hit_rate",
        "cost_usd",
        "subagent_char_share",
    }


@pytest.mark.skipif(not (REAL / f"{REAL_ID}.jsonl").is_file(), reason="shared transcripts not present")
def test_real_transcript_with_subagents() -> None:
    """A real CLI 2.1.39 session with two subagent files. Expected numbers were counted independently
    (distinct requestIds; usage of each message's last entry): 408 assistant entries are 217 API messages."""
    main = jsonl_entries(REAL / f"{REAL_ID}.jsonl")
    subs = {
        p.stem.removeprefix("agent-"): jsonl_entries(p)
        for p in sorted((REAL / REAL_ID / "subagents").glob("*.jsonl"))
    }
    report = analyze({REAL_ID: main}, subs)
    assert report.main.turns == 217 and len(api_messages(main)) == 217
    assert report.main.usage.cache_read == 16_553_628  # summed per entry it would be 29,979,352
    assert report.main.usage.input == 242 and report.main.usage.output == 49_467
    assert dict(report.main.tool_calls) == {
        "Bash": 120,
        "Edit": 67,
        "Read": 37,
        "WebFetch": 4,
        "Write": 6,
        "Glob": 5,
        "Task": 1,
        "Skill": 1,
        "Grep": 1,
    }
    assert set(report.per_agent) == {"aac57f5", "acompact-946d2b"}
    assert report.per_agent["aac57f5"].turns == 3 and report.subagents.turns == 4
    assert dict(report.subagents.tool_calls) == {"WebSearch": 6, "WebFetch": 6}
    assert len(report.contexts) == 217 and max(report.contexts) == 141_787 and report.contexts[-1] == 102_168
    assert report.cost_source == "unknown" and report.cost_usd is None  # this file has no cost-state
    html = render_html(report)
    assert html.count("<circle") == 217 and 'id="chart-tools"' in html


def test_html_escapes_transcript_strings() -> None:
    evil = main_session() + reply(
        "m9",
        "r9",
        [{"type": "tool_use", "id": "t9", "name": "<script>alert(1)</script>", "input": {}}],
        usage(1, 1, 1, 1),
    )
    html = render_html(analyze(evil, {"<img src=x>": sub_session()}, threshold=10_000), title="t<b>")
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x>" not in html and "t&lt;b&gt;" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing loaded from a network


def test_visible_chars_counts_each_block_once() -> None:
    entries = main_session()
    assert visible_chars(entries + entries) == visible_chars(entries)


# --- preview (B-11) ----------------------------------------------------------------------------------


def test_preview_diffs_the_expired_glance_result() -> None:
    """B-11: the oldest of seven glance results expires; the diff shows exactly that body replaced."""
    preview = build_preview("sid", glance_session().entries, {})
    main = preview.main
    assert main.changed and main.report.expired == 1
    removed = [line for line in main.diff if line.startswith("-") and not line.startswith("---")]
    added = [line for line in main.diff if line.startswith("+") and not line.startswith("+++")]
    assert removed[:2] == ["-tool_result (g0): On branch main", "-    modified: src/module_0.py"]
    assert removed[-1] == "-    ... (19 more lines)"  # blocks are capped at 12 lines in the diff
    assert len(added) == 1 and added[0].startswith(
        "+tool_result (g0): [flower: expired output of `git status`"
    )
    assert preview.chars_saved == main.report.chars_saved > 0


def test_preview_cache_arithmetic() -> None:
    """P-4: from the first changed entry to the end, a warm cache writes instead of reads."""
    preview = build_preview("sid", glance_session().entries, {})
    main, p = preview.main, PRICING
    after_first = [e for e in glance_session().entries if render_entry(e)][
        2:
    ]  # prompt, call g0, result g0 changed
    assert main.tail_chars_before == visible_chars(after_first)
    assert main.tail_chars_before - main.tail_chars_after == preview.chars_saved
    expected = (round(main.tail_chars_after / 4) * 6.25 - round(main.tail_chars_before / 4) * 0.50) / 1e6
    assert preview.cache_write_usd == pytest.approx(expected)
    assert preview.saved_per_request_usd == pytest.approx(round(preview.chars_saved / 4) * p.cache_read / 1e6)
    assert preview.break_even_requests == pytest.approx(
        preview.cache_write_usd / preview.saved_per_request_usd
    )
    data = preview_json(preview)
    assert data["main"]["report"]["expired"] == 1 and data["cache"]["pricing"]["cache_write_per_mtok"] == 6.25


def test_preview_of_an_untouched_session_costs_nothing() -> None:
    t = Transcript()
    t.prompt("hi")
    t.assistant(text("hello"))
    preview = build_preview("sid", t.entries, {})
    assert not preview.main.changed and preview.main.diff == ()
    assert preview.cache_write_usd == 0 and preview.break_even_requests == 0
    assert math.isclose(preview.cold_saved_usd, 0)


def test_a_generation_shows_what_its_refreshes_wrote_cost_and_saved() -> None:
    """Issue #27: a refresh's record (the manifest's `cache_costs`) is found by its first request's message id;
    the saving counts the requests after it, at the model's cache-read price, less its extra write."""
    contexts = [10_000, 11_000, 12_000, 6_000, 7_000, 8_000, 9_000]
    entries = [e for i, size in enumerate(contexts)
               for e in reply(f"m{i}", f"q{i}", [text(str(i))], usage(1, size - 1, 0, 1))]
    record = {"kind": "refresh", "session_id": "S1", "message_id": "m3", "before": 12_000, "context": 6_000,
              "cache_write": 5_000, "priced": 6_500}
    other = {**record, "session_id": "S2"}
    handoff = {**record, "kind": "handoff"}
    report = analyze({"S1": entries}, {}, threshold=50_000, cache_costs=[record, other, handoff, "junk"])  # type: ignore[list-item]
    (generation,) = report.generations
    assert (generation.refreshes, generation.refresh_write, generation.refresh_priced) == (1, 5_000, 6_500)
    read = Prices.of(report.model).read  # the replies' model (its cache read is 0.05x input)
    assert read == pytest.approx(0.05)
    # 3 requests after the first one read 6,000 fewer; the first paid 6,500 instead of reading 12,000
    assert generation.refresh_saved == pytest.approx(read * 6_000 * 3 - (6_500 - read * 12_000))
    assert report_json(report)["generations"][0]["refresh_saved"] == round(generation.refresh_saved)
    bare = analyze({"S1": entries}, {}, threshold=50_000).generations[0]
    assert (bare.refreshes, bare.refresh_saved) == (0, 0.0)
