"""`disk_full`: a full disk is recognised however deep a library wrapped it (issue #26 item 9)."""

from __future__ import annotations

import errno
import sqlite3

from flower.errors import StoreError
from flower.util.oneline import disk_full

AGAIN = "free some space, then run the same command again"


class Wrapped(Exception):
    """Like SQLAlchemy's OperationalError: the driver's error is its `orig`."""

    def __init__(self, orig: BaseException) -> None:
        super().__init__(f"({type(orig).__name__}) {orig}")
        self.orig = orig


def test_a_full_disk_is_one_line_at_any_depth() -> None:
    assert disk_full(OSError(errno.ENOSPC, "No space left on device", "/runs/manifest.json")) == \
        f"no space left on the device writing /runs/manifest.json: {AGAIN}"
    assert disk_full(Wrapped(sqlite3.OperationalError("database or disk is full"))) == \
        f"(OperationalError) database or disk is full: {AGAIN}"
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise RuntimeError("a step failed") from exc
    except RuntimeError as outer:
        assert disk_full(outer) == f"no space left on the device: {AGAIN}"
    assert disk_full(StoreError("session store s.db cannot be used: database or disk is full")) == \
        f"session store s.db cannot be used: database or disk is full: {AGAIN}"


def test_other_errors_are_not_a_full_disk() -> None:
    assert disk_full(OSError(errno.EACCES, "Permission denied", "/runs")) is None
    assert disk_full(sqlite3.OperationalError("database is locked")) is None
    loop = ValueError("x")
    loop.__context__ = loop  # a cycle ends the walk
    assert disk_full(loop) is None
