"""Layer four: the history a resume feeds back is a rewritten copy of the stored one (S-19, S-20, B-6).

`rewrite(entries, ...)` is a pure function over a list of transcript entries (as a `SessionStore` returns
them): it returns a NEW list and a `RewriteReport`, and never mutates its input. The stored history stays
append-only and untouched (P-3); only `load()` hands out the rewritten copy. Entries are first put in chain
order (`_order.py`: a back-filled entry follows its parent; the result is put in it again), then, in order
(S-19):

1. ephemeral expiry — stale glance results become one line (`trim.py`);
2. trim — large results move to `<workspace>/.flower/spill/`, a pointer stays (off by default; `trim.py`);
3. denials — all but the newest `keep_denials` permission-rule denials go, call and result together (`prune.py`);
4. residue — API-error messages go, interrupted results get a neutral note, orphan calls get a result.

Red lines (S-20), held by every stage: a `tool_use` and its `tool_result` go together; no other call of the
same message is harmed; the `parentUuid` chain is relinked over every removed entry; compaction summaries
and meta entries are never touched; images and documents are never trimmed. One index and one output pass
per rewrite: O(entries + blocks). Rewriting a rewritten list changes nothing (idempotent).

`RewritingSessionStore(base, ...)` applies this on `load()` to ANY SessionStore and delegates everything
else. `PruningSessionStore` and `TrimmingSessionStore` keep the seed's names (S-21) for the same wrapper
over a `SqliteSessionStore` file; they differ only in the default of `trim`:

* `PruningSessionStore(path, workspace=...)` — `trim=False`: expiry, denial pruning and residue cleanup.
  This is what `Runtime(trim=False)` means (S-21).
* `TrimmingSessionStore(path, workspace=...)` — `trim=True`: the same, plus large-result trimming.

Neither name can switch off the residue cleanup: it is what keeps a transcript resumable after a
disconnect. Expiry is switched off with `ephemeral=False`, denial pruning with `keep_denials=None`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio.to_thread
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStore,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from flower.errors import ConfigError, StoreError
from flower.stores._common import TranscriptKey
from flower.stores._order import chain_order
from flower.stores._plan import Plan, RewriteDetail, RewriteReport, apply
from flower.stores._transcript import Entry, TranscriptIndex
from flower.stores.prune import (
    check_keep_denials,
    drop_api_errors,
    find_interrupted,
    heal_orphans,
    neutralise_interrupts,
    prune_denials,
)
from flower.stores.stages import RewriteOptions, Transcript, active_stages, stage_names
from flower.stores.trim import EphemeralPolicy, TrimPolicy, expire_ephemeral, trim_results

__all__ = [
    "EphemeralPolicy",
    "PruningSessionStore",
    "RewriteDetail",
    "RewriteReport",
    "RewritingSessionStore",
    "TrimPolicy",
    "TrimmingSessionStore",
    "drop_api_errors",
    "expire_ephemeral",
    "heal_orphans",
    "neutralise_interrupts",
    "prune_denials",
    "rewrite",
    "trim_results",
]

EphemeralOption = bool | EphemeralPolicy | None
TrimOption = bool | TrimPolicy | None


def _ephemeral(option: EphemeralOption) -> EphemeralPolicy | None:
    if option is True:
        return EphemeralPolicy()
    if option is False or option is None:
        return None
    if isinstance(option, EphemeralPolicy):
        return option
    raise ConfigError(f"ephemeral must be True, False or an EphemeralPolicy, got {option!r}")


def _trim(option: TrimOption) -> TrimPolicy | None:
    if option is True:
        return TrimPolicy()
    if option is False or option is None:
        return None
    if isinstance(option, TrimPolicy):
        return option
    raise ConfigError(f"trim must be True, False or a TrimPolicy, got {option!r}")


def rewrite(
    entries: list[Entry],
    *,
    workspace: str | Path | None = None,
    ephemeral: EphemeralOption = True,
    trim: TrimOption = False,
    keep_denials: int | None = 1,
) -> tuple[list[Entry], RewriteReport]:
    """The rewritten copy of `entries` and what changed (S-19 order; see the module docstring).

    `workspace` is needed only when trimming (spill files go to `<workspace>/.flower/spill/`).
    `keep_denials=None` keeps every denial. The input list and its entries are never modified; unchanged
    entries are shared with the result, so do not mutate the result in place either.
    """
    ephemeral_policy, trim_policy = _ephemeral(ephemeral), _trim(trim)
    check_keep_denials(keep_denials)
    if trim_policy is not None and workspace is None:
        raise ConfigError("trimming needs a workspace: spill files go to <workspace>/.flower/spill/")
    # Stored data is never trusted: a stage that trips over a shape it does not know is skipped as a whole
    # (its edits undone) and named in the report; the other stages still run (issue #16 item 11).
    options = RewriteOptions(ephemeral_policy, trim_policy, keep_denials,
                             Path(workspace) if workspace is not None else None)
    entries = chain_order(entries)  # back-filled entries were appended after later ones (`backfill.py`)
    plan = Plan()
    try:
        transcript = Transcript(entries, TranscriptIndex.build(entries), find_interrupted(entries))
    except Exception as exc:  # noqa: BLE001 - stored data of any shape
        plan.note(_skipped("indexing", exc))
        return list(entries), RewriteReport.of(len(entries), len(entries), plan.details)
    for stage in active_stages(options):
        saved = plan.snapshot()
        try:
            stage.plan(transcript, plan, options)
        except Exception as exc:  # noqa: BLE001 - stored data of any shape
            plan.restore(saved)
            plan.note(_skipped(stage.name, exc))
    try:
        out = apply(entries, plan)
    except Exception as exc:  # noqa: BLE001 - stored data of any shape
        details = [*[d for d in plan.details if d.kind == "skipped"], _skipped("applying the edits", exc)]
        return list(entries), RewriteReport.of(len(entries), len(entries), details)
    # Relinking over a removed entry can point a child at a later entry (a cycle in a damaged chain that ran
    # through it): ordering the result too makes it a fixed point, so a rewrite of it changes nothing.
    out = chain_order(out)
    return out, RewriteReport.of(len(entries), len(out), plan.details)


def _skipped(stage: str, exc: BaseException) -> RewriteDetail:
    reason = " ".join(str(exc).split())[:200] or type(exc).__name__
    return RewriteDetail("skipped", None, None, 0, f"{stage}: {type(exc).__name__}: {reason}")


# --- the wrapping stores (B-6) ----------------------------------------------------------------------

_OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")
"""Protocol methods the SDK probes for (`_store_implements`): the wrapper has one exactly when its base does."""


def _implements(base: object, method: str) -> bool:
    impl = getattr(type(base), method, None)
    return impl is not None and impl is not getattr(SessionStore, method, None)


def _delegate(method: str) -> Callable[..., Awaitable[Any]]:
    async def call(self: RewritingSessionStore, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.base, method)(*args, **kwargs)

    call.__name__ = call.__qualname__ = method
    call.__doc__ = f"Delegates to the base store's `{method}`."
    return call


_MIRRORS: dict[tuple[type, tuple[str, ...]], type] = {}


def _mirroring(cls: type[RewritingSessionStore], base: object) -> type[RewritingSessionStore]:
    """A subclass of `cls` defining exactly the optional methods `base` implements (cached)."""
    methods = tuple(name for name in _OPTIONAL if _implements(base, name))
    cached = _MIRRORS.get((cls, methods))
    if cached is None:
        namespace: dict[str, Any] = {name: _delegate(name) for name in methods}
        namespace.update(__module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__)
        cached = _MIRRORS[(cls, methods)] = type(cls.__name__, (cls,), namespace)
    return cast("type[RewritingSessionStore]", cached)


class RewritingSessionStore(SessionStore):
    """Any SessionStore whose `load()` returns the rewritten copy (B-6); the stored rows never change.

    `append` and the optional protocol methods go straight to `base`; the wrapper implements an optional
    method exactly when `base` does, so the SDK's capability probing sees the truth. Other attributes of the
    base (sync helpers such as `append_sync`, `has_session`) are reachable through the wrapper too.
    `last_report(key)` tells what the latest `load()` of that key rewrote (for `flower preview`/`report`).
    """

    def __new__(cls, base: object, *args: Any, **kwargs: Any) -> RewritingSessionStore:  # noqa: PYI034
        chosen = _mirroring(cls, base) if cls is RewritingSessionStore else cls
        return super().__new__(chosen)

    def __init__(
        self,
        base: SessionStore,
        *,
        workspace: str | Path | None,
        trim: TrimOption = False,
        ephemeral: EphemeralOption = True,
        keep_denials: int | None = 1,
    ) -> None:
        self.base = base
        self.workspace = Path(workspace) if workspace is not None else None
        self.trim_policy = _trim(trim)
        self.ephemeral_policy = _ephemeral(ephemeral)
        check_keep_denials(keep_denials)
        self.keep_denials = keep_denials
        if self.trim_policy is not None and self.workspace is None:
            raise ConfigError(
                "a trimming store needs a workspace: spill files go to <workspace>/.flower/spill/"
            )
        self._reports: dict[TranscriptKey, RewriteReport] = {}
        self._last: RewriteReport | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r}, trim={self.trim_policy is not None})"

    @property
    def stages(self) -> list[str]:
        """The names of the rewrite stages this store's `load()` runs, in order."""
        return stage_names(RewriteOptions(self.ephemeral_policy, self.trim_policy, self.keep_denials,
                                          self.workspace))

    def rewrite(self, entries: list[Entry]) -> tuple[list[Entry], RewriteReport]:
        """This store's rewrite of `entries` (what `load()` would return for them), without storing anything."""
        return rewrite(
            entries,
            workspace=self.workspace,
            ephemeral=self.ephemeral_policy or False,
            trim=self.trim_policy or False,
            keep_denials=self.keep_denials,
        )

    def last_report(self, key: SessionKey | None = None) -> RewriteReport | None:
        """The report of the latest `load()` of `key` (of any key when None); None if never loaded."""
        return self._last if key is None else self._reports.get(TranscriptKey.of(key))

    def _record(self, key: SessionKey, entries: list[Any] | None) -> list[Any] | None:
        if entries is None:
            return None
        rewritten, report = self.rewrite(entries)
        self._reports[TranscriptKey.of(key)] = self._last = report
        return rewritten

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        await self.base.append(key, entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        entries = await self.base.load(key)
        if entries is None:
            return None
        # CPU-bound on long transcripts: keep the event loop (and the SDK's load timeout) responsive.
        return await anyio.to_thread.run_sync(partial(self._record, key, entries))

    def load_sync(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Synchronous `load()`, for bases that offer `load_sync` (the SQLite store does)."""
        loader = getattr(self.base, "load_sync", None)
        if loader is None:
            raise StoreError(f"{self.base!r} has no load_sync; use `await load(key)`")
        return self._record(key, loader(key))

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks. Never hand out a protocol method the wrapper chose not
        # to implement: the SDK would then think it exists.
        if name in _OPTIONAL or name.startswith("__") or name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def close(self) -> None:
        closer = getattr(self.base, "close", None)
        if closer is not None:
            closer()

    async def aclose(self) -> None:
        closer = getattr(self.base, "aclose", None)
        if closer is not None:
            await closer()
        else:
            self.close()

    def __enter__(self) -> RewritingSessionStore:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> RewritingSessionStore:  # noqa: PYI034
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _SqliteRewriting(RewritingSessionStore):
    """The wrapper over a `SqliteSessionStore` file, which implements every optional method."""

    def __init__(
        self,
        path: str | Path,
        *,
        workspace: str | Path | None,
        trim: TrimOption,
        ephemeral: EphemeralOption = True,
        keep_denials: int | None = 1,
    ) -> None:
        from flower.stores.sqlite import SqliteSessionStore  # lazy: the pure rewrites need no SQLite

        super().__init__(
            SqliteSessionStore(path),
            workspace=workspace,
            trim=trim,
            ephemeral=ephemeral,
            keep_denials=keep_denials,
        )

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        return await self.base.list_sessions(project_key)

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        return await self.base.list_session_summaries(project_key)

    async def delete(self, key: SessionKey) -> None:
        await self.base.delete(key)

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        return await self.base.list_subkeys(key)


class PruningSessionStore(_SqliteRewriting):
    """SQLite store whose resumes get expiry, denial pruning and residue cleanup; no trimming by default.

    What `Runtime(trim=False)` uses (S-21). Pass `trim=True` or a `TrimPolicy` to trim as well.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        workspace: str | Path | None,
        trim: TrimOption = False,
        ephemeral: EphemeralOption = True,
        keep_denials: int | None = 1,
    ) -> None:
        super().__init__(path, workspace=workspace, trim=trim, ephemeral=ephemeral, keep_denials=keep_denials)


class TrimmingSessionStore(_SqliteRewriting):
    """SQLite store whose resumes get every rewrite, large-result trimming included (`trim=True` default)."""

    def __init__(
        self,
        path: str | Path,
        *,
        workspace: str | Path,
        trim: TrimOption = True,
        ephemeral: EphemeralOption = True,
        keep_denials: int | None = 1,
    ) -> None:
        super().__init__(path, workspace=workspace, trim=trim, ephemeral=ephemeral, keep_denials=keep_denials)
