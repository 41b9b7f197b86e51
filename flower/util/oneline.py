"""An exception (or a message) as the one line a user sees: flower reports errors as one line, never a page.

- `one_line(exc)`: `Type: first line of the message`, or just `Type` when the message is empty;
- `first_line(exc)`: the first line of the message alone, or the type's name when the message is empty
  (a text is taken as it is, and may come back empty).
"""

from __future__ import annotations

__all__ = ["first_line", "one_line"]


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
