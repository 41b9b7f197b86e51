"""A rewrite as a plan of edits decided over an untouched input, then applied in one pass.

Every rewrite stage reads the original entries (through one `TranscriptIndex`) and only records what it
wants changed in a `Plan`; `apply` then builds the new list. This is what keeps the rewrites pure and O(n):

* the input list and its dicts are never mutated; a changed entry is a shallow copy down the changed path
  (entry -> message -> content list -> block), everything unchanged is shared with the input;
* removing an entry relinks every surviving child (and any `leafUuid` pointer) to the nearest surviving
  ancestor, however long the run of removed entries (S-20);
* an entry spliced in after entry P becomes the parent of everything that hung under P after it, so it sits
  on every path through P, and a `leafUuid` naming P now names it. A child stored before the splice point (the
  CLI can write P twice, and the splice follows the later copy) keeps P, so every parent still comes first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from flower.stores._transcript import Entry, TranscriptIndex

RewriteKind = Literal["expired", "trimmed", "denial", "api_error", "interrupt", "orphan", "skipped"]
"""`skipped`: something a rewrite could not understand or do (odd stored shapes, a refused spill folder); it
was left as stored, and `note` says what and why."""

_LEAF_POINTERS = ("last-prompt", "summary")
"""Entry types whose `leafUuid` names the conversation leaf a resume starts from."""


@dataclass(frozen=True)
class RewriteDetail:
    """One change a rewrite made, for `flower preview` and reports."""

    kind: RewriteKind
    uuid: str | None
    """The entry changed or removed (for an orphan: the healing entry added)."""
    tool_use_id: str | None
    chars_saved: int
    """Model-facing characters removed minus characters added (negative when a note was added)."""
    note: str = ""
    """Kind-specific: the expired command, the spill file of a trimmed result, the denied tool's name."""


