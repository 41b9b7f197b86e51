"""What a resume feeds back, per policy, on every real transcript in ../shared/data/transcripts (S-19, P-5).

For each transcript (loaded with `flower.stores.jsonl`, bad lines reported and skipped as the reader does),
the model-visible characters of its user and assistant messages are counted before and after each policy:

* flower default — `rewrite(entries, workspace=tmp)`: stale glance results expire, older denials and API
  error residue go, trim off (what `Runtime(trim=False)` does);
* flower trim — the same with `trim=True` (`TrimPolicy()`: results >= 2,000 chars except the newest 20
  move to `.flower/spill/` files, a pointer stays), and with `TrimPolicy(keep_recent=3, min_chars=500)`,
  as aggressive as the two simulations below;
* clear_tool_uses (simulated) — Anthropic's server-side context editing with `keep: 3` tool uses and the
  default trigger of 100k input tokens (taken as 400,000 visible characters): when a transcript is over the
  trigger, every tool_result body but the newest 3 becomes the placeholder "[cleared]";
* tool-output trimmer (simulated) — the last 2 user turns (real prompts, not tool results) and everything
  after stay; older tool outputs over 500 characters are cut to their first 200 plus a short marker.

Visible characters: text and thinking of each block, tool_use inputs as JSON, tool_result text; images and
documents count 0; API-error messages are left out (the CLI never replays them). The same count for every
policy, so the ratios are fair. Recoverability is checked, not assumed: every file flower's trim points to
must exist and hold exactly the text it replaced. What the simulations remove has no pointer: gone for the
model. `tiny`: the 3 smallest transcripts with at least 6 tool results, 3 of them over 500 characters.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._table import row
from flower.report.entries import block_chars  # the report counts visible characters the same way
from flower.stores._transcript import result_text
from flower.stores.jsonl import read_jsonl
from flower.stores.rewrite import TrimPolicy, rewrite
from tests.support.transcripts import TRANSCRIPTS  # the one place that locates them

BENCH = "resume_payload"

TRIGGER_CHARS = 400_000
"""100k tokens at about 4 characters a token: clear_tool_uses' default trigger."""
CLEARED = "[cleared]"
KEEP_TOOL_USES = 3
RECENT_TURNS, MAX_OUTPUT, PREVIEW = 2, 500, 200

Entry = dict[str, Any]
Policy = Callable[[list[Entry]], list[Entry]]


# --- counting ------------------------------------------------------------------------------------


def _blocks(entry: Mapping[str, Any]) -> list[Any]:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def visible_chars(entries: Iterable[Mapping[str, Any]]) -> int:
    """Model-visible characters of user and assistant messages (see the module docstring)."""
    return sum(block_chars(block) for entry in entries
               if entry.get("type") in ("user", "assistant") and entry.get("isApiErrorMessage") is not True
               for block in _blocks(entry) if isinstance(block, Mapping))


# --- the simulated policies ------------------------------------------------------------------------


def _result_sites(entries: list[Entry]) -> list[tuple[int, int]]:
    """(entry, block) of every tool_result with text content, oldest first."""
    return [(i, j) for i, entry in enumerate(entries) if entry.get("type") == "user"
            for j, block in enumerate(_blocks(entry))
            if isinstance(block, Mapping) and block.get("type") == "tool_result"
            and result_text(dict(block)) is not None]


def _with_bodies(entries: list[Entry], bodies: Mapping[tuple[int, int], str]) -> list[Entry]:
    """A copy of `entries` with the given tool_result bodies replaced (entries not named are shared)."""
    out = list(entries)
    for (i, j), body in bodies.items():
        entry = out[i]
        content = list(_blocks(entry))
        content[j] = {**content[j], "content": body}
        out[i] = {**entry, "message": {**entry["message"], "content": content}}
    return out


