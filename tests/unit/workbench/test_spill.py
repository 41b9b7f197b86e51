"""Layer three: spill on the spot (S-15..S-17, B-5), called with hook inputs shaped as in
docs/sdk-notes.md#hook-inputs, #output-replacement, #large-bash-output."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import HookMatcher

from flower import texts
from flower.errors import ConfigError
from flower.util import confined as confined_mod
from flower.workbench import spill as spill_mod
from flower.workbench.bench import Workbench
from flower.workbench.spill import BULKY, HEAD_CHARS, spill_callback, spill_guard
from tests.support.hooks import hook_input

CTX: Any = {"signal": None}
SUB = "a19c5ae96aadff623"


def post(tool: str, tool_input: dict[str, Any], response: Any, cwd: Path, agent: str | None = None) -> dict:
    """A PostToolUse hook input as the CLI sends it; subagent calls add agent_id/agent_type."""
    return hook_input("PostToolUse", tool, tool_input, cwd, agent, tool_response=response, duration_ms=32)


def bash(stdout: str, stderr: str = "", **extra: Any) -> dict[str, Any]:
    return {"stdout": stdout, "stderr": stderr, "interrupted": False, "isImage": False,
            "noOutputExpected": False, **extra}


def text_of(n: int, seed: str = "line") -> str:
    """Distinct, multi-line text of exactly n chars."""
    out = "".join(f"{seed} {i}\n" for i in range(n))
    return out[:n]


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    ws = tmp_path / "ws"
    ws.mkdir()
    return Workbench(ws).ensure()


async def call(wb: Workbench, data: dict, **kw: Any) -> dict:
    before = copy.deepcopy(data)
    out = await spill_callback(wb, **kw)(data, data["tool_use_id"], CTX)
    assert data == before, "the hook must not mutate its input"
    return out


def pointer(wb: Workbench, content: str, read: bool = False) -> tuple[str, Path]:
    """The expected replacement text and the spill file it names, computed independently.
    For Read the whole head lines come first, so the line numbers the CLI adds stay the file's."""
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]
    path = wb.spill / f"{digest}.txt"
    line = texts.SPILL_POINTER.format(chars=len(content), path=path)
    if read:
        head = content[:HEAD_CHARS]
        return head[: head.rfind("\n") + 1] + line, path
    return f"{line}\n{content[:HEAD_CHARS]}", path