@dataclass
class Plan:
    blocks: dict[tuple[int, int], dict[str, Any] | None] = field(default_factory=dict)
    """(entry, block) -> replacement block, or None to remove the block."""
    drop: set[int] = field(default_factory=set)
    strip: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Top-level fields to remove from a surviving entry (e.g. the `toolUseResult` copy of a removed block)."""
    after: dict[int, list[Entry]] = field(default_factory=dict)
    details: list[RewriteDetail] = field(default_factory=list)

    def note(self, detail: RewriteDetail) -> None:
        self.details.append(detail)

    def snapshot(self) -> tuple[Any, ...]:
        """A copy of the edits so far, for undoing a stage that failed half way."""
        return (dict(self.blocks), set(self.drop), dict(self.strip),
                {k: list(v) for k, v in self.after.items()}, list(self.details))

    def restore(self, saved: tuple[Any, ...]) -> None:
        self.blocks, self.drop, self.strip, self.after, self.details = (
            dict(saved[0]), set(saved[1]), dict(saved[2]), {k: list(v) for k, v in saved[3].items()}, list(saved[4]))

    @property
    def empty(self) -> bool:
        return not (self.blocks or self.drop or self.strip or self.after)


@dataclass(frozen=True)
class RewriteReport:
    """What one rewrite changed; `details` has one record per change, in pipeline order."""

    entries_in: int = 0
    entries_out: int = 0
    expired: int = 0
    trimmed: int = 0
    chars_saved: int = 0
    """Model-facing characters removed minus notes added, over all rewrites."""
    denials_dropped: int = 0
    api_errors_dropped: int = 0
    interrupts_neutralised: int = 0
    orphans_healed: int = 0
    details: tuple[RewriteDetail, ...] = ()
    skipped: int = 0
    """Things left as stored because a rewrite could not understand or do them (see the `skipped` details)."""

    @classmethod
    def of(cls, entries_in: int, entries_out: int, details: list[RewriteDetail]) -> RewriteReport:
        count: Counter[RewriteKind] = Counter(detail.kind for detail in details)
        return cls(
            entries_in,
            entries_out,
            count["expired"],
            count["trimmed"],
            sum(detail.chars_saved for detail in details),
            count["denial"],
            count["api_error"],
            count["interrupt"],
            count["orphan"],
            tuple(details),
            count["skipped"],
        )

    @property
    def changed(self) -> bool:
        return bool(self.details)

    def __str__(self) -> str:
        parts = [
            f"{value} {label}"
            for value, label in (
                (self.expired, "expired"),
                (self.trimmed, "trimmed"),
                (self.denials_dropped, "denials dropped"),
                (self.api_errors_dropped, "API errors dropped"),
                (self.interrupts_neutralised, "interrupts neutralised"),
                (self.orphans_healed, "orphans healed"),
                (self.skipped, "skipped"),
            )
            if value
        ]
        if not parts:
            return "nothing rewritten"
        return ", ".join(parts) + f"; {self.chars_saved:,} chars saved"


def run_alone(
    entries: list[Entry], stage: Callable[[TranscriptIndex, Plan], None]
) -> tuple[list[Entry], RewriteReport]:
    """One rewrite stage on its own: index, plan, apply, report."""
    plan = Plan()
    stage(TranscriptIndex.build(entries), plan)
    out = apply(entries, plan)
    return out, RewriteReport.of(len(entries), len(out), plan.details)


def apply(entries: list[Entry], plan: Plan) -> list[Entry]:
    """The rewritten list; `entries` is left exactly as it was."""
    if plan.empty:
        return list(entries)
    edits: dict[int, dict[int, dict[str, Any] | None]] = {}
    for (position, number), replacement in plan.blocks.items():
        edits.setdefault(position, {})[number] = replacement
    relink = _Relinker(entries, plan)
    out: list[Entry] = []
    for position, entry in enumerate(entries):
        if position in plan.drop:
            continue
        new = entry
        if position in edits:
            new = _edit_blocks(entry, edits[position])
        if position in plan.strip:
            new = {key: value for key, value in new.items() if key not in plan.strip[position]}
        new = relink.entry(new, position)
        out.append(new)
        out.extend(plan.after.get(position, ()))
    return out


def _edit_blocks(entry: Entry, edits: dict[int, dict[str, Any] | None]) -> Entry:
    message = dict(entry["message"])
    content: list[Any] = []
    for number, block in enumerate(message["content"]):
        if number not in edits:
            content.append(block)
        elif edits[number] is not None:
            content.append(edits[number])
    message["content"] = content
    copy = dict(entry)
    copy["message"] = message
    return copy


class _Relinker:
    """Maps a pointer to a removed entry onto its nearest surviving ancestor, and a splice point to its tail."""

    def __init__(self, entries: list[Entry], plan: Plan) -> None:
        self.removed: dict[str, Any] = {}
        for position in plan.drop:
            uuid = entries[position].get("uuid")  # only dict entries are ever planned for removal
            if isinstance(uuid, str):
                parent = entries[position].get("parentUuid")
                # a parent pointer that is not a string (a dict or list in a broken row) points nowhere: the
                # children of a removed entry then become roots rather than carry the odd value on
                self.removed[uuid] = parent if isinstance(parent, str) else None
        self.tails: dict[str, list[tuple[int, str]]] = {}
        """uuid -> (splice point, uuid of the last entry spliced in there), by splice point."""
        for position, added in sorted(plan.after.items()):
            uuid = entries[position].get("uuid")
            if isinstance(uuid, str) and added:
                self.tails.setdefault(uuid, []).append((position, added[-1]["uuid"]))
        self.memo: dict[str, Any] = {}

    def target(self, pointer: Any, position: int | None = None) -> Any:
        """Where `pointer` leads now, for an entry stored at `position` (None: a leaf pointer, any position)."""
        current = self._surviving(pointer)
        tails = self.tails.get(current, ()) if isinstance(current, str) else ()
        before = [tail for at, tail in tails if position is None or at < position]
        return before[-1] if before else current

    def _surviving(self, pointer: Any) -> Any:
        """The nearest surviving ancestor `pointer` names (itself when it survives)."""
        if not isinstance(pointer, str) or pointer not in self.removed:
            return pointer
        if pointer in self.memo:
            return self.memo[pointer]
        seen = {pointer}
        current: Any = pointer
        while isinstance(current, str) and current in self.removed:
            current = self.removed[current]
            if current in seen:  # a cycle in a broken file: stop at a root rather than loop
                current = None
                break
            seen.add(current)
        self.memo[pointer] = current
        return current

    def entry(self, entry: Entry, position: int) -> Entry:
        if not isinstance(entry, dict):
            return entry
        parent = entry.get("parentUuid")
        new_parent = self.target(parent, position)
        if new_parent != parent:
            entry = {**entry, "parentUuid": new_parent}
        if entry.get("type") in _LEAF_POINTERS:
            leaf = entry.get("leafUuid")
            new_leaf = self.target(leaf)
            if new_leaf != leaf and new_leaf is not None:
                entry = {**entry, "leafUuid": new_leaf}
        return entry
