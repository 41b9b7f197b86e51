"""What every flower session store shares: key normalisation, entry encoding, dedup, summary folding, context.

A store persists SDK transcript entries verbatim and returns them deep-equal, in append order. These helpers
hold the rules that must not drift between the SQLite and the PostgreSQL backends:

* A key is `(project_key, session_id, subpath)`; the main transcript has subpath `""` (the SDK calls an empty
  subpath invalid and omits the field, so both spellings mean "main").
* An entry's idempotency key is its `uuid` (a non-empty string), scoped to one transcript: a fork copies
  history into another key with the same uuids, and both copies must be kept. Entries without a uuid are
  always appended.
* Summaries are folded by the SDK's own `fold_session_summary`, for main transcripts only, over the entries
  that were actually stored (a replayed batch must not re-fold older values over newer ones), and stamped with
  the same storage clock as the session's mtime.
* Main-thread context = input + cache-read + cache-creation tokens of the newest real assistant API message.
  One API reply is written as several entries repeating the same usage, so usage is taken per message, never
  summed per entry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from claude_agent_sdk import fold_session_summary
from claude_agent_sdk.types import SessionKey, SessionListSubkeysKey, SessionStoreEntry, SessionSummaryEntry

from flower.agent.usage import message_context
from flower.errors import StoredDataError, StoreError

__all__ = [
    "Migration",
    "TranscriptKey",
    "dump_entry",
    "encode_batch",
    "entry_type",
    "entry_uuid",
    "fold_summary",
    "fresh_indexes",
    "last_context",
    "main_usages",
    "next_mtime",
    "now_ms",
    "parse_row",
]


@dataclass(frozen=True)
class Migration:
    """One step of a store's schema; a store records each applied version in its version table."""

    version: int
    """Schema version this step produces; versions are 1, 2, 3… in list order."""
    name: str
    statements: tuple[str, ...]
    """Run one by one inside the migrating transaction (`{schema}` is the PostgreSQL schema name)."""


class TranscriptKey(NamedTuple):
    """A normalised store key; `subpath == ""` is the main transcript."""

    project_key: str
    session_id: str
    subpath: str

    @classmethod
    def of(cls, key: SessionKey | SessionListSubkeysKey) -> TranscriptKey:
        subpath = cast("dict[str, Any]", key).get("subpath") or ""
        return cls(key["project_key"], key["session_id"], subpath)

    @property
    def is_main(self) -> bool:
        return self.subpath == ""

    def session_key(self) -> SessionKey:
        key: SessionKey = {"project_key": self.project_key, "session_id": self.session_id}
        if self.subpath:
            key["subpath"] = self.subpath
        return key

    def __str__(self) -> str:
        return "/".join(part for part in self if part)


def now_ms() -> int:
    return int(time.time() * 1000)


def next_mtime(last: int) -> int:
    """A millisecond wall clock that never repeats or goes back relative to `last`."""
    return max(now_ms(), last + 1)


def entry_uuid(entry: SessionStoreEntry | dict[str, Any]) -> str | None:
    uuid = cast("dict[str, Any]", entry).get("uuid")
    return uuid if isinstance(uuid, str) and uuid else None


def entry_type(entry: SessionStoreEntry | dict[str, Any]) -> str | None:
    kind = cast("dict[str, Any]", entry).get("type")
    return kind if isinstance(kind, str) else None


def dump_entry(entry: SessionStoreEntry | dict[str, Any]) -> str:
    """Compact JSON text of one entry, always encodable as UTF-8.

    Non-ASCII text is kept literal (CJK would triple in size as `\\uXXXX`), except when the entry holds a lone
    surrogate (a JavaScript string can): that cannot be encoded as UTF-8, so the entry falls back to ASCII
    escapes, which `json.loads` turns back into the same string.
    """
    text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(entry, separators=(",", ":"))
    return text


def fresh_indexes(uuids: Sequence[str | None], stored: Set[str] = frozenset()) -> list[int]:
    """Positions of the entries to store: not those whose uuid is stored or came earlier in the batch."""
    seen = set(stored)
    keep: list[int] = []
    for index, uuid in enumerate(uuids):
        if uuid is not None:
            if uuid in seen:
                continue
            seen.add(uuid)
        keep.append(index)
    return keep


def fold_summary(
    prev: SessionSummaryEntry | None, key: TranscriptKey, fresh: list[SessionStoreEntry], mtime: int
) -> SessionSummaryEntry:
    """The SDK fold over the newly stored entries, stamped with the storage write time."""
    folded = fold_session_summary(prev, key.session_key(), fresh)
    folded["mtime"] = mtime
    return folded


def _real_main_assistant(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The API message of an assistant entry that counts for main-thread context, else None."""
    if entry.get("type") != "assistant" or entry.get("isSidechain") is True:
        return None
    if entry.get("isApiErrorMessage") is True:
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("model") == "<synthetic>":
        return None
    return message if isinstance(message.get("usage"), dict) else None


def last_context(newest_first: Iterable[SessionStoreEntry | dict[str, Any]]) -> int | None:
    """Main-thread context of the last turn, from entries given newest first (so a store can stop early).

    Only the newest real API message matters, and its entries all carry the same request usage, so this is
    one message's count, never a sum over its entries. Messages reporting no tokens at all are skipped.
    """
    for raw in newest_first:
        message = _real_main_assistant(cast("dict[str, Any]", raw))
        if message is None:
            continue
        tokens = message_context(message["usage"])
        if tokens > 0:
            return tokens
    return None


def main_usages(entries: Iterable[SessionStoreEntry | dict[str, Any]]) -> list[tuple[str | None, str, dict[str, Any]]]:
    """(message id, model, usage) of each distinct main-thread API message, oldest first: one API message
    is stored as several entries (a block each) carrying the same usage, so it counts once."""
    seen: set[str] = set()
    found: list[tuple[str | None, str, dict[str, Any]]] = []
    for raw in entries:
        message = _real_main_assistant(cast("dict[str, Any]", raw))
        if message is None or not message_context(message["usage"]):
            continue
        ident = message.get("id") if isinstance(message.get("id"), str) else None
        if ident is not None and ident in seen:
            continue
        if ident is not None:
            seen.add(ident)
        found.append((ident, str(message.get("model") or ""), message["usage"]))
    return found


def parse_row(payload: Any, *, store: str, key: TranscriptKey | str, row: int | str) -> SessionStoreEntry:
    """One stored row's entry; a row that is not JSON is a `StoredDataError` naming store, session and row.

    The row itself is left as it is (stored history is append-only); the error says where to look.
    """
    try:
        return cast(SessionStoreEntry, json.loads(payload))
    except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError, a NULL payload
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StoredDataError(
            f"session store {store}: session {key}, row {row} is not JSON ({reason}); the stored row is left "
            "as it is"
        ) from None


def encode_batch(
    entries: Sequence[Any], *, store: str, key: TranscriptKey
) -> list[tuple[str | None, str | None, str]]:
    """`(uuid, type, json)` per entry; a non-object or unencodable entry is a `StoreError` before anything is
    written (the whole batch is refused: a store never holds half a batch)."""
    rows: list[tuple[str | None, str | None, str]] = []
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise StoreError(
                f"session store {store}: append to session {key}: entry {number} is a {type(entry).__name__}, "
                "not a JSON object; nothing appended"
            )
        try:
            text = dump_entry(entry)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"session store {store}: append to session {key}: entry {number} cannot be stored as JSON "
                f"({exc}); nothing appended"
            ) from None
        rows.append((entry_uuid(entry), entry_type(entry), text))
    return rows