def updated(out: dict) -> Any:
    assert list(out) == ["hookSpecificOutput"]
    assert out["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    return out["hookSpecificOutput"]["updatedToolOutput"]


def log_lines(wb: Workbench) -> list[dict]:
    path = wb.spill / "log.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def leftovers(wb: Workbench) -> list[str]:
    return [p.name for p in wb.spill.iterdir() if p.name.endswith(".tmp") or p.name.startswith(".")]


# --- the shapes per tool (S-15, docs/sdk-notes.md#output-replacement) ---------------------------


@pytest.mark.anyio
async def test_bash_stdout_is_spilled_whole_and_every_other_field_kept(wb: Workbench) -> None:
    big = text_of(9000)
    out = await call(wb, post("Bash", {"command": "make test"}, bash(big, "warn"), wb.workspace))
    want, path = pointer(wb, big)
    assert updated(out) == {"stdout": want, "stderr": "warn", "interrupted": False, "isImage": False,
                            "noOutputExpected": False}
    assert list(updated(out)) == list(bash(""))  # same keys, same order
    assert path.read_text(encoding="utf-8") == big
    assert log_lines(wb) == [{"hash": path.stem, "tool": "Bash", "field": "stdout", "chars": 9000,
                              "agent": "main", "tool_use_id": "toolu_fake001_80c3fb80"}]


@pytest.mark.anyio
async def test_threshold_boundary_is_longer_than_not_at_least(wb: Workbench) -> None:
    """S-15: longer than the threshold spills; 3,999 and 4,000 stay inline; 4,001 spills."""
    for n in (3999, 4000):
        assert await call(wb, post("Bash", {"command": "x"}, bash(text_of(n)), wb.workspace)) == {}
    out = await call(wb, post("Bash", {"command": "x"}, bash(text_of(4001)), wb.workspace))
    assert updated(out)["stdout"] == pointer(wb, text_of(4001))[0]
    assert [r["chars"] for r in log_lines(wb)] == [4001]


@pytest.mark.anyio
async def test_read_nested_file_content_is_spilled_and_numbers_kept(wb: Workbench) -> None:
    content = text_of(6000)
    response = {"type": "text", "file": {"filePath": "/src/big.py", "content": content, "numLines": 600,
                                         "startLine": 1, "totalLines": 600}}
    out = await call(wb, post("Read", {"file_path": "/src/big.py"}, response, wb.workspace))
    assert updated(out) == {"type": "text", "file": {"filePath": "/src/big.py",
                                                     "content": pointer(wb, content, read=True)[0],
                                                     "numLines": 600, "startLine": 1, "totalLines": 600}}
    shown = updated(out)["file"]["content"].splitlines()
    assert shown[:3] == ["line 0", "line 1", "line 2"]  # line n of the file is still line n
    assert shown[-1].startswith("[6000 chars saved to ") and "line" not in shown[-1][-20:]


@pytest.mark.anyio
async def test_read_of_an_image_or_pdf_is_never_touched(wb: Workbench) -> None:
    image = {"type": "image", "file": {"base64": "A" * 50000, "type": "image/png", "originalSize": 37000,
                                       "dimensions": {"originalWidth": 10, "originalHeight": 10}}}
    pdf = {"type": "pdf", "file": {"filePath": "/a.pdf", "base64": "B" * 50000, "originalSize": 37000}}
    for response in (image, pdf):
        assert await call(wb, post("Read", {"file_path": "/x"}, response, wb.workspace)) == {}
    assert log_lines(wb) == []


@pytest.mark.anyio
async def test_grep_content_mode_spills_content_and_leaves_lists(wb: Workbench) -> None:
    content = text_of(7000, "a.txt:1:hit")
    names = [f"f{i}.txt" for i in range(2000)]
    response = {"mode": "content", "numFiles": 0, "filenames": names, "content": content, "numLines": 2,
                "totalLines": 2}
    out = await call(wb, post("Grep", {"pattern": "hit", "output_mode": "content"}, response, wb.workspace))
    got = updated(out)
    assert got == {**response, "content": pointer(wb, content)[0]}
    assert got["filenames"] is names  # the very same list object: lists are never rebuilt


@pytest.mark.anyio
async def test_list_only_outputs_pass_untouched(wb: Workbench) -> None:
    """Glob, Grep files mode and WebSearch carry their bulk in lists (which may hold images): untouched."""
    names = [f"dir/{'n' * 50}{i}.txt" for i in range(500)]
    glob = {"filenames": names, "durationMs": 13, "numFiles": 500, "truncated": False, "totalMatches": 500,
            "countIsComplete": True}
    files = {"mode": "files_with_matches", "filenames": names, "numFiles": 500, "totalFiles": 500}
    search = {"query": "flower", "results": [{"tool_use_id": "srv", "content": [{"title": "t", "url": "u"}]},
                                             "s" * 9000], "durationSeconds": 1.5}
    for tool, response in (("Glob", glob), ("Grep", files), ("WebSearch", search)):
        assert await call(wb, post(tool, {"pattern": "*"}, response, wb.workspace)) == {}
    bash_list = bash("ok", structuredContent=[{"type": "text", "text": "z" * 9000}])
    assert await call(wb, post("Bash", {"command": "x"}, bash_list, wb.workspace)) == {}


@pytest.mark.anyio
async def test_webfetch_result_is_spilled(wb: Workbench) -> None:
    page = text_of(12000, "para")
    response = {"bytes": 48211, "code": 200, "codeText": "OK", "result": page, "durationMs": 812,
                "url": "https://example.org/" + "p" * 5000}
    out = await call(wb, post("WebFetch", {"url": "https://example.org", "prompt": "summarise"}, response,
                                wb.workspace, agent=SUB))
    assert updated(out) == {**response, "result": pointer(wb, page)[0]}  # the long url is an identity: kept
    assert log_lines(wb)[0]["agent"] == SUB


@pytest.mark.anyio
async def test_unknown_tools_shapes_and_images_are_left_alone(wb: Workbench) -> None:
    big = text_of(9000)
    cases = [
        ("Edit", {"file_path": "/a"}, {"filePath": "/a", "oldString": big, "newString": "b"}),
        ("mcp__x__y", {}, {"text": big}),
        ("Bash", {"command": "x"}, big),  # not a dict
        ("Bash", {"command": "x"}, bash("data:image/png;base64," + "A" * 9000, isImage=True)),
    ]
    for tool, tool_input, response in cases:
        assert await call(wb, post(tool, tool_input, response, wb.workspace)) == {}
    assert os.listdir(wb.spill) == []


@pytest.mark.anyio
async def test_a_pointer_never_replaces_something_shorter(wb: Workbench) -> None:
    out = await call(wb, post("Bash", {"command": "x"}, bash("y" * 300), wb.workspace), threshold=10)
    assert out == {}
    assert os.listdir(wb.spill) == []


# --- Bash output the CLI persisted itself (docs/sdk-notes.md#large-bash-output, B-5) ------------


@pytest.mark.anyio
async def test_persisted_bash_output_is_copied_whole_and_persisted_fields_dropped(wb: Workbench,
                                                                                 tmp_path: Path) -> None:
    full = text_of(50001, "row") + "\u00e9\ud7ff\n"  # non-ASCII: chars != bytes
    persisted = tmp_path / "claude" / "tool-results" / "toolu_1.txt"
    persisted.parent.mkdir(parents=True)
    persisted.write_bytes(full.encode("utf-8"))
    response = bash(full[:30000], "", persistedOutputPath=str(persisted), persistedOutputSize=len(full.encode()),
                    stdoutHoldsOutputEnd=True)
    out = await call(wb, post("Bash", {"command": "seq 1 99999"}, response, wb.workspace))
    want, path = pointer(wb, full)
    assert updated(out) == {"stdout": want, "stderr": "", "interrupted": False, "isImage": False,
                            "noOutputExpected": False}
    assert path.read_bytes() == full.encode("utf-8")
    assert log_lines(wb)[0]["chars"] == len(full)
    assert leftovers(wb) == []


@pytest.mark.anyio
async def test_persisted_file_copy_is_byte_exact_even_when_not_utf8(wb: Workbench, tmp_path: Path) -> None:
    raw = b"bad \xff\xfe bytes\n" * 5000
    persisted = tmp_path / "p.txt"
    persisted.write_bytes(raw)
    response = bash("bad", persistedOutputPath=str(persisted), persistedOutputSize=len(raw))
    stdout = updated(await call(wb, post("Bash", {"command": "x"}, response, wb.workspace)))["stdout"]
    name = stdout.split(" saved to ", 1)[1].split(";", 1)[0]
    assert Path(name).read_bytes() == raw
    assert stdout.startswith(f"[{len(raw.decode('utf-8', 'replace'))} chars saved to {wb.spill}/")


@pytest.mark.anyio
async def test_unreadable_persisted_file_keeps_the_clis_own_pointer(wb: Workbench, tmp_path: Path) -> None:
    preview = text_of(30000)
    gone = str(tmp_path / "vanished.txt")
    response = bash(preview, persistedOutputPath=gone, persistedOutputSize=50001)
    got = updated(await call(wb, post("Bash", {"command": "x"}, response, wb.workspace)))
    assert got == {**response, "stdout": pointer(wb, preview)[0]}
    assert leftovers(wb) == []


# --- dedup, atomicity, recursion guard (B-5, S-16) ----------------------------------------------


@pytest.mark.anyio
async def test_same_output_twice_is_one_file_and_two_log_lines(wb: Workbench) -> None:
    big = text_of(5000)
    first = await call(wb, post("Bash", {"command": "x"}, bash(big), wb.workspace))
    second = await call(wb, post("Grep", {"pattern": "p"}, {"mode": "content", "numFiles": 0, "filenames": [],
                                                             "content": big}, wb.workspace, agent=SUB))
    assert updated(first)["stdout"] == updated(second)["content"]
    assert sorted(os.listdir(wb.spill)) == sorted([pointer(wb, big)[1].name, "log.jsonl"])
    assert [(r["tool"], r["agent"]) for r in log_lines(wb)] == [("Bash", "main"), ("Grep", SUB)]


@pytest.mark.anyio
async def test_a_failed_write_leaves_no_temp_file_and_the_output_unchanged(wb: Workbench,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: str, dst: str, **dir_fds: int) -> None:
        raise OSError(28, "No space left on device")

    persisted = wb.workspace / "persisted.txt"
    persisted.write_text(text_of(40000))
    monkeypatch.setattr(confined_mod.os, "replace", refuse)
    assert await call(wb, post("Bash", {"command": "x"}, bash(text_of(5000)), wb.workspace)) == {}
    response = bash(text_of(30000), persistedOutputPath=str(persisted), persistedOutputSize=40000)
    assert await call(wb, post("Bash", {"command": "x"}, response, wb.workspace)) == {}
    assert os.listdir(wb.spill) == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Read", {"file_path": "{spill}/abc.txt", "offset": 1, "limit": 4000}),
        ("Read", {"file_path": "../ws/.flower/spill/abc.txt"}),  # relative, via cwd
        ("Grep", {"pattern": "ERROR", "path": "{spill}"}),
        ("Bash", {"command": "sed -n 1,400p .flower/spill/abc.txt | cut -c1-200"}),
        ("Bash", {"command": "cd .flower/spill && cat abc.txt"}),
    ],
)
async def test_reading_a_spill_file_passes_untouched(wb: Workbench, tool: str, tool_input: dict) -> None:
    """S-16: else the read is spilled again, and the model loops."""
    tool_input = {k: v.format(spill=wb.spill) if isinstance(v, str) else v for k, v in tool_input.items()}
    content = text_of(9000)
    response = {
        "Read": {"type": "text", "file": {"filePath": "x", "content": content, "numLines": 1, "startLine": 1,
                                          "totalLines": 1}},
        "Grep": {"mode": "content", "numFiles": 0, "filenames": [], "content": content},
        "Bash": bash(content),
    }[tool]
    assert await call(wb, post(tool, tool_input, response, wb.workspace)) == {}