def clear_tool_uses(entries: list[Entry]) -> list[Entry]:
    """Simulated `clear_tool_uses_20250919` (keep 3, trigger 100k tokens): older results are cleared."""
    if visible_chars(entries) <= TRIGGER_CHARS:
        return entries
    sites = _result_sites(entries)
    old = sites[: max(0, len(sites) - KEEP_TOOL_USES)]
    return _with_bodies(entries, {site: CLEARED for site in old})


def _is_prompt(entry: Mapping[str, Any]) -> bool:
    flags = ("isMeta", "isSidechain", "isCompactSummary")
    if entry.get("type") != "user" or any(entry.get(flag) for flag in flags):
        return False
    blocks = _blocks(entry)
    return bool(blocks) and all(isinstance(b, Mapping) and b.get("type") == "text" for b in blocks)


def trim_tool_outputs(entries: list[Entry]) -> list[Entry]:
    """Simulated tool-output trimmer: before the last 2 user turns, outputs over 500 chars keep 200."""
    prompts = [i for i, entry in enumerate(entries) if _is_prompt(entry)]
    if len(prompts) <= RECENT_TURNS:
        return entries
    boundary = prompts[-RECENT_TURNS]
    bodies = {}
    for i, j in _result_sites(entries):
        if i >= boundary:
            break
        text = result_text(dict(_blocks(entries[i])[j])) or ""
        if len(text) > MAX_OUTPUT:
            bodies[(i, j)] = f"{text[:PREVIEW]}\n[trimmed: {len(text):,} chars]"
    return _with_bodies(entries, bodies)


# --- flower's policies, with the recoverability check ------------------------------------------------


@dataclass
class Tally:
    """Sums over transcripts for one policy."""

    chars: int = 0
    changed: int = 0
    """Transcripts whose visible size changed."""
    moved: int = 0
    """Results moved to files (flower trim)."""
    verified: int = 0
    """Of those, files that exist and hold exactly the removed text."""
    expired: int = 0
    denials: int = 0
    notes: list[str] = field(default_factory=list)


