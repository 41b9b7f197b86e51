"""Docs examples run as written (docs examples come from real runs): the first python block of each guide,
every python block of docs/testing.md (a block that defines `test_` functions runs under pytest), and every
python block of a "Typed results" section, which must print what the page shows below it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs"
REPO = DOCS.parent


def _blocks(guide: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / guide).read_text(), re.DOTALL)


def _run(block: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if re.search(r"^(async )?def test_", block, re.MULTILINE):
        script = tmp_path / "test_example.py"
        script.write_text(block)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                   str(script)]
    else:
        script = tmp_path / "example.py"
        script.write_text(block)
        command = [sys.executable, str(script)]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("guide", ["testing.md", "runtime.md", "rewind.md", "go.md"])
def test_first_example_runs(tmp_path: Path, guide: str) -> None:
    blocks = _blocks(guide)
    assert blocks, f"docs/{guide} has no python block"
    done = _run(blocks[0], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("index", range(1, len(_blocks("testing.md"))))
def test_every_testing_example_runs(tmp_path: Path, index: int) -> None:
    done = _run(_blocks("testing.md")[index], tmp_path)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]


@pytest.mark.parametrize("guide", ["workflows.md", "runtime.md"])
def test_typed_results_examples_print_what_the_page_shows(tmp_path: Path, guide: str) -> None:
    section = (DOCS / guide).read_text().split("\n## Typed results\n", 1)[1].split("\n## ", 1)[0]
    examples = re.findall(r"```python\n(.*?)```\n\nIt prints:\n\n```text\n(.*?)```", section, re.DOTALL)
    assert examples, f"docs/{guide}: the Typed results section has no example with its output"
    for code, shown in examples:
        done = _run(code, tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout == shown
