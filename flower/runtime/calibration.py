"""What a run learned about its endpoints, kept in the run dir so a restarted run starts from it: the
context windows real overflows showed, and which endpoints have answered at all.

An overflow ("prompt is too long: 210000 tokens > 200000 maximum") tells what an endpoint really allows a
model, which may be less than the model's published window (a proxy, a gateway, a smaller deployment).
`Runtime._calibrate` records it here per endpoint and model; a runtime on the same run dir reads it at
start, so the same endpoint does not overflow again after a restart. An endpoint that never answered in
this run dir and refuses connections is most likely a typo: the step fails within seconds instead of
probing it for minutes (`answered`).

Invariants:
- `windows.json` in the run dir maps "<endpoint> <model>" to the smallest window seen (`windows`) and
  lists the endpoints that answered (`answered`); it is written atomically (readers see the old or the new
  file) and a symlink there is replaced, never followed.
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
    """The windows overflows showed, by endpoint and model, and the endpoints that answered, backed by
    the run dir's `windows.json`."""

    def __init__(self, run_dir: Path) -> None:
        self._folder = Confined(run_dir)
        self._known, self._answered = _load(self._folder.read_bytes(FILE))

    def get(self, endpoint: str, model: str | None) -> int | None:
        return self._known.get(_key(endpoint, model))

    def learn(self, endpoint: str, model: str | None, window: int) -> bool:
        """Record `window` when it is smaller than what is known; True when it was (and is saved)."""
        key = _key(endpoint, model)
        if key in self._known and self._known[key] <= window:
            return False
        self._known[key] = window
        self._save()
        return True

    def answered(self, endpoint: str) -> bool:
        """Whether `endpoint` ever answered a request of this run dir's runs."""
        return _key(endpoint, None) in self._answered

    def mark_answered(self, endpoint: str) -> None:
        if not self.answered(endpoint):
            self._answered.add(_key(endpoint, None))
            self._save()

    def _save(self) -> None:
        known, answered = _load(self._folder.read_bytes(FILE))  # another process may have learned too
        merged = {k: min(v, self._known.get(k, v)) for k, v in {**self._known, **known}.items()}
        self._known, self._answered = merged, self._answered | answered
        data = {"windows": merged, "answered": sorted(self._answered)}
        self._folder.write_atomic(FILE, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def _key(endpoint: str, model: str | None) -> str:
    return f"{endpoint.rstrip('/')} {model or ''}".strip()


def _load(data: bytes | None) -> tuple[dict[str, int], set[str]]:
    try:
        raw = json.loads(data or b"{}")
    except ValueError:
        return {}, set()
    if not isinstance(raw, dict):
        return {}, set()
    windows, answered = raw.get("windows"), raw.get("answered")
    known = {str(k): v for k, v in windows.items() if isinstance(v, int) and not isinstance(v, bool)
             and v >= 1_000} if isinstance(windows, dict) else {}
    return known, {a for a in answered if isinstance(a, str)} if isinstance(answered, list) else set()
