"""The first python block of each guide runs as written (docs examples come from real runs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("guide", ["testing.md", "runtime.md"])
def test_first_example_runs(tmp_path: Path, guide: str) -> None:
    block = re.search(r"```python\n(.*?)```", (DOCS / guide).read_text(), re.DOTALL)
    assert block, f"docs/{guide} has no python block"
    script = tmp_path / "example.py"
    script.write_text(block.group(1))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
