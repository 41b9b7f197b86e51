"""The wall's look at the filesystem: what a glance's words name on disk.

Concept. The judge (`flower.walls.glance.judge`) decides from the text alone; the wall also knows the
Bash call's working directory, so it can see what each word names there. `on_disk` refuses a word
that names (directly, through a symlink or through a glob) a FIFO, a socket or a device, a reader that
would open `/` (or `/sys`, `/sys/kernel`, above the trace pipes) or a file over `MAX_READ_BYTES`, and a `git -C` that leaves the working directory.

Invariants.
- Only the wall calls this: it reads the filesystem, and a command it refuses never ran, so the resume
  rewrite (which has no working directory) has no result to expire.
- Every name a word may make its command open is checked: the word itself, each value attached to a
  short option (`-fz`) or after an `=` (`--files0-from=z`), and each match of a glob.
- Bounded: a glob matching more than `_MAX_DISK_CHECKS` names, or more than four times that many names
  in all, is refused rather than checked in part.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

from flower import texts
from flower.walls.glance.options import Refusal, Word, reason
from flower.walls.glance.paths import root_word, special_file

__all__ = ["MAX_READ_BYTES", "Found", "on_disk"]


@dataclass
class Found:
    """What judging a glance learned beyond the verdict: the words the wall checks on disk, and where
    each git command takes its pins."""

    paths: list[tuple[Word, bool, str]]
    """Each word to look up on disk, whether its command reads what it names, and the directory (below
    the working directory) its command resolves it in (`git -C DIR`)."""
    gits: list[tuple[int, list[tuple[int, str]], list[str]]]
    """Per git command: where its pins go, (position, flags) for its subcommand, its `-C` values."""
    programs: list[str] = field(default_factory=list)
    """The program of each simple command, in order."""
    inserts: list[tuple[int, str]] = field(default_factory=list)
    """Flags the wall inserts at a position of the command (`lsof -n`: no host name lookups)."""


_MAX_DISK_CHECKS = 256
"""Names one glob may match before the command is refused (four times as many over all words)."""

MAX_READ_BYTES = 2 << 30
"""A reader may not open a file larger than this (a sparse terabyte reads for hours)."""


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size if os.path.isfile(path) else 0
    except OSError:
        return 0


def _candidates(word: Word, base: str, cwd: str) -> list[tuple[str, bool]] | str:
    """The names a word may make its command open, each with whether it is a value hidden inside an
    option (`-fz`, `--exclude-from=z`, `-o=go-template-file=z`); or a refusal reason."""
    if not word.literal:
        pattern = os.path.expanduser(word.value) if word.value.startswith("~") else word.value
        if word.braced or "{" in pattern:
            return texts.GLANCE_WHY["expansion"].format(what=word.value)
        names = []
        for name in glob.iglob(pattern, root_dir=os.path.join(cwd, base)):
            names.append((name, False))
            if len(names) > _MAX_DISK_CHECKS:
                return texts.GLANCE_WHY["long"]  # never check a part and skip the rest
        return names
    value = word.value
    names = [(value, False)]
    if value.startswith("-") and not value.startswith("--"):
        # A short option's attached value (`grep -fz`, `du -Xz`, `git diff -Oz`): any suffix may be one.
        names += [(value[k:], True) for k in range(2, len(value))]
    for k, ch in enumerate(value):
        if ch == "=" and k + 1 < len(value):
            names.append((value[k + 1 :], True))  # `--files0-from=FIFO`, `-o=go-template-file=z`
    return names


def on_disk(found: Found, cwd: str) -> str | None:
    """The wall's look at the filesystem: no word names a FIFO, socket or device (through a symlink or
    a glob), and `git -C` stays below the working directory."""
    checked = 0
    root = os.path.realpath(cwd)
    for word, reads, base in found.paths:
        names = _candidates(word, base, cwd)
        if isinstance(names, str):
            return names
        where = os.path.join(cwd, base)
        for name, hidden in names:
            if not word.literal and name.startswith(("-", "+")):
                return reason(Refusal("flag", f"{word.value} matches {name}"))  # an option in disguise
            checked += 1
            if checked > _MAX_DISK_CHECKS * 4:
                return texts.GLANCE_WHY["long"]
            if special_file(name, where) or (
                    reads and not hidden and root_word(os.path.realpath(os.path.join(where, os.path.expanduser(name))))):
                return reason(Refusal("device", name))
            if (reads or hidden) and _size(os.path.join(where, os.path.expanduser(name))) > MAX_READ_BYTES:
                return reason(Refusal("endless", f"{name} (over {MAX_READ_BYTES >> 30} GiB)"))
    for _, _, dirs in found.gits:
        where = cwd
        for directory in dirs:  # `git -C a -C b` works in a/b
            where = os.path.join(where, directory)
            real = os.path.realpath(where)
            if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
                return reason(Refusal("outside", f"git -C {directory}"))
    return None
