"""The test suite's own rules: no test reaches a real model, the unit tests mirror flower's packages, and no
test module imports another (shared helpers live in tests/support, shared fixtures in conftest.py)."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from flower.cli.launch import CREDENTIALS
from tests.conftest import CLOSED_BASE_URL
from tests.conftest import CREDENTIALS as REMOVED

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
UNIT = TESTS / "unit"
# Tests of the root package, of the docs' requirement ids and of the suite itself; everything else sits in the folder of what it tests.
ROOT_TESTS = {
    "test_design_ids.py", "test_layout.py", "test_public_api.py", "test_portability.py", "test_review_fixes.py",
    "test_suite.py",
}

INNER = '''
import os

def test_inner():
    assert [n for n in {names!r} if n in os.environ] == []
    assert os.environ["ANTHROPIC_BASE_URL"] == {url!r}
'''


def test_no_credentials_and_a_closed_api_address_inside_a_test() -> None:
    assert set(CREDENTIALS) <= set(REMOVED)  # every credential the CLI front door accepts
    assert [name for name in REMOVED if name in os.environ] == []
    assert os.environ["ANTHROPIC_BASE_URL"] == CLOSED_BASE_URL
    url = urlsplit(CLOSED_BASE_URL)
    with pytest.raises(ConnectionRefusedError), socket.create_connection((url.hostname, url.port), timeout=5):
        pass


def run_inner(tmp_path: Path, *plugin: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_inner.py"
    test.write_text(INNER.format(names=REMOVED, url=CLOSED_BASE_URL), encoding="utf-8")
    env = {**os.environ, **dict.fromkeys(REMOVED, "sk-ant-a-real-looking-key"),
           "ANTHROPIC_BASE_URL": "https://api.anthropic.com", "PYTHONPATH": str(REPO),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, str(test)]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_fixture_removes_credentials_the_outer_environment_has(tmp_path: Path) -> None:
    """A pytest run whose own environment has real-looking credentials and the real API address: with the
    suite's conftest its test sees neither; without it, the same test fails (so the check can fail)."""
    guarded = run_inner(tmp_path, "-p", "tests.conftest")
    assert guarded.returncode == 0, guarded.stdout + guarded.stderr
    bare = run_inner(tmp_path)
    assert bare.returncode == 1 and "AssertionError" in bare.stdout and "ANTHROPIC_API_KEY" in bare.stdout


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_no_test_module_imports_another() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for name in imported_modules(path):
            # tests/ itself is on sys.path too, so `unit.…`, `e2e.…`, `data.…` and `support.…` would reach the
            # same modules under other names.
            root = name.split(".")[0]
            if root in ("unit", "e2e", "data", "support") or name.startswith(("tests.unit", "tests.e2e")):
                offenders.append(f"{path.relative_to(REPO)} imports {name}")
    assert offenders == []


def test_unit_tests_mirror_flowers_packages() -> None:
    packages = {p.parent.name for p in (REPO / "flower").glob("*/__init__.py")}
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - packages <= {"bench"}, "a unit test folder that mirrors no flower package"
    assert all((UNIT / name / "__init__.py").is_file() for name in folders)
    assert {p.name for p in UNIT.glob("test_*.py")} <= ROOT_TESTS, "a package's test sits at the root"
