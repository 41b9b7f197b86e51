"""Files in a folder that no symlink can redirect: the workbench's boundary (S-15, B-5; issue #16, 8-10).

A repository is untrusted input. A committed `.flower` symlink, a symlinked `spill/` or `spill/log.jsonl`,
or a symlink planted at a predictable spill file name would otherwise make flower write copies of tool
output (which may hold secrets) outside the workspace, or point the model at an attacker's file.

`Confined(anchor, parts)` names the folder `anchor/parts...`. The anchor is a real path the caller chose
(the workspace, or a workbench the user declared external); every component below it is opened with
`O_NOFOLLOW` relative to its parent's descriptor (`dir_fd`), so a symlink anywhere below the anchor is
refused, even one swapped in after the run started. Files are created with `O_EXCL | O_NOFOLLOW`, renamed
into place inside the same descriptor (`os.replace` with `src_dir_fd`/`dst_dir_fd` replaces a planted
symlink rather than following it), and appended to with `O_APPEND | O_NOFOLLOW`.

Where the platform lacks `O_NOFOLLOW` or `O_DIRECTORY` (Windows), importing this module still works; what
needs them is refused at use with one `UnsafePathError` line, since without them a symlink could redirect
the write. `O_CLOEXEC` and `O_NONBLOCK` only tighten and are left out where missing.

`resolve_inside(workspace, rel)` is the one check for a folder that must stay in the workspace: it resolves
the path (a symlink that stays inside is fine) and refuses one that leads out, dangling ones included.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePath

from flower.errors import UnsafePathError

__all__ = ["Confined", "resolve_inside", "append_text", "read_note", "replace_text"]

_CHUNK = 1 << 20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)  # no descriptor inheritance to stop where the platform lacks it
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # only guards against a FIFO, a POSIX thing


def _required(name: str) -> int:
    """The `os.O_*` flag `name`; refused with one line where the platform has none (Windows)."""
    flag = getattr(os, name, None)
    if flag is None:
        raise UnsafePathError(f"this platform ({sys.platform}) has no os.{name}: flower refuses to open run and "
                              "workbench files without it (a symlink could redirect them)")
    return int(flag)


def _nofollow() -> int:
    return _required("O_NOFOLLOW") | _CLOEXEC


def _dir_flags() -> int:
    return os.O_RDONLY | _required("O_DIRECTORY") | _nofollow()


def resolve_inside(workspace: str | os.PathLike[str], rel: str | os.PathLike[str]) -> tuple[str, ...]:
    """The parts of `workspace/rel` after resolving every symlink, relative to the real workspace.

    Raises `UnsafePathError` when the resolved path is not the workspace or below it (a symlink that leads
    out, dangling or not).
    """
    base = os.path.realpath(workspace)
    wanted = os.path.join(base, os.fspath(rel))
    real = os.path.realpath(wanted)
    if real != base and not real.startswith(base.rstrip(os.sep) + os.sep):
        raise UnsafePathError(
            f"{wanted} resolves to {real}, outside the workspace {base}: refusing to write there "
            "(remove the symlink, or name an external workbench explicitly)"
        )
    return PurePath(os.path.relpath(real, base)).parts if real != base else ()


def _plain(folder: Path, name: str) -> str:
    """`name` when it names an entry of the folder itself (no separator, not `.` or `..`)."""
    if not name or name in (".", "..") or "/" in name or os.sep in name or "\0" in name:
        raise UnsafePathError(f"{folder}: {name!r} is not a plain file name")
    return name


def _refusal(path: Path, error: OSError) -> UnsafePathError:
    if os.path.islink(path):
        return UnsafePathError(f"{path} is a symlink: refusing to follow it (nothing of the workbench is written "
                               "through a symlink)")
    return UnsafePathError(f"{path} is in the way: {error.strerror.lower() if error.strerror else error}")


class Confined:
    """The folder `anchor/parts...`, reached without following any symlink below `anchor`."""

    def __init__(self, anchor: str | os.PathLike[str], parts: tuple[str, ...] = ()) -> None:
        self.anchor = Path(anchor)
        self.parts = tuple(p for p in parts if p not in ("", "."))
        if any(p == ".." or "/" in p or os.sep in p for p in self.parts):
            raise UnsafePathError(f"{self.anchor.joinpath(*self.parts)}: a confined path has plain names only")

    @property
    def path(self) -> Path:
        return self.anchor.joinpath(*self.parts)

    def __repr__(self) -> str:
        return f"Confined({str(self.path)!r})"

    def child(self, *parts: str) -> Confined:
        return Confined(self.anchor, self.parts + parts)

    @contextlib.contextmanager
    def open(self, *, create: bool = True) -> Iterator[int]:
        """A descriptor of the folder (created on the way when `create`); closed on exit."""
        try:
            fd = os.open(self.anchor, os.O_RDONLY | _required("O_DIRECTORY") | _CLOEXEC)
        except FileNotFoundError:
            if not create:
                raise
            os.makedirs(self.anchor, exist_ok=True)  # the anchor is the caller's own choice
            fd = os.open(self.anchor, os.O_RDONLY | _required("O_DIRECTORY") | _CLOEXEC)
        try:
            here = self.anchor
            for part in self.parts:
                here = here / part
                child = self._step(fd, part, here, create)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _step(fd: int, part: str, here: Path, create: bool) -> int:
        try:
            try:
                child = os.open(part, _dir_flags(), dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _dir_flags(), dir_fd=fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refusal(here, error) from None
            raise
        return child

    def make(self) -> Path:
        """Create the folder (idempotent); returns its path."""
        with self.open():
            return self.path

    def lexists(self, name: str) -> bool:
        """Whether `name` exists in the folder, a symlink (dangling or not) included."""
        _plain(self.path, name)
        with self.open() as fd:
            try:
                os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            return True

    def read_bytes(self, name: str) -> bytes | None:
        """The bytes of the regular file `name`, or None when it is missing, a symlink or not a file."""
        _plain(self.path, name)
        with self.open() as fd:
            try:
                handle = os.open(name, os.O_RDONLY | _nofollow(), dir_fd=fd)
            except OSError:
                return None
            with os.fdopen(handle, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return None
                return f.read()

    def holds(self, name: str, size: int, sha256: str) -> bool:
        """True when `name` is a regular file (not a symlink) of `size` bytes with that full sha256."""
        _plain(self.path, name)
        with self.open() as fd:
            return _holds(fd, name, size, sha256)

    def write_atomic(self, name: str, data: bytes, *, prefix: str = ".tmp.") -> None:
        """Write `data` to `name` through a temp file and a rename in the same folder: readers see the old
        or the new file, never half; a symlink at `name` is replaced, never followed."""
        _plain(self.path, name)
        with self.open() as fd:
            tmp = _write_temp(fd, prefix, [data])
            _settle(fd, tmp, name)

    def write_once(self, name: str, data: bytes, *, prefix: str = ".tmp.") -> None:
        """Like `write_atomic`, but nothing is written when `name` already is a regular file holding `data`
        (content-named files: same name, same bytes; anything else there is replaced)."""
        _plain(self.path, name)
        with self.open() as fd:
            if _holds(fd, name, len(data), hashlib.sha256(data).hexdigest()):
                return
            tmp = _write_temp(fd, prefix, [data])
            _settle(fd, tmp, name)

    def append(self, name: str, data: bytes) -> None:
        """One `O_APPEND` write to the regular file `name` (created if missing); refuses a symlink."""
        _plain(self.path, name)
        with self.open() as fd:
            try:
                handle = os.open(
                    name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _nofollow(), 0o644, dir_fd=fd
                )
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _refusal(self.path / name, error) from None
                raise
            try:
                if not stat.S_ISREG(os.fstat(handle).st_mode):
                    raise UnsafePathError(f"{self.path / name} is not a regular file: refusing to append to it")
                os.write(handle, data)
            finally:
                os.close(handle)

    def replace(self, name: str, target: Confined, target_name: str) -> None:
        """Rename `name` here to `target_name` in `target` (no symlink followed on either side)."""
        _plain(self.path, name)
        _plain(target.path, target_name)
        with self.open() as src, target.open() as dst:
            os.replace(name, target_name, src_dir_fd=src, dst_dir_fd=dst)


def _holds(fd: int, name: str, size: int, sha256: str) -> bool:
    try:
        handle = os.open(name, os.O_RDONLY | _nofollow(), dir_fd=fd)
    except OSError:
        return False  # missing, or a symlink (ELOOP): does not count
    with os.fdopen(handle, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size != size:
            return False
        digest = hashlib.sha256()
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest() == sha256


def _write_temp(fd: int, prefix: str, chunks: Iterator[bytes] | list[bytes]) -> str:
    """A new temp file in the folder holding `chunks`; its name. Removed again if writing fails."""
    for _ in range(100):
        tmp = f"{prefix}{secrets.token_hex(8)}.tmp"
        try:
            handle = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _nofollow(), 0o600, dir_fd=fd
            )
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(errno.EEXIST, "no free temp file name", prefix)
    try:
        with os.fdopen(handle, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise
    return tmp


def _settle(fd: int, tmp: str, name: str) -> None:
    try:
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


class TempFile:
    """A temp file being written in a confined folder, renamed to its final name (or removed) at the end.

    For content whose name is known only after writing (a streamed copy named by its hash).
    """

    def __init__(self, fd: int, prefix: str) -> None:
        self.fd = fd
        self.name = _write_temp(fd, prefix, [])
        self.handle = os.open(self.name, os.O_WRONLY | _nofollow(), dir_fd=fd)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.handle, view) :]

    def finish(self, name: str, size: int, sha256: str) -> None:
        """Give it `name`, unless `name` already is a regular file with this content (then drop it)."""
        os.close(self.handle)
        self.handle = -1
        if _holds(self.fd, name, size, sha256):
            os.unlink(self.name, dir_fd=self.fd)
        else:
            _settle(self.fd, self.name, name)

    def discard(self) -> None:
        if self.handle >= 0:
            os.close(self.handle)
            self.handle = -1
        with contextlib.suppress(OSError):
            os.unlink(self.name, dir_fd=self.fd)


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Append `text` to the file `path`, creating it; never through a symlink a repository may have planted
    there (OSError ELOOP instead)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _nofollow(), 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(text)


def replace_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write the file `path` whole, atomically: a fresh temp file (O_EXCL, so a planted name is never
    followed) renamed over it; a symlink at `path` is replaced, not followed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


MAX_NOTE_BYTES = 4 << 20
"""A note flower reads back (brief, goal, verdict, run state) is never larger than this."""


def read_note(path: str | os.PathLike[str], limit: int = MAX_NOTE_BYTES) -> str | None:
    """The text of the regular file `path`, or None when it is missing, a symlink, not a regular file
    (a FIFO or a device would never end) or over `limit` bytes. Invalid UTF-8 is replaced, never fatal."""
    try:
        fd = os.open(path, os.O_RDONLY | _nofollow() | _NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return handle.read(limit + 1)[:limit].decode("utf-8", "replace")