@pytest.mark.anyio
async def test_a_look_alike_path_is_not_the_spill_folder(wb: Workbench) -> None:
    content = text_of(9000)
    response = {"type": "text", "file": {"filePath": "x", "content": content, "numLines": 1, "startLine": 1,
                                         "totalLines": 1}}
    lookalike = str(wb.root) + "/spill-old/abc.txt"
    out = await call(wb, post("Read", {"file_path": lookalike}, response, wb.workspace))
    assert updated(out)["file"]["content"] == pointer(wb, content, read=True)[0]
    escape = str(wb.spill) + "/../notes/n.md"
    out = await call(wb, post("Read", {"file_path": escape}, response, wb.workspace))
    assert updated(out)["file"]["content"] == pointer(wb, content, read=True)[0]


# --- installation (S-15, S-17) ------------------------------------------------------------------


@pytest.mark.anyio
async def test_main_only_skips_subagents_default_spills_both(wb: Workbench) -> None:
    data = post("Bash", {"command": "x"}, bash(text_of(5000)), wb.workspace, agent=SUB)
    assert await call(wb, data, main_only=True) == {}
    assert updated(await call(wb, data))["stdout"].startswith("[5000 chars saved to ")
    main = post("Bash", {"command": "x"}, bash(text_of(5000)), wb.workspace)
    assert updated(await call(wb, main, main_only=True))["stdout"].startswith("[5000 chars saved to ")


