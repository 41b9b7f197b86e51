"""A run dir as the runtime creates it, and the one check every opener of a run-dir file makes first.

A run dir created by flower gets a `.gitignore` of `*`, so full transcripts and the session database never
show up as untracked files in the user's repository.

A repository is untrusted input, and its committed `runs/` may hold symlinks: a link at `runs/human.db`,
`runs/sessions.db`, `runs/dbos.sqlite`, `runs/locks/` or `runs/.manifest.lock` would make flower create or
write those files wherever the link points (the mailbox stores question text verbatim). `checked_path`
refuses, with one line naming the path, a path whose final component or any folder between its anchor and
it is a symlink (dangling or not), or that exists but is not a regular file (a FIFO or a device would block
or swallow writes). SQLite's side files (`-wal`, `-shm`, `-journal`) are checked the same way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from flower.errors import UnsafePathError

__all__ = ["make_run_dir", "checked_path", "checked_sqlite", "SQLITE_SIDECARS"]

GITIGNORE = "# written by flower: run dirs hold full transcripts; keep them out of version control\n*\n"

SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
"""The files SQLite creates beside a database file."""


def make_run_dir(path: Path) -> Path:
    """Create `path` (and its parents) if needed; a directory flower creates gets a `.gitignore` of `*`.
    An existing directory is left as it is. A run dir that is itself a symbolic link (a `runs` a repository
    committed) is refused: every check of the files in it is anchored at it, so it must be a real folder."""
    if path.is_symlink():
        raise UnsafePathError(f"run dir {path} is a symbolic link (to {os.readlink(path)}): flower keeps a run's "
                              "state in a real folder only; remove the link or name another run dir with -r")
    path = path.resolve()
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        (path / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    return path


def _kind(info: os.stat_result) -> str:
    mode = info.st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "not a regular file"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _refuse_link(path: Path, info: os.stat_result | None) -> None:
    if info is not None and stat.S_ISLNK(info.st_mode):
        target = os.readlink(path)
        raise UnsafePathError(f"{path} is a symlink (to {target}): refusing to follow it; flower opens nothing "
                              "in its run dir through a symlink (remove the link)")


def checked_path(path: str | os.PathLike[str], anchor: str | os.PathLike[str] | None = None, *,
                 directory: bool = False, sidecars: tuple[str, ...] = ()) -> Path:
    """`path`, once no folder between `anchor` (default: its own folder) and it, nor `path` itself, is a
    symlink, and `path` is a regular file (a folder when `directory`) or missing; each `path + suffix` of
    `sidecars` is checked as a file too. Raises `UnsafePathError` (one line naming the path) otherwise."""
    path = Path(path)
    base = Path(anchor) if anchor is not None else path.parent
    try:
        parts = path.relative_to(base).parts
    except ValueError:
        raise UnsafePathError(f"{path} is not inside {base}: refusing to open it") from None
    if any(part == ".." for part in parts):
        raise UnsafePathError(f"{path} leaves {base}: refusing to open it")
    here = base
    for part in parts[:-1]:
        here = here / part
        info = _lstat(here)
        _refuse_link(here, info)
        if info is not None and not stat.S_ISDIR(info.st_mode):
            raise UnsafePathError(f"{here} is {_kind(info)}, not a folder: refusing to open {path}")
    _check_final(path, directory)
    for suffix in sidecars:
        _check_final(path.with_name(path.name + suffix), False)
    return path


def _check_final(path: Path, directory: bool) -> None:
    info = _lstat(path)
    _refuse_link(path, info)
    if info is None:
        return
    wanted = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    if not wanted:
        what = "a folder" if directory else "a regular file"
        raise UnsafePathError(f"{path} is {_kind(info)}, not {what}: refusing to open it")


def checked_sqlite(path: str | os.PathLike[str], anchor: str | os.PathLike[str] | None = None) -> Path:
    """`checked_path` for a SQLite database: the file and the side files SQLite creates beside it."""
    return checked_path(path, anchor, sidecars=SQLITE_SIDECARS)
