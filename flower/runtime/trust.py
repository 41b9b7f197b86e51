"""Whether a config file came with the repository: one that lies inside the workspace did.

Such a file may still tune the runtime, but not choose where data goes or what runs (the settings that
`flower.runtime.config.UNTRUSTED` names); `resolve_config` leaves those out and says so with an `Ignored`.

Invariants:
- Links are resolved on both sides: a file found inside the workspace stays inside even when it is a link
  to a file outside, and a workspace reached through a link is its real directory.
- Deciding reads no file and creates none (it only looks for a `.git` to find a checkout's top).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Ignored", "inside_workspace"]


@dataclass(frozen=True)
class Ignored:
    """A setting a config file inside the workspace gave and the resolved settings do not use."""

    name: str
    file: Path
    flag: str
    env: str
    what: str
    """What the setting chooses, e.g. "where traces are sent"."""
    trust_env: str
    """The variable that trusts the file anyway."""

    def reason(self) -> str:
        return (f"a file inside the workspace may not choose {self.what}; set it with {self.flag} or {self.env}, "
                f"or trust the file with {self.trust_env}=1")

    def line(self) -> str:
        """One line for `flower config` and the commands that run."""
        return f"ignored: {self.name} from {self.file} ({self.reason()})"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "file": str(self.file), "reason": self.reason(), "line": self.line()}


def inside_workspace(path: Path, start: Path, workspace: str | None, own: str | None) -> bool:
    """Whether the config file `path` lies inside the workspace: the start directory (a command's
    `--workspace` is not known to every caller, and the start directory is the default workspace), the
    workspace a flag or variable names (`workspace`), or the one the file itself names (`own`) when it
    holds the file; and the git checkout holding any of these, so that starting in a subfolder of a cloned
    repository does not make its top-level file the user's. Relative workspaces are taken from `start`."""
    here = start.resolve()
    places = [here, *(_place(w, here) for w in (workspace, own) if w)]
    places += [top for top in map(_checkout, places) if top is not None]
    folders = {path.parent.resolve(), path.resolve().parent}  # where it was found, and a link's target
    return any(f == place or place in f.parents for f in folders for place in places)


def _checkout(folder: Path) -> Path | None:
    """The top of the git work tree holding `folder` (the nearest folder with a `.git`), if any."""
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _place(folder: str, here: Path) -> Path:
    """A workspace path as a real directory: relative to the start directory, `~` expanded, links resolved."""
    return (here / Path(folder).expanduser()).resolve()
