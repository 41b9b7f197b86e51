"""A run dir as the runtime creates it: with a `.gitignore` of `*`, so full transcripts and the session
database never show up as untracked files in the user's repository."""

from __future__ import annotations

from pathlib import Path

__all__ = ["make_run_dir"]

GITIGNORE = "# written by flower: run dirs hold full transcripts; keep them out of version control\n*\n"


def make_run_dir(path: Path) -> Path:
    """Create `path` (and its parents) if needed; a directory flower creates gets a `.gitignore` of `*`.
    An existing directory is left as it is."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        (path / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    return path
