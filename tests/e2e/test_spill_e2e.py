"""Spill on the spot through the real CLI (issue #4, S-15, S-16, B-5, docs/sdk-notes.md#output-replacement,
#large-bash-output).

A replacement of the wrong shape is dropped by the CLI without a word (docs/sdk-notes.md#output-replacement),
so a unit test of the hook's return value proves nothing about what the model saw. Every test here reads what
the model saw: the tool_result of the NEXT request the CLI sent to the scripted API. A recording PostToolUse
hook beside the spill guard keeps the original tool_response, to compare the spill file with.

Each test prints one `spill-e2e` line per call: the original output's chars and the chars of the
tool_result the model got (`pytest -s` shows them).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AgentDefinition, HookMatcher

from flower import texts
from flower.testing import ScriptedAPI, collect, text, tool_use
from flower.walls.guard import merge_hooks
from flower.workbench.bench import Workbench
from flower.workbench.spill import HEAD_CHARS, spill_guard

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

POINTER_MARK = "chars saved to"
CLI_INLINE_CAP = 30_000  # the CLI's own Bash cap (docs/sdk-notes.md#large-bash-output)


class Recorder:
    """A PostToolUse hook keeping each call's original tool_response (hooks all get the same input)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, input_data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        self.calls.append({"tool": input_data.get("tool_name"), "agent": input_data.get("agent_id"),
                           "response": input_data.get("tool_response")})
        return {}

    def of(self, tool: str) -> list[Any]:
        return [c["response"] for c in self.calls if c["tool"] == tool]


@pytest.fixture
def wb(workspace: Path) -> Workbench:
    return Workbench(workspace).ensure()


def hooks(wb: Workbench, recorder: Recorder) -> dict[str, list[HookMatcher]]:
    return merge_hooks({"PostToolUse": [HookMatcher(matcher=None, hooks=[recorder])]}, spill_guard(wb))


def spill_path(wb: Workbench, content: str) -> Path:
    """Where B-5 puts `content`: named by its sha256, computed here independently."""
    return wb.spill / f"{hashlib.sha256(content.encode('utf-8')).hexdigest()[:16]}.txt"


def expected_pointer(wb: Workbench, content: str) -> str:
    line = texts.SPILL_POINTER.format(chars=len(content), path=spill_path(wb, content))
    return f"{line}\n{content[:HEAD_CHARS]}"


def log_lines(wb: Workbench) -> list[dict[str, Any]]:
    path = wb.spill / "log.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def report(case: str, original: int, seen: str) -> None:
    print(f"spill-e2e {case}: original {original} chars, tool_result seen {len(seen)} chars, "
          f"kept out {original - len(seen)}")


def lines_output(n: int) -> str:
    """What `lines_command(n)` prints: n numbered 48-char lines, then END (no trailing newline, so the
    CLI's output trimming cannot change it)."""
    return "".join(f"L{i:05d} " + "abcdefghij" * 4 + "\n" for i in range(n)) + "END"


def lines_command(n: int) -> str:
    return ("python3 -c \"import sys; sys.stdout.write(''.join('L%05d ' % i + 'abcdefghij' * 4 + chr(10) "
            f"for i in range({n})) + 'END')\"")


# --- Bash in a worker, under and over the CLI's own cap -------------------------------------------


