"""The windows overflows showed, kept per endpoint and model in the run dir (issue #26 item 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower.runtime.calibration import FILE, Windows

EP = "http://127.0.0.1:9"


def test_a_window_is_kept_per_endpoint_and_model_and_read_by_the_next_runtime(tmp_path: Path) -> None:
    windows = Windows(tmp_path)
    assert windows.learn(EP, "claude-opus-5-5", 150_000)
    assert not windows.learn(EP, "claude-opus-5-5", 160_000)  # a larger one teaches nothing
    assert windows.learn(EP + "/", "claude-opus-5-5", 140_000)
    again = Windows(tmp_path)
    assert again.get(EP, "claude-opus-5-5") == 140_000
    assert again.get(EP, "claude-sonnet-5-5") is None and again.get("https://api.anthropic.com", "claude-opus-5-5") is None


def test_two_runtimes_on_one_run_dir_keep_each_others_windows(tmp_path: Path) -> None:
    one, two = Windows(tmp_path), Windows(tmp_path)
    one.learn(EP, "a", 100_000)
    two.learn(EP, "b", 90_000)
    assert Windows(tmp_path).get(EP, "a") == 100_000 and Windows(tmp_path).get(EP, "b") == 90_000


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b'{"windows": {"x a": "big", "y b": true, "z c": 12}}',
                                     b'{"windows": [], "answered": "x"}'])
def test_a_malformed_file_is_no_calibration(tmp_path: Path, content: bytes) -> None:
    (tmp_path / FILE).write_bytes(content)
    windows = Windows(tmp_path)
    assert windows.get("x", "a") is None and windows.get("z", "c") is None
    assert windows.learn(EP, "m", 50_000)
    assert json.loads((tmp_path / FILE).read_text()) == {"windows": {f"{EP} m": 50_000}, "answered": []}


def test_an_endpoint_that_answered_is_remembered(tmp_path: Path) -> None:
    windows = Windows(tmp_path)
    assert not windows.answered(EP)
    windows.mark_answered(EP + "/")
    assert Windows(tmp_path).answered(EP) and not Windows(tmp_path).answered("http://127.0.0.1:10")
