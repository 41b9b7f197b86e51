"""The workbench's boundary: no symlink carries a write out of the workspace (issue #16 items 8-10, S-15, B-5).

Each test plants what a hostile repository could commit (a `.flower`, `spill/`, `spill/log.jsonl`,
`INDEX.md` or spill-file symlink) and checks that the place it points at is left exactly as it was.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from flower.errors import FlowerError, UnsafePathError
from flower.runtime.handoff import save_handoff
from flower.stores.trim import TrimPolicy, spill_text, trim_results
from flower.util.confined import Confined, resolve_inside
from flower.workbench.bench import Workbench
from flower.workbench.spill import LOG_NAME, spill_callback
from tests.support.hooks import hook_input

BIG = "".join(f"secret line {n}\n" for n in range(600))


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (what must not change)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep.txt").write_text("attacker's file\n")
    return path


async def spill_bash(wb: Workbench, output: str = BIG) -> dict[str, Any]:
    data = hook_input("PostToolUse", "Bash", {"command": "cat log"},
                      tool_response={"stdout": output, "stderr": "", "interrupted": False, "isImage": False},
                      cwd=str(wb.workspace))
    result: dict[str, Any] = await spill_callback(wb, threshold=100)(data, "toolu_1", {"signal": None})
    return result


# --- 8: the workbench folder itself ----------------------------------------------------------------


def test_a_flower_symlink_out_of_the_workspace_is_refused_with_one_line(ws: Path, outside: Path) -> None:
    (ws / ".flower").symlink_to(outside)
    with pytest.raises(UnsafePathError) as caught:
        Workbench(ws)
    message = str(caught.value)
    assert "\n" not in message and str(ws / ".flower") in message and "outside the workspace" in message
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


def test_a_dangling_flower_symlink_is_one_clear_error_not_a_traceback(ws: Path, tmp_path: Path) -> None:
    (ws / ".flower").symlink_to(tmp_path / "nowhere" / "deeper")
    with pytest.raises(FlowerError, match="outside the workspace"):
        Workbench(ws).ensure()
    assert not (tmp_path / "nowhere").exists()


def test_a_flower_symlink_that_stays_inside_is_followed_once(ws: Path) -> None:
    (ws / "build").mkdir()
    (ws / ".flower").symlink_to("build/wb")  # dangling until ensure() makes it
    wb = Workbench(ws).ensure()
    assert wb.root == ws.resolve() / "build" / "wb" and (ws / "build" / "wb" / "spill").is_dir()
    assert not wb.external


def test_an_explicit_external_root_is_allowed(ws: Path, outside: Path) -> None:
    wb = Workbench(ws, root=outside / "wb").ensure()
    assert wb.external and (outside / "wb" / "scripts").is_dir()


def test_resolve_inside_refuses_dot_dot_through_a_symlink(ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        resolve_inside(ws, "link/spill")
    assert resolve_inside(ws, "a/b") == ("a", "b")


def test_a_symlinked_section_is_refused_by_ensure(ws: Path, outside: Path) -> None:
    (ws / ".flower").mkdir()
    (ws / ".flower" / "spill").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="is a symlink"):
        Workbench(ws).ensure()
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


@pytest.mark.anyio
async def test_a_symlinked_spill_folder_swapped_in_mid_run_gets_nothing(ws: Path, outside: Path) -> None:
    """The check is per write (dir_fd walk with O_NOFOLLOW), not once at start: a model's `ln -s` mid-run
    cannot redirect the next spill."""
    wb = Workbench(ws).ensure()
    os.rmdir(wb.spill)
    wb.spill.symlink_to(outside)
    assert await spill_bash(wb) == {}  # the model gets the original output
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


@pytest.mark.anyio
async def test_a_symlinked_spill_log_is_never_appended_to(ws: Path, outside: Path) -> None:
    wb = Workbench(ws).ensure()
    (wb.spill / LOG_NAME).symlink_to(outside / "keep.txt")
    assert await spill_bash(wb) == {}
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


def test_a_symlinked_index_is_replaced_not_written_through(ws: Path, outside: Path) -> None:
    wb = Workbench(ws).ensure()
    wb.index_path.symlink_to(outside / "keep.txt")
    assert wb.refresh() is True
    assert not wb.index_path.is_symlink() and "scripts" in wb.index_path.read_text()
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}
    assert wb.refresh() is False  # written only when the text changes, as before


def test_symlinked_ignore_markers_are_left_alone(ws: Path, outside: Path) -> None:
    (ws / ".flower").mkdir()
    (ws / ".flower" / ".gitignore").symlink_to(outside / "gitignore")
    Workbench(ws).ensure()
    assert not (outside / "gitignore").exists() and (ws / ".flower" / ".ignore").read_text() == "spill/\n"


def test_handoff_notes_through_a_symlinked_archive_are_refused(ws: Path, outside: Path) -> None:
    wb = Workbench(ws).ensure()
    save_handoff(wb.folder("notes"), "step", "one")
    (wb.notes / "handoffs").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        save_handoff(wb.folder("notes"), "step", "two")
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}
    assert (wb.notes / "handoff-step.md").read_text() == "one\n"


# --- 9: the predictable spill file name ----------------------------------------------------------


def spill_name(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()[:16] + ".txt"


@pytest.mark.anyio
@pytest.mark.parametrize("planted", ["symlink", "other-content", "same-size-other-content"])
async def test_a_planted_spill_file_does_not_count(ws: Path, outside: Path, planted: str) -> None:
    """An existing spill file counts only when it is a regular file holding the same bytes."""
    wb = Workbench(ws).ensure()
    target = wb.spill / spill_name(BIG)
    if planted == "symlink":
        target.symlink_to(outside / "keep.txt")
    elif planted == "other-content":
        target.write_text("not the output\n")
    else:
        target.write_text(BIG.replace("secret", "SECRET"))
    replaced = await spill_bash(wb)
    assert str(target) in replaced["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert not target.is_symlink() and target.read_text() == BIG
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


@pytest.mark.anyio
async def test_an_identical_spill_file_is_kept_as_it_is(ws: Path) -> None:
    wb = Workbench(ws).ensure()
    target = wb.spill / spill_name(BIG)
    target.write_text(BIG)
    before = target.stat().st_ino
    await spill_bash(wb)
    assert target.stat().st_ino == before  # not rewritten
    assert sorted(os.listdir(wb.spill)) == sorted([target.name, LOG_NAME])  # no temp file left


# --- 10: trim on load ----------------------------------------------------------------------------


def transcript_with_results(count: int, body: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    parent = None
    for n in range(count):
        use = {"type": "assistant", "uuid": f"a{n}", "parentUuid": parent,
               "message": {"id": f"m{n}", "role": "assistant",
                           "content": [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {}}]}}
        result = {"type": "user", "uuid": f"u{n}", "parentUuid": f"a{n}",
                  "message": {"role": "user",
                              "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": body + str(n)}]}}
        entries += [use, result]
        parent = f"u{n}"
    return entries


@pytest.mark.parametrize("link", [".flower", ".flower/spill"])
def test_trim_through_a_symlink_out_of_the_workspace_writes_nothing_and_says_so(
    ws: Path, outside: Path, link: str
) -> None:
    if link == ".flower/spill":
        (ws / ".flower").mkdir()
    (ws / link).symlink_to(outside)
    entries = transcript_with_results(3, "x" * 3000)
    out, report = trim_results(entries, workspace=ws, policy=TrimPolicy(keep_recent=1, min_chars=100))
    assert out == entries and report.trimmed == 0 and report.skipped == 1
    assert "outside the workspace" in report.details[0].note and "skipped" in str(report)
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


def test_trim_replaces_a_planted_symlink_at_the_spill_name(ws: Path, outside: Path) -> None:
    body = "y" * 3000 + "0"
    folder = ws / ".flower" / "spill"
    folder.mkdir(parents=True)
    (folder / spill_name(body)).symlink_to(outside / "keep.txt")
    entries = transcript_with_results(2, "y" * 3000)
    _, report = trim_results(entries, workspace=ws, policy=TrimPolicy(keep_recent=1, min_chars=100))
    assert report.trimmed == 1 and (folder / spill_name(body)).read_text() == body
    assert not (folder / spill_name(body)).is_symlink()
    assert snapshot(outside) == {"keep.txt": b"attacker's file\n"}


def test_spill_text_with_a_plain_path_is_its_own_anchor(tmp_path: Path) -> None:
    path = spill_text(tmp_path, "hello")
    assert path.read_text() == "hello" and path.parent == tmp_path.resolve()
    with pytest.raises(UnsafePathError):
        Confined(tmp_path, ("..", "x"))


def test_a_symlinked_workbench_file_is_listed_but_never_read(ws: Path, outside: Path) -> None:
    """The index reads a file's first lines for its description: a symlink to a file outside the workspace
    must not carry that file's text into INDEX.md or the prompt."""
    (outside / "secret.py").write_text("# desc: TOP-SECRET-LINE\n")
    wb = Workbench(ws).ensure()
    (wb.scripts / "check.py").symlink_to(outside / "secret.py")
    (wb.scripts / "own.py").write_text("# desc: my own check\n")
    listing = wb.listing_block()
    assert "scripts/check.py" in listing and "my own check" in listing
    assert "TOP-SECRET-LINE" not in listing and "TOP-SECRET-LINE" not in wb.index_text()


@pytest.mark.parametrize("name", ["a/b", "..", ".", "", "x\0y"])
def test_file_operations_take_plain_names_only(tmp_path: Path, name: str) -> None:
    folder = Confined(tmp_path, ("f",))
    for call in (lambda: folder.write_atomic(name, b"x"), lambda: folder.append(name, b"x"),
                 lambda: folder.read_bytes(name), lambda: folder.lexists(name)):
        with pytest.raises(UnsafePathError, match="not a plain file name"):
            call()
