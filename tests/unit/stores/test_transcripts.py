"""Every rewrite over every real transcript in ../shared/data/transcripts (B-7, S-19, S-20).

60 Claude Code transcripts, versions 1.0 to 2.1 (see the folder's README.md). For each: the rewrite leaves
its input untouched, rewriting twice equals rewriting once, and the result has no problem the input did
not already have. Some inputs are broken before anyone rewrites them; `KNOWN_BROKEN` names them and why,
and the test pins that list so a change in `validate` or in the data is noticed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flower import texts
from flower.stores.jsonl import read_jsonl
from flower.stores.prune import find_interrupted
from flower.stores.rewrite import EphemeralPolicy, TrimPolicy, rewrite
from flower.stores.validate import validate
from tests.support.transcripts import TRANSCRIPTS, real_transcripts, transcript_id

PATHS = real_transcripts()
pytestmark = pytest.mark.skipif(not PATHS, reason=f"real transcripts not found at {TRANSCRIPTS}")

EXCERPT = "an edited excerpt: parents cut away"
SIDE_AGENT = "compaction side-agent file: its parents live in the main session file"
KNOWN_BROKEN = {
    "claude-code-log/test/test_data/edge_cases.jsonl": "hand-edited: a dangling parent, two unanswered calls",
    "claude-code-log/test/test_data/sidechain_integrated.jsonl": EXCERPT,
    "entire-cli/checkpoints-v1/26/dcd5518fea/0/full.jsonl": "a progress entry's parent is not in the file",
    "entire-cli/checkpoints-v1/76/62d755ef9f/2/full.jsonl": "microcompact boundary's parent is not in the file",
    "entire-cli/checkpoints-v1/a6/e4c2a0fbd1/0/full.jsonl": "a system entry's parent is not in the file",
    "entire-cli/checkpoints-v1/b0/2936744f3b/0/full.jsonl": "a system entry's parent is not in the file",
    "entire-cli/checkpoints-v1/ec/38b74f08e3/3/full.jsonl": "checkpoint starts mid-turn (stray result); ends mid-call",
    "entire-cli/checkpoints-v1/f2/0127b19334/0/full.jsonl": "a progress entry's parent is not in the file",
    **{
        f"spotter/test/fixtures/transcripts/{session}/subagents/agent-acompact-{agent}.jsonl": SIDE_AGENT
        for session, agent in [
            ("258c7280-ae70-4798-800f-63464d01a85d", "fffbd0"),
            ("4d5611e5-241a-462a-8d15-5122611a9569", "e1f845"),
            ("8463c716-a2ea-4c14-9efa-87158ebd9f20", "f46190"),
            ("ae4a77f8-aedd-4bc1-888f-c94edc91af04", "946d2b"),
            ("fa812bfe-b295-4cca-9c2f-fdf01028cb46", "70d8e7"),
        ]
    },
}
# The corrupted lines the data's README lists, as (line, what the error must say, entries still taken).
BAD_LINES = {
    "entire-cli/checkpoints-v1/37/995ebed6e4/2/full.jsonl": [(128, "2 JSON values glued on one line", 2)],
    "claude-code-log/test/test_data/edge_cases.jsonl": [
        (13, "a JSON string, not an object", 0),
        (14, "without a string 'type'", 1),
        (15, "a JSON number, not an object", 0),
        (16, "a JSON array, not an object", 0),
    ],
}


def predicate() -> Callable[[str], bool]:
    """glance.is_ephemeral once it exists; until then a stand-in with the same spirit."""
    try:
        from flower.walls.glance.judge import is_ephemeral
    except ImportError:
        return lambda command: (
            command.split()[:1] in (["ls"], ["pwd"])
            or command.split()[:2] in (["git", "status"], ["git", "diff"], ["git", "log"])
        )
    return is_ephemeral


@functools.cache
def cached_predicate() -> Callable[[str], bool]:
    verdicts: dict[str, bool] = {}
    base = predicate()
    return lambda command: (
        verdicts[command] if command in verdicts else verdicts.setdefault(command, base(command))
    )


def config(name: str, workspace: Path) -> dict[str, Any]:
    if name == "defaults":
        return {"ephemeral": EphemeralPolicy(predicate=cached_predicate())}
    return {  # everything on, and aggressive, so that every rewrite fires somewhere
        "workspace": workspace,
        "keep_denials": 0,
        "ephemeral": EphemeralPolicy(keep_recent=1, predicate=cached_predicate()),
        "trim": TrimPolicy(keep_recent=2, min_chars=500),
    }


@pytest.mark.parametrize("name", ["defaults", "aggressive"])
@pytest.mark.parametrize("path", PATHS, ids=[transcript_id(p) for p in PATHS])
def test_rewrite_of_real_transcript(path: Path, name: str, tmp_path: Path) -> None:
    entries = read_jsonl(path).entries
    options = config(name, tmp_path)
    out, report = rewrite(entries, **options)
    assert entries == read_jsonl(path).entries, "the input was mutated"
    again, second = rewrite(out, **options)
    assert again == out and not second.changed, f"not idempotent: {second}"

    before, after = validate(entries), validate(out)
    assert set(after) <= set(before), sorted(set(after) - set(before))
    assert (before != []) == (transcript_id(path) in KNOWN_BROKEN), before
    assert not [p for p in after if "has no tool_result" in p], "an orphan call was left unhealed"
    for position, number in find_interrupted(out):
        assert out[position]["message"]["content"][number]["content"] == texts.INTERRUPTED_RESULT
    # Entries only leave as API errors (no real file has a denial marker) or as the halves of expired calls
    # removed with their results (S-20: both halves, every block of the entry), and only arrive as healing
    # results.
    healed = {d.uuid for d in report.details if d.kind == "orphan"}
    removed = {d.tool_use_id for d in report.details if d.kind == "expired"} - set(_tool_ids(out, "tool_use"))
    assert not removed & set(_tool_ids(out, "tool_result")), "a removed call left its result behind"
    dropped = {e["uuid"] for e in entries if e.get("isApiErrorMessage") is True or _all_removed(e, removed)}
    assert [e.get("uuid") for e in out if e.get("uuid") not in healed] == [
        e.get("uuid") for e in entries if e.get("uuid") not in dropped
    ]
    assert report.entries_out == len(out) == len(entries) - len(dropped) + len(healed)


@pytest.mark.parametrize("path", PATHS, ids=[transcript_id(p) for p in PATHS])
def test_residue_rewrites_on_real_transcripts(path: Path) -> None:
    """API errors (README: API-ERROR) go; the CLI's "No response requested." stays; interrupted results
    (README: REJECTED followed by INTERRUPTED-TOOL) carry the neutral note and no stop-and-wait text."""
    entries = read_jsonl(path).entries
    out, report = rewrite(entries, ephemeral=False)
    api_errors = [e for e in entries if e.get("isApiErrorMessage") is True]
    assert report.api_errors_dropped == len(api_errors)
    assert not [e for e in out if e.get("isApiErrorMessage") is True]
    no_response = [e["uuid"] for e in entries if e.get("isApiErrorMessage") is False]
    assert [e["uuid"] for e in out if e.get("isApiErrorMessage") is False] == no_response
    interrupted = find_interrupted(entries)
    assert report.interrupts_neutralised == len(interrupted)
    for position, number in interrupted:
        assert "STOP what you are doing" in str(entries[position]["message"]["content"][number]["content"])


def _blocks(entry: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return (
        [b for b in content if isinstance(b, dict) and b.get("type") == kind]
        if isinstance(content, list)
        else []
    )


def _all_removed(entry: dict[str, Any], removed: set[str]) -> bool:
    """Every block of the entry is a call or a result of a removed call."""
    blocks = _blocks(entry, "tool_use") + _blocks(entry, "tool_result")
    content = (entry.get("message") or {}).get("content") if isinstance(entry.get("message"), dict) else None
    return bool(blocks) and isinstance(content, list) and len(blocks) == len(content) and all(
        (b.get("id") or b.get("tool_use_id")) in removed for b in blocks)


def _tool_ids(entries: list[dict[str, Any]], kind: str) -> list[str]:
    key = "id" if kind == "tool_use" else "tool_use_id"
    return [block[key] for entry in entries for block in _blocks(entry, kind)]


@pytest.mark.parametrize("path", PATHS, ids=[transcript_id(p) for p in PATHS])
def test_denial_pruning_on_real_shapes(path: Path) -> None:
    """No real file carries `toolDenialKind`, so mark every failed tool result as a denial and prune them all:
    the real trees (parallel calls, results in completion order, progress branches, sidechains) must come
    out with exactly those calls and results gone, everything else in place, and no new problem."""
    entries = read_jsonl(path).entries
    interrupted = {position for position, _ in find_interrupted(entries)}
    marked, denied = [], set()
    for position, entry in enumerate(entries):
        results = _blocks(entry, "tool_result")
        if (
            entry.get("type") == "user"
            and any(b.get("is_error") is True for b in results)
            and position not in interrupted
        ):
            entry = {**entry, "toolDenialKind": "permission-rule"}
            denied.update(b["tool_use_id"] for b in results)
        marked.append(entry)
    out, report = rewrite(marked, ephemeral=False, keep_denials=0)
    assert rewrite(out, ephemeral=False, keep_denials=0)[0] == out
    assert set(validate(out)) <= set(validate(marked))
    uses_before = _tool_ids(marked, "tool_use")
    assert _tool_ids(out, "tool_use") == [call for call in uses_before if call not in denied]
    assert not denied & set(_tool_ids(out, "tool_result"))
    assert report.denials_dropped == len(denied & set(uses_before))


def test_real_interrupts_found_where_the_readme_says() -> None:
    counts = {transcript_id(p): len(find_interrupted(read_jsonl(p).entries)) for p in PATHS}
    assert {k: v for k, v in counts.items() if v} == {
        "entire-cli/checkpoints-v1/0e/3fdc072c53/0/full.jsonl": 1,
        "entire-cli/checkpoints-v1/37/995ebed6e4/2/full.jsonl": 1,
        "entire-cli/checkpoints-v1/48/b4b05476e5/0/full.jsonl": 1,
        "entire-cli/checkpoints-v1/67/ea786b178e/0/full.jsonl": 1,
        "entire-cli/checkpoints-v1/ec/38b74f08e3/3/full.jsonl": 2,
        "spotter/test/fixtures/transcripts/258c7280-ae70-4798-800f-63464d01a85d.jsonl": 1,
        "spotter/test/fixtures/transcripts/short.jsonl": 2,  # two parallel calls, one interrupt row
    }


@pytest.mark.parametrize("path", PATHS, ids=[transcript_id(p) for p in PATHS])
def test_reading_real_transcripts_reports_bad_lines_only(path: Path) -> None:
    result = read_jsonl(path)
    expected = BAD_LINES.get(transcript_id(path), [])
    assert [(e.line, e.kept) for e in result.errors] == [(line, kept) for line, _, kept in expected]
    for error, (line, words, _) in zip(result.errors, expected):
        assert words in error.reason and str(error).startswith(f"{path}:{line}: ")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    clean = len(lines) - len(expected)  # every other line gives exactly one entry
    assert len(result.entries) == clean + sum(kept for _, _, kept in expected)


def test_glued_line_is_salvaged_or_dropped() -> None:
    path = TRANSCRIPTS / "entire-cli/checkpoints-v1/37/995ebed6e4/2/full.jsonl"
    salvaged, strict = read_jsonl(path), read_jsonl(path, salvage=False)
    assert len(salvaged.entries) == len(strict.entries) + 2
    assert [e.get("type") for e in salvaged.entries[127:129]] == ["assistant", "summary"]
    assert strict.errors[0].kept == 0 and "glued" in strict.errors[0].reason


def test_bad_lines_in_a_written_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"type":"user","uuid":"a"}\n\n{"type": "assist\n  \n{"type":"user","uuid":"b"}{"type":"x"} \n'
        '{"type":"user","uuid":"c"}',
        encoding="utf-8",
    )
    result = read_jsonl(path)
    assert [e["uuid"] for e in result.entries if "uuid" in e] == ["a", "b", "c"]
    assert [str(e) for e in result.errors] == [
        f"{path}:3: invalid JSON: Unterminated string starting at (column 10)",
        f"{path}:5: 2 JSON values glued on one line (a missing newline): object of type 'user', object of type 'x'",
    ]
