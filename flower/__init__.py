"""flower: a runtime for very long Claude agent runs that keeps the coordinator's context clean.

This module only re-exports; `__all__` is locked by a test.
"""

from __future__ import annotations

from flower.errors import ConfigError, FlowerError, ScriptError, StoreError

__all__ = [
    "ConfigError",
    "FlowerError",
    "ScriptError",
    "StoreError",
]

__version__ = "0.1.0"