def _results_by_id(entries: list[Entry]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for i, j in _result_sites(entries):
        block = _blocks(entries[i])[j]
        if isinstance(block.get("tool_use_id"), str):
            found.setdefault(block["tool_use_id"], []).append(result_text(dict(block)) or "")
    return found


def _verify(entries: list[Entry], details: Iterable[Any]) -> tuple[int, int]:
    """(moved, verified): each trimmed result's file must hold the very text it replaced."""
    originals = _results_by_id(entries)
    moved = verified = 0
    for detail in details:
        if detail.kind != "trimmed":
            continue
        moved += 1
        path = Path(detail.note)
        try:
            held = path.read_bytes().decode("utf-8", "surrogatepass")
        except OSError:
            continue
        verified += held in originals.get(detail.tool_use_id or "", [])
    return moved, verified


def _flower(workspace: Path, trim: bool | TrimPolicy) -> Callable[[list[Entry], Tally], list[Entry]]:
    def apply(entries: list[Entry], tally: Tally) -> list[Entry]:
        out, report = rewrite(entries, workspace=workspace, trim=trim)
        moved, verified = _verify(entries, report.details)
        tally.moved += moved
        tally.verified += verified
        tally.expired += report.expired
        tally.denials += report.denials_dropped
        return out

    return apply


def _simulated(policy: Policy) -> Callable[[list[Entry], Tally], list[Entry]]:
    return lambda entries, tally: policy(entries)


# --- the bench ----------------------------------------------------------------------------------


def transcripts(tiny: bool) -> list[Path]:
    paths = sorted(TRANSCRIPTS.rglob("*.jsonl"))
    if not paths:
        raise RuntimeError(f"no transcripts under {TRANSCRIPTS}")
    if not tiny:
        return paths
    chosen = []
    for path in sorted(paths, key=lambda p: p.stat().st_size):
        entries = read_jsonl(path).entries
        sites = _result_sites(entries)
        if len(sites) >= 6 and sum(_result_len(entries, site) > MAX_OUTPUT for site in sites) >= 3:
            chosen.append(path)
        if len(chosen) == 3:
            break
    return chosen


def _result_len(entries: list[Entry], site: tuple[int, int]) -> int:
    return len(result_text(dict(_blocks(entries[site[0]])[site[1]])) or "")


def _load(paths: list[Path]) -> tuple[list[list[Entry]], int]:
    loaded, bad = [], 0
    for path in paths:
        read = read_jsonl(path)
        loaded.append(read.entries)
        bad += sum(1 for error in read.errors if not error.kept)
    return loaded, bad


def run(tiny: bool = False) -> list[dict[str, Any]]:
    paths = transcripts(tiny)
    corpus, bad_lines = _load(paths)
    original = sum(visible_chars(entries) for entries in corpus)
    results = sum(len(_result_sites(entries)) for entries in corpus)
    over = sum(visible_chars(entries) > TRIGGER_CHARS for entries in corpus)
    with tempfile.TemporaryDirectory(prefix="flower-bench-resume-") as tmp:
        policies = {
            "flower default": _flower(Path(tmp) / "default", False),
            "flower trim=True": _flower(Path(tmp) / "trim", True),
            "flower trim keep 3, >=500": _flower(Path(tmp) / "trim3",
                                                 TrimPolicy(keep_recent=3, min_chars=MAX_OUTPUT)),
            "clear_tool_uses (sim)": _simulated(clear_tool_uses),
            "tool-output trimmer (sim)": _simulated(trim_tool_outputs),
        }
        tallies = {name: Tally() for name in policies}
        for entries in corpus:
            before = visible_chars(entries)
            for name, apply in policies.items():
                after = visible_chars(apply(entries, tallies[name]))
                tallies[name].chars += after
                tallies[name].changed += after != before
    return _rows(len(paths), original, results, over, bad_lines, tallies)


def _rows(n: int, original: int, results: int, over: int, bad: int, t: dict[str, Tally]
          ) -> list[dict[str, Any]]:
    def kept(name: str, note: str) -> dict[str, Any]:
        return row(BENCH, f"{name}: chars kept", t[name].chars, "chars", t[name].chars / original,
                   f"{t[name].changed}/{n} transcripts changed; {note}")

    def moved(name: str) -> str:
        tally = t[name]
        return (f"{tally.moved:,} results moved to files, {tally.verified:,}/{tally.moved:,} verified to "
                "hold the removed text (recoverable: Read the pointer)")

    d = t["flower default"]
    return [
        row(BENCH, "original: model-visible chars", original, "chars", 1.0,
            f"{n} real transcripts, {results:,} tool results, {bad} bad lines skipped"),
        kept("flower default", f"{d.expired:,} glance results expired (recover: re-run the command), "
             f"{d.denials} older denials dropped"),
        kept("flower trim=True", moved("flower trim=True")),
        kept("flower trim keep 3, >=500", moved("flower trim keep 3, >=500")),
        kept("clear_tool_uses (sim)", f"{over}/{n} over the 400k-char trigger; cleared text gone"),
        kept("tool-output trimmer (sim)", "cut text gone (no pointer)"),
        row(BENCH, "flower trim: removed text recoverable", _verified(t), "files", _share(t),
            "files verified / results moved, both trims"),
    ]


_TRIMS = ("flower trim=True", "flower trim keep 3, >=500")


def _verified(t: dict[str, Tally]) -> int:
    return sum(t[name].verified for name in _TRIMS)


def _share(t: dict[str, Tally]) -> float | None:
    moved = sum(t[name].moved for name in _TRIMS)
    return _verified(t) / moved if moved else None


if __name__ == "__main__":
    import sys

    for r in run(tiny="--tiny" in sys.argv):
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        print(f"{r['case']:42} {r['value']:>14,.0f} {r['unit']:6} {ratio:>7}  {r['note']}")
