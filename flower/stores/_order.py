"""Reading a history in chain order: every entry after its parent, whatever order it was appended in.

A store returns entries in append order. Entries back-filled after a dropped mirror batch
(`flower.stores.backfill`) were appended after entries the CLI wrote later, so append order no longer
follows the `parentUuid` chain, and a resume of it would pick the wrong leaf. `chain_order` is a pure,
stable reordering applied before any rewrite: an entry whose parent comes later in the list (or waits itself) moves to just
after that parent (with its own late children after it); everything else keeps its place.

A parent is *placed* once the first entry carrying its uuid is (the CLI can write one entry twice). Only
links that reach a root are followed (an entry naming itself as parent is a root): an entry whose ancestry
runs into a cycle (a damaged chain) keeps its stored place. Both rules depend on the entries, not on their order, so the
result is a fixed point: `chain_order(chain_order(x)) == chain_order(x)`, which a rewrite's idempotence needs.

Invariants: a list already in chain order is returned unchanged (the same entries, the same order); every
entry is returned exactly once, whatever its parent chain looks like; O(entries).
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


def _links(entries: list[Any]) -> dict[int, str]:
    """position -> parent uuid, for each entry whose parent chain reaches a root (the links to follow)."""
    present = {u for e in entries if (u := _uuid(e)) is not None}
    children: dict[str, list[int]] = {}
    frontier: list[str] = []
    for i, entry in enumerate(entries):
        parent, u = _parent(entry), _uuid(entry)
        if parent is not None and parent in present and parent != u:
            children.setdefault(parent, []).append(i)
        elif u is not None:
            frontier.append(u)  # a root: no parent, one the list does not hold, or itself
    links: dict[int, str] = {}
    reached: set[str] = set()
    while frontier:
        u = frontier.pop()
        if u in reached:
            continue
        reached.add(u)
        for i in children.get(u, ()):
            links[i] = u
            if (child := _uuid(entries[i])) is not None:
                frontier.append(child)
    return links


def chain_order(entries: list[Any]) -> list[Any]:
    """`entries` with each entry placed after its parent (stable; see the module docstring)."""
    first: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if (u := _uuid(entry)) is not None:
            first.setdefault(u, i)
    if all(first.get(parent, -1) < i for i, entry in enumerate(entries)
           if (parent := _parent(entry)) is not None and parent != _uuid(entry)):
        return entries  # the common case: every parent comes first (so every chain reaches a root)
    links = _links(entries)
    waiting: dict[str, list[int]] = {}
    placed: set[str] = set()
    out: list[Any] = []

    def place(index: int) -> None:
        stack = [index]
        while stack:
            i = stack.pop()
            out.append(entries[i])
            u = _uuid(entries[i])
            if u is not None and u not in placed:
                placed.add(u)
                stack.extend(reversed(waiting.pop(u, [])))

    for i in range(len(entries)):
        parent = links.get(i)
        if parent is not None and parent not in placed:
            waiting.setdefault(parent, []).append(i)  # its parent comes later, or waits itself
        else:
            place(i)
    return out  # every followed link reaches a root, so nothing is left waiting
