"""Workspaces of their own for parallel writing steps, and the runtime a parallel branch runs on.

Invariants:
- A parallel step that may write gets `<run_dir>/workspaces/<run>/<label>`: a git worktree at HEAD when the
  workspace is a git repository, else a copy without `.flower/`; a re-run finds the same path.
- A branch's runtime carries the parent's settings; only the workspace may differ.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from flower.runtime.runtime import Runtime
from flower.util.rundir import checked_path

__all__ = ["RunScope", "branch_runtime", "isolated_workspace", "safe_name"]


class RunScope(Protocol):
    """The run a branch belongs to (the DBOS executor's `Live`, or the in-process executor)."""

    @property
    def runtime(self) -> Runtime: ...

    @property
    def run_id(self) -> str: ...


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def isolated_workspace(workspace: Path, run_dir: Path, run_id: str, label: str) -> Path:
    """A workspace of its own for a parallel writing step: a git worktree at HEAD when the workspace is a
    git repository, else a copy of it (without `.flower/`). The same path on a re-run."""
    # a committed link at runs/workspaces would put the worktree (or the copy) outside the run dir
    target = checked_path(run_dir / "workspaces" / safe_name(run_id) / safe_name(label), run_dir, directory=True)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    inside = subprocess.run(["git", "-C", str(workspace), "rev-parse", "--is-inside-work-tree"],
                            capture_output=True, text=True)
    if inside.returncode == 0 and inside.stdout.strip() == "true":
        done = subprocess.run(["git", "-C", str(workspace), "worktree", "add", "--detach", str(target), "HEAD"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            return target
    skip = {os.path.realpath(run_dir), os.path.realpath(target.parent)}

    def ignore(folder: str, names: list[str]) -> list[str]:
        # The workbench, and the run dir when it lies inside the workspace (the copy would copy itself).
        return [n for n in names if n == ".flower" or os.path.realpath(os.path.join(folder, n)) in skip]

    shutil.copytree(workspace, target, ignore=ignore, symlinks=True)
    return target


def branch_runtime(live: RunScope, label: str, isolate: bool) -> Runtime:
    """The runtime of one branch: its parent's config as it is (only the run dir made absolute), its store
    and run id, in the parent's workspace or one of its own."""
    base = live.runtime
    workspace = base.workspace
    if isolate:
        workspace = isolated_workspace(base.workspace, base.run_dir, live.run_id, label)
    config = replace(base.config, run_dir=str(base.run_dir))
    return Runtime(workspace, config=config, store=base.store, run_id=live.run_id)
