"""Reading a history in chain order: every entry after its parent, whatever order it was appended in.

A store returns entries in append order. Entries back-filled after a dropped mirror batch
(`flower.stores.backfill`) were appended after entries the CLI wrote later, so append order no longer
follows the `parentUuid` chain, and a resume of it would pick the wrong leaf. `chain_order` is a pure,
stable reordering applied before any rewrite: an entry whose parent comes later in the list (or waits itself) moves to just
after that parent (with its own late children after it); everything else keeps its place.

Invariants: a list already in chain order is returned unchanged (the same entries, the same order); every
entry is returned exactly once, even for a damaged chain (a cycle keeps the stored order); O(entries).
"""

from __future__ import annotations

from typing import Any

__all__ = ["chain_order"]


def _uuid(entry: Any) -> str | None:
    value = entry.get("uuid") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def _parent(entry: Any) -> str | None:
    value = entry.get("parentUuid") if isinstance(entry, dict) else None
    return value if isinstance(value, str) else None


def chain_order(entries: list[Any]) -> list[Any]:
    """`entries` with each entry placed after its parent (stable; see the module docstring)."""
    position = {u: i for i, e in enumerate(entries) if (u := _uuid(e)) is not None}
    if not any(position.get(_parent(e) or "", -1) > i for i, e in enumerate(entries)):
        return entries  # the common case: nothing was appended out of order
    waiting: dict[str, list[int]] = {}
    placed: set[int] = set()
    out: list[Any] = []

    def place(index: int) -> None:
        stack = [index]
        while stack:
            i = stack.pop()
            if i in placed:
                continue
            placed.add(i)
            out.append(entries[i])
            stack.extend(reversed(waiting.pop(_uuid(entries[i]) or "", [])))

    for i, entry in enumerate(entries):
        parent = _parent(entry)
        if parent is not None and parent in position and position[parent] not in placed:
            waiting.setdefault(parent, []).append(i)  # its parent comes later, or waits itself
        else:
            place(i)
    for i in range(len(entries)):  # a damaged chain (a cycle): the rest in stored order
        if i not in placed:
            place(i)
    return out