async def test_worker_bash_20k_and_60k_are_spilled_whole_and_reading_a_spill_file_passes(
    scripted_api: ScriptedAPI, make_options: Any, wb: Workbench
) -> None:
    """S-15, S-16, B-5, docs/sdk-notes.md#large-bash-output: the subagent sees pointer + 400 chars; the files
    hold everything, the 60,000-char one copied from the CLI's persisted file; reads of spill files are not
    re-spilled."""
    small, big = lines_output(400), lines_output(1250)
    assert 4000 < len(small) < CLI_INLINE_CAP < len(big)
    small_path, big_path = spill_path(wb, small), spill_path(wb, big)
    scripted_api.script(
        [tool_use("Agent", {"description": "print logs", "prompt": "SPILL-WORKER: print the logs",
                            "subagent_type": "worker", "run_in_background": False}),
         text("main done")],
        subagents={"SPILL-WORKER": [
            tool_use("Bash", {"command": lines_command(400)}),
            tool_use("Bash", {"command": lines_command(1250)}),
            tool_use("Read", {"file_path": str(small_path)}),
            tool_use("Read", {"file_path": str(big_path), "offset": 700, "limit": 150}),
            text("sub done"),
        ]},
    )
    recorder = Recorder()
    worker = AgentDefinition(description="runs commands", prompt="You run commands.", tools=["Bash", "Read"])
    run = await collect("delegate", make_options(agents={"worker": worker}, hooks=hooks(wb, recorder),
                                                 allowed_tools=["Agent", "Bash", "Read"]))
    assert run.result.result == "main done"

    (agent_id,) = scripted_api.subagent_ids
    _, after_small, after_big, after_read_small, after_read_big = scripted_api.subagent_requests(agent_id)
    for case, content, seen in (("worker Bash 19k", small, after_small), ("worker Bash 60k", big, after_big)):
        result = seen.result_text()
        assert result == expected_pointer(wb, content)  # exactly pointer + first 400 chars
        assert "L00399" not in result and "END" not in result
        report(case, len(content), result)
    assert small_path.read_text(encoding="utf-8") == small
    assert big_path.read_text(encoding="utf-8") == big  # whole, although the hook saw only a preview
    big_seen = recorder.of("Bash")[1]
    assert big_seen["persistedOutputSize"] == len(big) and len(big_seen["stdout"]) < len(big)
    assert "persisted-output" not in after_big.result_text()  # the CLI's own wrapper is gone too

    # S-16: Reads of the spill files come back untouched, both over the threshold.
    whole = after_read_small.result_text()
    assert "L00399 abcdefghij" in whole and "END" in whole and POINTER_MARK not in whole
    window = after_read_big.result_text()
    assert len(window) > 4000 and "L00699 abcdefghij" in window and "L00848 abcdefghij" in window
    assert POINTER_MARK not in window
    assert [(r["tool"], r["field"], r["chars"], r["agent"]) for r in log_lines(wb)] == [
        ("Bash", "stdout", len(small), agent_id), ("Bash", "stdout", len(big), agent_id)]
    # The main thread got the worker's report only.
    assert "sub done" in scripted_api.main_requests[-1].result_text()
    assert "L00010" not in scripted_api.main_requests[-1].text


# --- main thread: Read spilled, short Bash untouched ----------------------------------------------


async def test_main_read_of_a_20k_file_is_spilled_and_a_3999_char_bash_is_not(
    scripted_api: ScriptedAPI, make_options: Any, wb: Workbench, workspace: Path
) -> None:
    """S-15: Read keeps the file's own line numbers (head lines, then the pointer); at 3,999 chars a
    Bash output is under the threshold and reaches the model verbatim."""
    body = "".join(f"row {i:04d}: " + "q" * 89 + "\n" for i in range(200))
    assert len(body) == 20_000
    (workspace / "data.txt").write_text(body)
    scripted_api.script([
        tool_use("Read", {"file_path": str(workspace / "data.txt")}),
        tool_use("Bash", {"command": "python3 -c \"print('z' * 3999, end='')\""}),
        text("ok"),
    ])
    recorder = Recorder()
    run = await collect("look", make_options(hooks=hooks(wb, recorder), allowed_tools=["Bash", "Read"]))
    assert run.result.result == "ok"
    _, after_read, after_bash = scripted_api.main_requests

    content = recorder.of("Read")[0]["file"]["content"]
    assert content == body  # what the Read tool produced, and so what the spill file must hold
    read_seen = after_read.result_text()
    shown = read_seen.splitlines()
    assert shown[0] == "1\trow 0000: " + "q" * 89  # numbered as the file is
    pointer = texts.SPILL_POINTER.format(chars=20_000, path=spill_path(wb, body))
    assert shown[-1].endswith(pointer) and len(shown) == 5  # 4 whole head lines, then the pointer
    assert "row 0004" not in read_seen and "row 0199" not in read_seen
    assert spill_path(wb, body).read_text(encoding="utf-8") == body
    report("main Read 20k", len(body), read_seen)

    assert after_bash.result_text() == "z" * 3999
    report("main Bash 3999 (under threshold)", 3999, after_bash.result_text())
    assert [(r["tool"], r["field"], r["chars"], r["agent"]) for r in log_lines(wb)] == [
        ("Read", "content", 20_000, "main")]


