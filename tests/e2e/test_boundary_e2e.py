"""The workbench's boundary through `flower once` and the real CLI (issue #16 items 8-9, S-15, B-5).

A hostile repository commits symlinks where flower writes: `.flower` itself, the spill log, the INDEX.md,
the predictable spill file of an output. Each test runs the real CLI against the scripted API in such a
repository and checks that the place a symlink points at is byte for byte what it was.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flower import texts
from flower.cli import cli
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = pytest.mark.e2e

ATTACKER = b"attacker's file\n"


def lines_output(n: int) -> str:
    return "".join(f"L{i:05d} " + "abcdefghij" * 4 + "\n" for i in range(n)) + "END"


def lines_command(n: int) -> str:
    return ("python3 -c \"import sys; sys.stdout.write(''.join('L%05d ' % i + 'abcdefghij' * 4 + chr(10) "
            f"for i in range({n})) + 'END')\"")


def invoke(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def commit_repo(ws: Path) -> None:
    """Make `ws` a git repository with everything in it committed (symlinks included, as git keeps them)."""
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep.txt").write_bytes(ATTACKER)
    return path


def test_a_committed_flower_symlink_refuses_the_run_in_one_line(
    scripted_api: ScriptedAPI, tmp_path: Path, outside: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".flower").symlink_to(outside)
    commit_repo(ws)
    scripted_api.script([])  # nothing may be asked: the run is refused before the CLI starts
    done = invoke(scripted_api.cli_env(tmp_path / "home"), "once", "look", "--tools", "Bash",
                  "-w", str(ws), "-r", str(tmp_path / "runs"))
    assert done.exit_code == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith("flower: ") and "outside the workspace" in line and str(ws / ".flower") in line
    assert snapshot(outside) == {"keep.txt": ATTACKER}
    assert scripted_api.main_requests == []


def test_planted_index_and_spill_file_symlinks_are_replaced_and_the_model_gets_the_real_output(
    scripted_api: ScriptedAPI, tmp_path: Path, outside: Path
) -> None:
    """Item 9: the spill file named by the output's hash is a symlink to the attacker's file; the model's
    pointer must lead to the real output, and the attacker's file must not change. INDEX.md likewise."""
    output = lines_output(400)
    name = hashlib.sha256(output.encode()).hexdigest()[:16] + ".txt"
    ws = tmp_path / "ws"
    (ws / ".flower" / "spill").mkdir(parents=True)
    (ws / ".flower" / "spill" / name).symlink_to(outside / "keep.txt")
    (ws / ".flower" / "INDEX.md").symlink_to(outside / "index.md")
    commit_repo(ws)
    scripted_api.script([tool_use("Bash", {"command": lines_command(400)}), text("read it")])
    done = invoke(scripted_api.cli_env(tmp_path / "home"), "once", "look", "--tools", "Bash",
                  "-w", str(ws), "-r", str(tmp_path / "runs"))
    assert done.exit_code == 0, done.output
    spill = ws.resolve() / ".flower" / "spill" / name
    seen = scripted_api.main_requests[1].result_text()
    assert seen.startswith(texts.SPILL_POINTER.format(chars=len(output), path=spill))
    assert not spill.is_symlink() and spill.read_text() == output
    assert not (ws / ".flower" / "INDEX.md").is_symlink()
    assert snapshot(outside) == {"keep.txt": ATTACKER}


def test_a_committed_spill_log_symlink_gets_no_line_and_the_model_the_whole_output(
    scripted_api: ScriptedAPI, tmp_path: Path, outside: Path
) -> None:
    output = lines_output(400)  # 19,000+ chars: over the 4,000 threshold
    ws = tmp_path / "ws"
    (ws / ".flower" / "spill").mkdir(parents=True)
    (ws / ".flower" / "spill" / "log.jsonl").symlink_to(outside / "keep.txt")
    commit_repo(ws)
    scripted_api.script([tool_use("Bash", {"command": lines_command(400)}), text("read it")])
    done = invoke(scripted_api.cli_env(tmp_path / "home"), "once", "look", "--tools", "Bash",
                  "-w", str(ws), "-r", str(tmp_path / "runs"))
    assert done.exit_code == 0, done.output
    seen = scripted_api.main_requests[1].result_text()
    assert output[-200:] in seen and "chars saved to" not in seen  # refused spill: the original output
    assert snapshot(outside) == {"keep.txt": ATTACKER}
