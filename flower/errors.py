"""One small exception hierarchy.

Every error a user can cause derives from `FlowerError`; the CLI prints `str(error)` as one line and
exits non-zero, never a traceback. Messages name the problem and the thing (file, session, option).
"""

from __future__ import annotations

__all__ = [
    "ConfigError", "FlowError", "FlowerError", "RunEnded", "ScriptError", "StoreError", "StoredDataError",
    "UnsafePathError",
]


class FlowerError(Exception):
    """Base of every error flower raises on purpose."""


class ConfigError(FlowerError, ValueError):
    """A spec, option or argument is invalid."""


class StoreError(FlowerError):
    """A session store cannot be opened, read or written (corrupt file, unreachable server)."""


class ScriptError(FlowerError, AssertionError):
    """The scripted fake API was used wrongly: script exhausted, steps left, invalid request."""


class FlowError(FlowerError, ValueError):
    """A workflow is malformed or its user code misbehaved: duplicate step names, a `when` that raises, a
    gate that returns a non-bool, a `resume_from` naming a step without a session."""


class RunEnded(FlowError):
    """A run was not continued or started again because it has ended: it finished, failed or was cancelled
    (a cancelled run stays stopped). `state` says which, `run_id` which run."""

    def __init__(self, message: str, *, run_id: str, state: str) -> None:
        super().__init__(message)
        self.run_id, self.state = run_id, state


class UnsafePathError(FlowerError):
    """A workbench or spill path leads out of where it must stay (a symlink, a non-folder): nothing written."""


class StoredDataError(StoreError):
    """A stored row cannot be read back (not JSON, not an object); the message names store, session and row."""
