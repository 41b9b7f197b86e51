"""An exception (or a message) as the one line a user sees: flower reports errors as one line, never a page.

- `one_line(exc)`: `Type: first line of the message`, or just `Type` when the message is empty;
- `first_line(exc)`: the first line of the message alone, or the type's name when the message is empty
  (a text is taken as it is, and may come back empty);
- `disk_full(exc)`: the one line for an error that is, or was caused by, a full disk (ENOSPC, EDQUOT,
  SQLite's "database or disk is full", however deep a library wrapped it), else None.
"""

from __future__ import annotations

import errno

__all__ = ["disk_full", "first_line", "one_line"]

_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
_FULL_TEXTS = ("database or disk is full", "no space left on device", "disk quota exceeded")


def first_line(what: BaseException | str) -> str:
    """The first line of an exception's message (its type's name when it has none), or of a text."""
    text = (what if isinstance(what, str) else str(what)).strip()
    if text:
        return text.splitlines()[0].strip()
    return "" if isinstance(what, str) else type(what).__name__


def one_line(exc: BaseException) -> str:
    """`Type: first line of the message`, or `Type` when the message is empty."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0].strip()}" if text else type(exc).__name__


def disk_full(exc: BaseException) -> str | None:
    """One line naming what could not be written when `exc` (or a cause under it) is a full disk, else None."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        here = todo.pop()
        if here is None or id(here) in seen:
            continue
        seen.add(id(here))
        if isinstance(here, OSError) and here.errno in _FULL_ERRNOS:
            where = f" writing {here.filename}" if here.filename else ""
            return f"no space left on the device{where}: free some space, then run the same command again"
        if any(text in str(here).lower() for text in _FULL_TEXTS):
            return f"{first_line(here)}: free some space, then run the same command again"
        todo += [here.__cause__, here.__context__, getattr(here, "orig", None)]
    return None
