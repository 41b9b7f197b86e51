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
