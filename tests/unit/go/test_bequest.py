"""The bequest block in CLAUDE.md / AGENTS.md (L-14): idempotent, never deleting user text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from flower.errors import ConfigError
from flower.go.bequest import BEGIN, END, Bequest, merge_block, write_bequest, write_block

BODY = Bequest(what="A CSV importer.", workbench=".flower/: read notes/brief.md first").body()
user_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300).filter(
    lambda t: BEGIN not in t and END not in t
)


def test_absent_file_gets_the_block_only(tmp_path: Path) -> None:
    assert write_block(tmp_path / "CLAUDE.md", BODY)
    text = (tmp_path / "CLAUDE.md").read_text()
    assert text.startswith(BEGIN + "\n") and text.endswith(END + "\n")
    assert "### What this is\nA CSV importer." in text


@given(user_text)
@example("\r")  # a lone CR before the block must not make the next write see CRLF
def test_user_text_kept_and_repeat_is_byte_identical(user: str) -> None:
    once = merge_block(user, BODY)
    assert once.startswith(user)
    assert merge_block(once, BODY) == once
    changed = merge_block(once, BODY.replace("CSV", "TSV"))
    assert changed.startswith(user) and "TSV" in changed and "CSV importer" not in changed


@pytest.mark.parametrize(
    "broken",
    [f"mine\n{BEGIN}\nold\n", f"mine\n{END}\nold\n{BEGIN}\n", f"{BEGIN}\na\n{END}\n{BEGIN}\nb\n{END}\nmine\n"],
    ids=["orphan-begin", "misordered", "two-blocks"],
)
def test_broken_markers_append_and_never_delete(broken: str) -> None:
    merged = merge_block(broken, BODY)
    assert merged.startswith(broken)
    assert merge_block(merged, BODY) == merged  # appended once, not on every run


def test_replaces_only_between_one_pair_keeping_crlf() -> None:
    before = f"top\r\n{BEGIN}\r\nold body\r\n{END}\r\nbottom\r\n"
    merged = merge_block(before, BODY)
    assert merged.startswith(f"top\r\n{BEGIN}\r\n") and merged.endswith(f"{END}\r\nbottom\r\n")
    assert "old body" not in merged and "\n" not in merged.replace("\r\n", "")


def test_a_body_holding_a_marker_cannot_break_the_block() -> None:
    merged = merge_block("", f"x\n{END}\ny")
    assert merged.count(END) == 1 and merge_block(merged, f"x\n{END}\ny") == merged


def test_symlinked_target_is_refused_and_untouched(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(outside, ws / "CLAUDE.md")
    with pytest.raises(ConfigError, match="symlink"):
        write_bequest(ws, Bequest(what="w", workbench="b"))
    assert outside.read_text() == "secret\n"


def test_non_utf8_user_bytes_survive(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_bytes(b"caf\xe9 notes\n")
    write_block(path, BODY)
    assert path.read_bytes().startswith(b"caf\xe9 notes\n")


def test_missing_required_sections_give_the_degraded_fallback() -> None:
    bequest = Bequest.from_sections({"what": "", "acceptance": "all met"}, request="fix the bug",
                                    workbench_hint=".flower/ (notes/, artifacts/, scripts/)")
    assert bequest.degraded and "what, workbench" in bequest.degraded
    body = bequest.body()
    assert "fix the bug" in body and ".flower/ (notes/" in body and "all met" in body
    assert not Bequest.from_sections({"what": "w", "workbench": "b"}, request="r", workbench_hint="h").degraded
