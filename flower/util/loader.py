"""Loading the user's objects named by a target: `FILE.py:ATTR` or `module:attr` (`ATTR` may be dotted).

Invariants:
- Whatever the user's code raises while loading is one `ConfigError` line naming the file or module; a
  flower error raised by that code keeps its class, and a `ConfigError` or `FlowError` (a spec or step that
  refused itself) is prefixed with `FILE:LINE:`, the line of the file it was raised from.
- A file's own folder (a module's: the current directory) is importable while it loads, so it can import
  its neighbours; `sys.path` is restored afterwards.
- A file is loaded as the module `flower_target_<digest of its path>`, the same name in every process.
- `reuse=True` loads a file once per process (a worker adopting many runs of one workflow); otherwise the
  file runs again on each load, as a changed file must when a command is run again.
- `call(value, target, kinds)` calls a zero-argument factory; its failure is one line too.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from flower.errors import ConfigError, FlowerError, FlowError
from flower.util.oneline import one_line

__all__ = ["call", "import_file", "import_module", "load_target"]


def import_file(path: Path, *, reuse: bool = False) -> ModuleType:
    """Run a Python file as a module of its own (the same module again with `reuse`)."""
    if not path.is_file():
        raise ConfigError(f"spec file {path} not found")
    # The same name in every process (not `hash()`, which is salted per process): a value of a class the file
    # defines, pickled in a DBOS checkpoint, is found again by a process that loads the same file.
    name = f"flower_target_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}"
    if reuse and name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # so the file can import its neighbours
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except FlowerError as exc:
        sys.modules.pop(name, None)
        line = _line_in(exc, path)
        if line is None or type(exc) not in (ConfigError, FlowError):
            raise
        # A spec or step the file builds refused itself: name where, as the file may define several.
        raise type(exc)(f"{path}:{line}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure is one line naming the file
        sys.modules.pop(name, None)
        raise ConfigError(f"cannot load {path}: {one_line(exc)}") from None
    finally:
        sys.path.remove(folder)
    return module


def _line_in(exc: BaseException, path: Path) -> int | None:
    """The line of `path` nearest to where `exc` was raised (its innermost frame in that file), if any."""
    where = str(path.resolve())
    line = None
    for frame, number in traceback.walk_tb(exc.__traceback__):
        if str(Path(frame.f_code.co_filename).resolve()) == where:
            line = number
    return line


def import_module(name: str) -> ModuleType:
    """Import a module by name, with the current directory importable."""
    here = os.getcwd()
    sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    except FlowerError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module, as above
        raise ConfigError(f"cannot import module {name}: {one_line(exc)}") from None
    finally:
        sys.path.remove(here)


def load_target(target: str, *, reuse: bool = False) -> tuple[Any, str | None]:
    """The object named by `FILE.py:ATTR` or `module:attr`, and `/abs/FILE.py:ATTR` for a file target (None
    for a module), so that another process can load the same object."""
    source, sep, attr = target.rpartition(":")
    if not sep or not source or not attr:
        raise ConfigError(f"run target {target!r} must look like FILE.py:ATTR or module:attr")
    is_file = source.endswith(".py") or os.sep in source or Path(source).is_file()
    value: Any = import_file(Path(source), reuse=reuse) if is_file else import_module(source)
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ConfigError(f"{source} has no attribute {attr!r}")
        value = getattr(value, part)
    return value, (f"{Path(source).resolve()}:{attr}" if is_file else None)


def call(factory: Any, target: str, kinds: str) -> Any:
    """`factory()` for a target that names a callable returning one of `kinds` (e.g. "an AgentSpec")."""
    try:
        return factory()
    except FlowerError:
        raise
    except TypeError as exc:
        raise ConfigError(f"{target} must be {kinds} or a callable taking no arguments ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - the user's factory: one line
        raise ConfigError(f"{target}() failed: {one_line(exc)}") from None
