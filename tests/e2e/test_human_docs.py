"""docs/human.md's example runs as written, against the scripted model (issue #14)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DOC = Path(__file__).parents[2] / "docs" / "human.md"


def _runs_as_printed(page: str, tmp_path: Path) -> None:
    """The page's first python example followed by "It prints:" runs and prints exactly that."""
    code, printed = re.findall(r"```python\n(.*?)```\n\nIt prints:\n\n```\n(.*?)```", page, re.S)[0]
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run([sys.executable, str(tmp_path / "example.py")], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines() == printed.strip().splitlines()


def test_the_whole_run_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    _runs_as_printed(DOC.read_text(encoding="utf-8"), tmp_path)


def test_the_approvals_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    _runs_as_printed(DOC.read_text(encoding="utf-8").split("## Approvals", 1)[1], tmp_path)
