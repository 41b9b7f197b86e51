"""ProjectScopedStore renames keys only (B-9): any working directory finds the same sessions."""

from __future__ import annotations

import pytest
from claude_agent_sdk import InMemorySessionStore
from claude_agent_sdk.testing import run_session_store_conformance

from flower.errors import ConfigError
from flower.stores.scoped import ProjectScopedStore

pytestmark = pytest.mark.anyio


async def test_two_directories_see_one_session() -> None:
    base = InMemorySessionStore()
    store = ProjectScopedStore(base, "fleet")
    entry = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}
    await store.append({"project_key": "-home-a-repo", "session_id": "s1"}, [entry])
    assert await store.load({"project_key": "-srv-b-checkout", "session_id": "s1"}) == [entry]
    assert await base.load({"project_key": "fleet", "session_id": "s1"}) == [entry]
    assert await base.load({"project_key": "-home-a-repo", "session_id": "s1"}) is None
    assert [s["session_id"] for s in await store.list_sessions("-anything")] == ["s1"]


async def test_it_deliberately_breaks_project_isolation() -> None:
    """The SDK's conformance suite demands that project keys isolate sessions; merging them is the point."""
    with pytest.raises(AssertionError):
        await run_session_store_conformance(lambda: ProjectScopedStore(InMemorySessionStore(), "fleet"))


def test_bad_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="shared project key"):
        ProjectScopedStore(InMemorySessionStore(), "a/b")
