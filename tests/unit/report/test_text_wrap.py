"""CJK-aware wrapping for the interactive terminal (issue #15, L-12)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len

from flower.report.text import wrap

alphabet = st.sampled_from(list("abc xyz ,.!") + list("中文字符。，！」") + ["CRLF", " ", "  "])
paragraphs = st.lists(alphabet, max_size=80).map("".join)


@given(paragraphs, st.integers(min_value=8, max_value=100))
def test_every_line_fits_and_nothing_is_lost(text: str, width: int) -> None:
    lines = wrap(text, width, first="? ", hang="  ")
    assert all(cell_len(line) <= width for line in lines)
    assert lines[0].startswith("? ") and all(line.startswith("  ") for line in lines[1:])
    assert "".join(line[2:] for line in lines).replace(" ", "") == text.replace(" ", "")


def test_latin_breaks_at_spaces_cjk_anywhere_and_no_line_starts_with_closing_punctuation() -> None:
    assert wrap("alpha beta gamma", 11) == ["alpha beta", "  gamma"]
    lines = wrap("中文中文中文中文。好", 10, hang="")
    assert not any(line.startswith("。") for line in lines)
    assert all(cell_len(line) <= 10 for line in lines)
    assert wrap("中文中文。", 8, hang="") == ["中文中", "文。"]
