"""Readers decode per line: one bad byte costs one line, never the file (issue #16 item 15)."""

from __future__ import annotations

import json
from pathlib import Path

from flower.report.rundata import _read_spill_log
from flower.stores.jsonl import decode_line, read_jsonl


def line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


FIRST = {"type": "user", "uuid": "u1", "message": {"content": "caf\u00e9"}}
THIRD = {"type": "assistant", "uuid": "a3", "message": {"content": "\u20ac ok"}}


def hostile_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + line(FIRST)  # a BOM before the first entry
        + b'{"type": "user", "uuid": "u2", "message": {"content": "bad \xff byte"}}\n'  # one invalid byte
        + line(THIRD)
        + b'{"type": "user", "uuid": "u4", "message": {"content": "\xe2\x82'
    )  # a crash mid-write: the last line ends inside a 3-byte character
    return path


def test_a_bom_an_invalid_byte_and_a_torn_tail_cost_at_most_their_own_line(tmp_path: Path) -> None:
    read = read_jsonl(hostile_file(tmp_path))
    assert [e["uuid"] for e in read.entries] == ["u1", "u2", "a3"]
    assert read.entries[0] == FIRST and read.entries[2] == THIRD
    assert read.entries[1]["message"]["content"] == "bad \ufffd byte"
    (bad, torn) = read.errors
    assert (bad.line, bad.kept) == (2, 1) and "invalid UTF-8 (bytes ff" in bad.reason and "kept" in bad.reason
    assert torn.line == 4 and torn.kept == 0 and "torn at the end" in torn.reason


def test_without_salvage_a_line_with_bad_bytes_is_skipped(tmp_path: Path) -> None:
    read = read_jsonl(hostile_file(tmp_path), salvage=False)
    assert [e["uuid"] for e in read.entries] == ["u1", "a3"]
    assert [e.line for e in read.errors] == [2, 4]


def test_decode_line_strips_a_bom_only_on_the_first_line() -> None:
    assert decode_line(b"\xef\xbb\xbf{}", first=True) == ("{}", None)
    assert decode_line(b"\xef\xbb\xbf{}")[0] == "\ufeff{}"
    assert decode_line("\ufeff{}", first=True) == ("{}", None)


def test_the_reports_spill_log_reader_keeps_every_good_line(tmp_path: Path) -> None:
    spill = tmp_path / "wb" / "spill"
    spill.mkdir(parents=True)
    records = [{"hash": f"h{n}", "tool": "Bash", "field": "stdout", "chars": 5000 + n, "agent": "main"}
               for n in range(3)]
    (spill / "log.jsonl").write_bytes(
        b"\xef\xbb\xbf" + line(records[0]) + b'{"hash": "\xff"}\n' + line(records[1]) + line(records[2])
        + b'{"hash": "h9", "tool": "B\xc3'  # torn at the end
    )
    assert _read_spill_log(tmp_path / "wb") == records
