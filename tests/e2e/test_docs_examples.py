"""The first python block of docs/testing.md runs as written (docs examples come from real runs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_testing_md_first_example_runs(tmp_path: Path) -> None:
    block = re.search(r"```python\n(.*?)```", (DOCS / "testing.md").read_text(), re.DOTALL)
    assert block, "docs/testing.md has no python block"
    script = tmp_path / "example.py"
    script.write_text(block.group(1))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
