"""Every bench module runs on tiny inputs and returns well-formed rows, so none can rot (issue #8;
docs/benchmarks.md).

The numbers themselves are not asserted (no timing assertions in tests); their shape is: the six keys,
a finite value, a finite ratio or None, and at least one row. The modules that drive the real CLI
(economy, guards) are e2e.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from bench.__main__ import discover, run_one
from bench._table import KEYS, normalize
from tests.support.transcripts import TRANSCRIPTS

CLI_MODULES = {"economy", "endurance", "guards", "placement", "tracing"}
TRANSCRIPT_MODULES = {"resume_payload", "rewrite", "store"}


def _params() -> list[Any]:
    return [pytest.param(name, marks=[pytest.mark.e2e] if name in CLI_MODULES else [], id=name)
            for name in discover()]


def test_the_suite_has_the_promised_modules() -> None:
    """The headline, the resume payload, hook overhead and start-up are all benchmarked."""
    assert {"economy", "resume_payload", "guards", "startup"} <= set(discover())


@pytest.mark.parametrize("name", _params())
def test_module_runs_tiny_and_returns_well_formed_rows(name: str) -> None:
    if name in TRANSCRIPT_MODULES and not TRANSCRIPTS.is_dir():
        pytest.skip(f"bench {name} reads the real transcripts, not found at {TRANSCRIPTS} (set FLOWER_TRANSCRIPTS)")
    rows, info = run_one(name, tiny=True)
    assert info.get("error") is None, info.get("traceback")
    assert rows, f"bench {name} returned no rows"
    for r in rows:
        assert set(KEYS) <= set(r), r
        assert r["bench"] == name and r["case"] and isinstance(r["unit"], str)
        assert isinstance(r["value"], float) and math.isfinite(r["value"]), r
        assert r["ratio"] is None or math.isfinite(r["ratio"]), r
        assert isinstance(r["note"], str)
    assert len({r["case"] for r in rows}) == len(rows), "case names must be unique within a bench"


def test_normalize_keeps_a_broken_row_visible() -> None:
    """A module's odd row is adapted, not dropped: missing keys filled, a bad value shown as nan."""
    fixed = normalize({"case": "x", "value": "oops", "ratio": float("inf"), "series": [1]}, "demo")
    assert fixed["bench"] == "demo" and fixed["unit"] == "" and fixed["ratio"] is None
    assert math.isnan(fixed["value"]) and "not a finite number" in fixed["note"]
    assert fixed["series"] == [1]
