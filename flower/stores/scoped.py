"""`ProjectScopedStore`: one project key for every session, whatever directory a machine runs in (B-9).

The SDK keys sessions by the sanitized working directory. Machines of a fleet check the same repository
out under different paths, so a session started on one is "not found" on another. This wrapper maps every
key's `project_key` to one fixed name on the way in and out; the CLI never notices, because the SDK
materializes loaded entries under its own local key before resuming.

It deliberately breaks one clause of the SDK's store contract, the isolation of project keys: that is
what it is for. Invariant: the wrapper only renames keys; entries pass through untouched, and sync helpers of the base
(`load_sync`, `find_session`, ...) stay reachable.
"""

from __future__ import annotations

from typing import Any, TypeVar

from claude_agent_sdk import SessionStore
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from flower.errors import ConfigError

__all__ = ["ProjectScopedStore"]

_Key = TypeVar("_Key", SessionKey, SessionListSubkeysKey)


class ProjectScopedStore(SessionStore):
    """A full SessionStore whose sessions all live under `project_key`."""

    def __init__(self, base: SessionStore, project_key: str) -> None:
        if not project_key or "/" in project_key:
            raise ConfigError(f"a shared project key must be a non-empty name without '/', not {project_key!r}")
        self.base = base
        self.project_key = project_key

    def __repr__(self) -> str:
        return f"ProjectScopedStore({self.base!r}, {self.project_key!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)

    def _key(self, key: _Key) -> _Key:
        scoped = key.copy()
        scoped["project_key"] = self.project_key
        return scoped

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        await self.base.append(self._key(key), entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        return await self.base.load(self._key(key))

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        return await self.base.list_sessions(self.project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        return await self.base.list_session_summaries(self.project_key)

    async def delete(self, key: SessionKey) -> None:
        await self.base.delete(self._key(key))

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        return await self.base.list_subkeys(self._key(key))
