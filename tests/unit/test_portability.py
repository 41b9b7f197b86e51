"""`import flower` needs no POSIX-only module (issue #17 item 12): the manifest lock is `filelock`."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import flower
from flower.runtime.steps import append_manifest

POSIX_ONLY = {"fcntl", "termios", "tty", "pty", "resource", "grp", "pwd"}


def test_no_flower_module_imports_a_posix_only_module() -> None:
    root = Path(flower.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] in POSIX_ONLY]
    assert offenders == []


def test_the_manifest_lock_is_a_filelock(tmp_path: Path) -> None:
    append_manifest(tmp_path, {"run_id": "a"})
    append_manifest(tmp_path, {"run_id": "b"})
    assert [r["run_id"] for r in json.loads((tmp_path / "manifest.json").read_text())["steps"]] == ["a", "b"]
    assert (tmp_path / ".manifest.lock").exists()


WITHOUT_POSIX_FLAGS = """
import os, signal, sys
for name in ("O_DIRECTORY", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK"):
    delattr(os, name)
del signal.SIGHUP
import flower, flower.cli.app
from flower.errors import UnsafePathError
from flower.flow.signals import guard
from flower.util.confined import Confined, append_text

with guard(interactive=False):
    pass
for attempt in (lambda: append_text(sys.argv[1] + "/note.md", "x"), lambda: Confined(sys.argv[1], ("a",)).make()):
    try:
        attempt()
    except UnsafePathError as exc:
        print(exc)
"""


def test_import_flower_works_without_the_posix_only_flags_and_what_needs_them_is_refused_at_use(
        tmp_path: Path) -> None:
    """Windows has no O_NOFOLLOW / O_DIRECTORY / O_CLOEXEC / SIGHUP (issue #26 item 12)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WITHOUT_POSIX_FLAGS, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"this platform ({sys.platform}) has no os.O_NOFOLLOW",
                                                      f"this platform ({sys.platform}) has no os.O_DIRECTORY"]
    assert list(tmp_path.iterdir()) == []  # nothing was written without the flags
