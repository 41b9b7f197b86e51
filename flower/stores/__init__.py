"""Session stores and the history-rewriting layer (layer four).

`PostgresSessionStore` is imported on first use so that the PostgreSQL driver is loaded only when needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flower.stores.rewrite import (
    EphemeralPolicy,
    PruningSessionStore,
    RewriteReport,
    RewritingSessionStore,
    TrimmingSessionStore,
    TrimPolicy,
    rewrite,
)
from flower.stores.scoped import ProjectScopedStore
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.validate import validate

if TYPE_CHECKING:
    from flower.stores.postgres import PostgresSessionStore

__all__ = [
    "EphemeralPolicy",
    "PostgresSessionStore",
    "ProjectScopedStore",
    "PruningSessionStore",
    "RewriteReport",
    "RewritingSessionStore",
    "SqliteSessionStore",
    "TrimPolicy",
    "TrimmingSessionStore",
    "rewrite",
    "validate",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresSessionStore":
        from flower.stores.postgres import PostgresSessionStore

        return PostgresSessionStore
    raise AttributeError(f"module 'flower.stores' has no attribute {name!r}")
