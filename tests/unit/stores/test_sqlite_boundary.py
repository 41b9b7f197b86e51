"""The SQLite store at its edges: a page-corrupted file is refused, a read-only one is still readable
(issue #16 item 13, S-18)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flower.errors import StoreError
from flower.stores import _sqlite_file as sqlite_module
from flower.stores.sqlite import SqliteSessionStore

REPO = Path(__file__).resolve().parents[3]
KEY = {"project_key": "-ws", "session_id": "11111111-1111-4111-8111-111111111111"}


def filled(path: Path, batches: int = 20) -> Path:
    with SqliteSessionStore(path) as store:
        for b in range(batches):
            store.append_sync(KEY, [{"type": "user", "uuid": f"u{b}-{i}", "cwd": str(path.parent),
                                     "message": {"role": "user", "content": f"row {b}-{i} " + "x" * 300}}
                                    for i in range(50)])
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def corrupt_a_page(path: Path, page: int) -> None:
    """Overwrite one page in the middle of the file, as a torn write or a bad sector would."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big") or 65536
    data[page * size + 8 : (page + 1) * size] = bytes(range(256)) * ((size - 8) // 256) + bytes((size - 8) % 256)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("readonly", [False, True])
def test_a_page_corrupted_file_is_refused_before_anything_is_written(tmp_path: Path, readonly: bool) -> None:
    db = filled(tmp_path / "s.db")
    sqlite_module._CHECKED.clear()
    corrupt_a_page(db, page=len(db.read_bytes()) // 4096 // 2)
    before = digest(db)
    with pytest.raises(StoreError) as caught:
        SqliteSessionStore(db, readonly=readonly)
    message = str(caught.value)
    assert "corrupted" in message and str(db) in message and "\n" not in message
    assert digest(db) == before  # refused untouched: no append lands in a file nobody can read back


def test_a_healthy_file_is_checked_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = filled(tmp_path / "s.db", batches=2)
    sqlite_module._CHECKED.clear()
    calls: list[Path] = []
    real = sqlite_module.check_integrity

    def counting(conn: object, path: Path) -> None:
        calls.append(path)
        real(conn, path)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_module, "check_integrity", counting)
    for _ in range(3):
        SqliteSessionStore(db, readonly=True).close()
    assert len(calls) == 3 and len(sqlite_module._CHECKED) == 1


def test_readonly_opening_never_writes_and_refuses_what_is_not_a_store(tmp_path: Path) -> None:
    db = filled(tmp_path / "s.db", batches=2)
    before = digest(db)
    with SqliteSessionStore(db, readonly=True) as store:
        assert len(store.load_sync(KEY) or []) == 100
        with pytest.raises(StoreError, match="read-only"):
            store.append_sync(KEY, [{"type": "user", "uuid": "new"}])
    assert digest(db) == before
    with pytest.raises(StoreError, match="no session store"):
        SqliteSessionStore(tmp_path / "missing.db", readonly=True)
    (tmp_path / "empty.db").write_bytes(b"")
    with pytest.raises(StoreError, match="empty SQLite file"):
        SqliteSessionStore(tmp_path / "empty.db", readonly=True)
    assert (tmp_path / "empty.db").read_bytes() == b""


def _read_only_mount_works(folder: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    command = f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder}"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", command], check=False, capture_output=True)
    return probe.returncode == 0


def test_report_reads_a_store_on_a_read_only_filesystem(tmp_path: Path) -> None:
    """A real read-only mount (a private mount namespace): `flower report` reads it and never calls it
    "not a flower session store"; `run` is refused with one line saying why."""
    runs = tmp_path / "runs"
    runs.mkdir()
    filled(runs / "sessions.db", batches=2)
    if not _read_only_mount_works(runs):
        pytest.skip("no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)")
    python = sys.executable
    script = (f"mount --bind {runs} {runs} && mount -o remount,ro,bind {runs} && "
              f"cd {REPO} && {python} -m flower report {runs} --json")
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sessions"] == [KEY["session_id"]]
    assert "not a flower session store" not in done.stderr
    opening = (f"from flower.stores.sqlite import SqliteSessionStore\ntry:\n SqliteSessionStore('{runs}/sessions.db')"
               "\nexcept Exception as e:\n print(e)")
    script = (f"mount --bind {runs} {runs} && mount -o remount,ro,bind {runs} && cd {REPO} && "
              f"{python} -c \"{opening}\"")
    refused = subprocess.run(["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True,
                             timeout=120)
    assert "is on a read-only filesystem or folder" in refused.stdout, refused.stderr
