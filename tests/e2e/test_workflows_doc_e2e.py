"""docs/workflows.md's worked example runs as written and prints what the page shows (issue #13)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

PAGE = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"


def test_worked_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    page = PAGE.read_text()
    code = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    shown = re.search(r"It prints:\n\n```text\n(.*?)```", page, re.DOTALL)
    assert code and shown
    script = tmp_path / "example.py"
    script.write_text(code.group(1))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == shown.group(1)