def test_spill_guard_installs_one_matcher_on_the_bulky_tools(wb: Workbench) -> None:
    hooks = spill_guard(wb)
    assert list(hooks) == ["PostToolUse"]
    (matcher,) = hooks["PostToolUse"]
    assert isinstance(matcher, HookMatcher)
    assert matcher.matcher == BULKY == "Bash|Read|Grep|Glob|WebFetch|WebSearch"
    assert len(matcher.hooks) == 1


@pytest.mark.parametrize("threshold", [None, 0])
def test_threshold_none_or_zero_installs_nothing(wb: Workbench, threshold: int | None) -> None:
    assert spill_guard(wb, threshold=threshold) == {}


def test_negative_threshold_is_a_config_error(wb: Workbench) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        spill_guard(wb, threshold=-5)


@pytest.mark.anyio
async def test_spill_folder_is_created_on_demand(tmp_path: Path) -> None:
    wb = Workbench(tmp_path)  # never ensured
    out = await call(wb, post("Bash", {"command": "x"}, bash(text_of(5000)), tmp_path))
    assert Path(updated(out)["stdout"].split(" saved to ")[1].split(";")[0]).parent == wb.spill


def test_pointer_layouts(tmp_path: Path) -> None:
    spill = spill_mod.Spill("abc", tmp_path / "abc.txt", 9000, "one\ntwo\nthr")
    line = texts.SPILL_POINTER.format(chars=9000, path=tmp_path / "abc.txt")
    assert spill_mod.spill_pointer(spill) == f"{line}\none\ntwo\nthr"
    assert spill_mod.spill_pointer(spill, lines_first=True) == f"one\ntwo\n{line}"  # the cut line is dropped
    minified = spill_mod.Spill("abc", tmp_path / "abc.txt", 9000, "x" * 400)
    assert spill_mod.spill_pointer(minified, lines_first=True) == "x" * 400 + "\n" + line
    assert line.count("\n") == 0