# --- Grep content spilled, Glob list untouched ------------------------------------------------------


async def test_grep_content_is_spilled_and_a_long_glob_list_is_not(
    scripted_api: ScriptedAPI, make_options: Any, wb: Workbench, workspace: Path
) -> None:
    """S-15: Grep's content string spills; Glob's filenames are a list and lists are never touched,
    however long their rendering."""
    src = workspace / "src"
    src.mkdir()
    (src / "hits.txt").write_text("".join(f"NEEDLE number {i:03d} " + "h" * 60 + "\n" for i in range(120)))
    names = [f"module_with_a_rather_long_descriptive_name_{i:03d}.py" for i in range(90)]
    for name in names:
        (src / name).write_text("x = 1\n")
    scripted_api.script([
        tool_use("Grep", {"pattern": "NEEDLE", "path": str(src), "output_mode": "content"}),
        tool_use("Glob", {"pattern": "*.py", "path": str(src)}),
        text("searched"),
    ])
    recorder = Recorder()
    tools = ["Bash", "Read", "Grep", "Glob"]
    run = await collect("search", make_options(tools=tools, allowed_tools=tools, hooks=hooks(wb, recorder)))
    assert run.result.result == "searched"
    _, after_grep, after_glob = scripted_api.main_requests

    grep_content = recorder.of("Grep")[0]["content"]
    assert len(grep_content) > 8000 and "NEEDLE number 119" in grep_content
    assert after_grep.result_text() == expected_pointer(wb, grep_content)
    assert spill_path(wb, grep_content).read_text(encoding="utf-8") == grep_content
    report("main Grep content", len(grep_content), after_grep.result_text())

    glob_seen = after_glob.result_text()
    assert len(glob_seen) > 4000 and POINTER_MARK not in glob_seen
    assert all(name in glob_seen for name in names)
    assert recorder.of("Glob")[0]["numFiles"] == 90
    report("main Glob 90 names (list: untouched)", len(glob_seen), glob_seen)
    assert [(r["tool"], r["field"]) for r in log_lines(wb)] == [("Grep", "content")]


# --- WebFetch, served over HTTPS on 127.0.0.1 -------------------------------------------------------

async def test_webfetch_result_is_spilled(
    scripted_api: ScriptedAPI, make_options: Any, wb: Workbench, https_page: tuple[str, Path]
) -> None:
    """S-15: WebFetch's `result` is the answer of a secondary model call on the fetched page (the CLI
    sends it to the same API, as a main-thread request); a long one is spilled like any output."""
    url, cert = https_page
    answer = "".join(f"Finding {i}: the page says something. " for i in range(200))
    scripted_api.script([
        tool_use("WebFetch", {"url": url, "prompt": "list every finding"}),
        text(answer),  # the CLI's secondary call that applies the prompt to the page
        text("fetched"),
    ])
    recorder = Recorder()
    options = make_options(env={"NODE_EXTRA_CA_CERTS": str(cert)}, settings='{"skipWebFetchPreflight": true}',
                           allowed_tools=["WebFetch"], hooks=hooks(wb, recorder))
    run = await collect("fetch", options)
    assert run.result.result == "fetched"
    _, secondary, after_fetch = scripted_api.main_requests
    assert "Paragraph 199: plain words." in secondary.last_user_text()  # the page was really fetched

    (response,) = recorder.of("WebFetch")
    assert response["result"] == answer and response["code"] == 200
    assert after_fetch.result_text() == expected_pointer(wb, answer)
    assert spill_path(wb, answer).read_text(encoding="utf-8") == answer
    report("main WebFetch", len(answer), after_fetch.result_text())
    assert [(r["tool"], r["field"]) for r in log_lines(wb)] == [("WebFetch", "result")]
