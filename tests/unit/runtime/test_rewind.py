"""The points a run can be rewound to, how `--to` names one, and the file checkpoints (issue #28 item 4)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

from flower.errors import ConfigError, UnsafePathError
from flower.runtime.checkpoints import FileCheckpoints, parse_time
from flower.runtime.rewind import choose, points

S1, S2 = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


def entry(kind: str, uuid: str, when: str, content: Any, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message["model"] = extra.pop("model", "claude-x")
    return {"type": kind, "uuid": uuid, "timestamp": f"2026-01-01T10:00:{when}Z", "message": message, **extra}


def transcript() -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": "t1", "name": "Agent",
            "input": {"subagent_type": "fixer", "description": "fix the bug", "prompt": "..."}}
    return [
        {"type": "queue-operation"},
        entry("user", "u-prompt", "01.000", "## Workbench contents (/w)\nscripts/ (0):\n\nFix the bug."),
        entry("user", "u-meta", "01.100", "<reminder>", isMeta=True),
        entry("assistant", "a-call", "02.000", [call]),
        entry("user", "u-result", "05.000", [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]),
        entry("assistant", "a-synthetic", "05.500", [{"type": "text", "text": "No response"}], model="<synthetic>"),
        entry("assistant", "a-text", "06.000", [{"type": "text", "text": "Fixed.\nAll good."}]),
    ]


def test_points_are_prompts_prose_and_results_numbered_over_the_sessions() -> None:
    second = [entry("user", "v-prompt", "09.000", [{"type": "text", "text": "Check it."}])]
    steps = [{"step": "fix", "session_id": S1, "started": "2026-01-01T10:00:00+00:00"},
             {"step": "check", "session_id": S2, "started": "2026-01-01T10:00:08+00:00"}]
    found = points({S1: transcript(), S2: second}, steps)
    assert [(p.index, p.uuid, p.who, p.text, p.step) for p in found] == [
        (1, "u-prompt", "you", "Fix the bug.", "fix"),
        (2, "u-result", "main", "after fixer: fix the bug", "fix"),
        (3, "a-text", "main", "Fixed. All good.", "fix"),
        (4, "v-prompt", "you", "Check it.", "check"),
    ]
    assert choose(found, "2").uuid == "u-result" and choose(found, "#4").uuid == "v-prompt"
    assert choose(found, "check", steps).uuid == "v-prompt"  # a step: its first prompt
    labelled = [{**steps[0], "step": "fix#retry1", "started": "2026-01-01T10:00:05+00:00"}, {**steps[0], "step": "fix"},
                {**steps[1], "step": "check[1]"}]
    assert choose(found, "fix", labelled).uuid == "u-prompt"  # its first attempt
    assert choose(found, "check", labelled).uuid == "v-prompt"  # a fan-out item's label
    assert choose(found, "u-resu").uuid == "u-result"  # a unique prefix of 6 or more
    with pytest.raises(ConfigError, match=r"no message #5: the run has 4 to rewind to \(1-4\)"):
        choose(found, "5")
    with pytest.raises(ConfigError, match="message a-call is not a point to rewind to"):
        choose(found, "a-call", steps, {S1: transcript()})
    with pytest.raises(ConfigError, match="no message or step nothing"):
        choose(found, "nothing", steps)
    with pytest.raises(ConfigError, match="--to is empty"):
        choose(found, " ")


def test_a_flower_prompt_is_the_runtimes_and_a_rewound_row_is_not_the_step() -> None:
    from flower import texts

    entries = [entry("user", "h", "01.000", texts.HANDOFF_RETRY)]
    found = points({S1: entries}, [{"step": "fix", "session_id": S1}])
    assert found[0].who == "runtime"
    steps = [{"step": "fix", "session_id": S2, "rewound_from": {"session_id": S1}}]
    with pytest.raises(ConfigError, match="no message or step fix"):
        choose(points({S2: transcript()}, steps), "fix", steps)


def _at(checkpoints: FileCheckpoints) -> list[datetime]:
    return [parse_time(json.loads(line)["time"]) for line in checkpoints.log.read_text().splitlines()]


def test_checkpoints_give_each_file_as_it_was_and_a_restore_is_undoable(tmp_path: Path) -> None:
    cp = FileCheckpoints(tmp_path / "runs")
    with pytest.raises(ConfigError, match="has no file checkpoints"):
        cp.records()
    cp.ensure()
    ws = tmp_path / "ws"
    ws.mkdir()
    a, new = ws / "a.txt", ws / "new.txt"
    a.write_text("one")
    start = datetime.now(timezone.utc) - timedelta(seconds=1)
    cp.record(a, tool="Edit")
    a.write_text("two")
    cp.record(new, tool="Write")
    new.write_text("made")
    middle = max(_at(cp))
    cp.record(a, tool="Edit")
    a.write_text("three")

    assert cp.state_at(middle) == {str(a): cp.records()[2]["blob"]}
    done = cp.restore(start, roots=[ws])
    assert (a.read_text(), new.exists()) == ("one", False)
    assert sorted((Path(r.path).name, r.action) for r in done) == [("a.txt", "restored"), ("new.txt", "removed")]
    cp.restore(middle, roots=[ws])  # forward again: the restore recorded what it replaced
    assert (a.read_text(), new.read_text()) == ("two", "made")


def test_the_hook_records_a_workers_edit_before_it_runs(tmp_path: Path) -> None:
    cp = FileCheckpoints(tmp_path / "runs")
    cp.ensure()
    (tmp_path / "f.txt").write_text("before")
    hook = cp.hook()
    assert hook.matcher == "Write|Edit|MultiEdit|NotebookEdit"
    data = {"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": {"file_path": "f.txt"},
            "cwd": str(tmp_path), "session_id": S1, "agent_id": "w1"}
    out = anyio.run(hook.hooks[0], data, "toolu_1", {"signal": None})
    assert out == {}
    (row,) = cp.records()
    assert (row["path"], row["agent"], row["call"], row["tool"]) == (str(tmp_path / "f.txt"), "w1", "toolu_1", "Edit")
    assert (cp.folder / "blobs" / row["blob"]).read_text() == "before"


def test_a_restore_writes_only_inside_its_roots_and_checks_every_path_first(tmp_path: Path) -> None:
    cp = FileCheckpoints(tmp_path / "runs")
    cp.ensure()
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    (ws / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    inside, outside = ws / "sub" / "in.txt", elsewhere / "out.txt"
    start = datetime.now(timezone.utc) - timedelta(seconds=1)
    for path in (inside, outside):
        path.write_text("old")
        cp.record(path, tool="Edit")
        path.write_text("new")
    done = cp.restore(start, roots=[ws])
    assert (inside.read_text(), outside.read_text()) == ("old", "new")
    assert [(Path(r.path).name, r.action) for r in done] == [("in.txt", "restored"), ("out.txt", "skipped")]

    # a folder on the way replaced by a symlink (to where the agent never wrote): refused, nothing written
    later = datetime.now(timezone.utc)
    cp.record(inside, tool="Edit")
    inside.write_text("newer")
    (ws / "sub").rename(ws / "moved")
    (ws / "sub").symlink_to(elsewhere)
    (elsewhere / "in.txt").write_text("not yours")
    with pytest.raises(UnsafePathError, match="symlink"):
        cp.restore(later, roots=[ws])
    assert (elsewhere / "in.txt").read_text() == "not yours"

    # a log line naming a blob that is not there: one error line, nothing restored
    cp2 = FileCheckpoints(tmp_path / "runs2")
    cp2.ensure()
    cp2.log.write_text(json.dumps({"time": "2026-01-01T00:00:01+00:00", "path": str(ws / "x"), "blob": "../../etc"})
                       + "\n")
    with pytest.raises(ConfigError, match="is missing from"):
        cp2.restore(parse_time("2026-01-01T00:00:00Z"), roots=[ws])


def test_no_rewind_under_a_running_step(tmp_path: Path) -> None:
    import os
    import socket

    from flower.runtime._cli_launch import started
    from flower.runtime.rewind import rewind

    runs = tmp_path / "runs"
    FileCheckpoints(runs).ensure()
    (runs / "children").mkdir()
    record = {"pid": os.getpid(), "pgid": os.getpgid(0), "start": started(os.getpid()),
              "host": socket.gethostname(), "parent": os.getpid(), "parent_start": started(os.getpid())}
    (runs / "children" / "cli.json").write_text(json.dumps(record))
    steps = [{"step": "fix", "session_id": S1}]
    with pytest.raises(ConfigError, match=f"a step is running in run dir .*pid {os.getpid()}"):
        anyio.run(lambda: rewind(runs, None, {}, {S1: transcript()}, "1", steps=steps,  # type: ignore[arg-type]
                                 workspace=tmp_path))
    assert not (runs / "manifest.json").exists()


def test_a_committed_checkpoints_link_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    runs, outside = tmp_path / "runs", tmp_path / "outside"
    runs.mkdir()
    outside.mkdir()
    (runs / "checkpoints").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symlink"):
        FileCheckpoints(runs).ensure()
    assert list(outside.iterdir()) == []
