"""The context windows real overflows showed, kept in the run dir so a restarted run starts from them.

An overflow ("prompt is too long: 210000 tokens > 200000 maximum") tells what an endpoint really allows a
model, which may be less than the model's published window (a proxy, a gateway, a smaller deployment).
`Runtime._calibrate` records it here per endpoint and model; a runtime on the same run dir reads it at
start, so the same endpoint does not overflow again after a restart.

Invariants:
- `windows.json` in the run dir maps "<endpoint> <model>" to the smallest window seen; it is written
  atomically (readers see the old or the new file) and a symlink there is replaced, never followed.
- A missing, unreadable or malformed file is no calibration (nothing was learned yet), never an error:
  each entry is checked, and only whole numbers of at least 1,000 tokens count.
"""

from __future__ import annotations

import json
from pathlib import Path

from flower.util.confined import Confined

__all__ = ["FILE", "Windows"]

FILE = "windows.json"


class Windows:
    """The windows overflows showed, by endpoint and model, backed by the run dir's `windows.json`."""

    def __init__(self, run_dir: Path) -> None:
        self._folder = Confined(run_dir)
        self._known: dict[str, int] = _load(self._folder.read_bytes(FILE))

    def get(self, endpoint: str, model: str | None) -> int | None:
        return self._known.get(_key(endpoint, model))

    def learn(self, endpoint: str, model: str | None, window: int) -> bool:
        """Record `window` when it is smaller than what is known; True when it was (and is saved)."""
        key = _key(endpoint, model)
        if key in self._known and self._known[key] <= window:
            return False
        self._known[key] = window
        latest = {**_load(self._folder.read_bytes(FILE)), key: window}  # another process may have learned too
        merged = {k: min(v, self._known.get(k, v)) for k, v in latest.items()}
        self._folder.write_atomic(FILE, (json.dumps(merged, indent=1, sort_keys=True) + "\n").encode())
        return True


def _key(endpoint: str, model: str | None) -> str:
    return f"{endpoint.rstrip('/')} {model or ''}".strip()


def _load(data: bytes | None) -> dict[str, int]:
    try:
        raw = json.loads(data or b"{}")
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 1_000}
