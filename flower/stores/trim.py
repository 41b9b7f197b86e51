"""Rewrites 1 and 2 of S-19: expire stale glance results, move large results out of context.

Both replace the body of a `tool_result` block: the block stays (its call would be an orphan without it),
`tool_use_id` and `is_error` stay, the entry and its chain stay; the one exception is a run of expired calls,
removed call and result together (below). Compaction summaries,
meta entries, and results holding images or documents are never touched (S-20).

**Ephemeral expiry** (on by default). A site is a successful `Bash` result whose command the glance
predicate calls ephemeral (`flower.walls.glance.judge.is_ephemeral`, S-8: the same predicate that lets the
coordinator run it), and a successful text `Read` result (a Read is `cat` with line numbers: a snapshot of
a file that the file itself keeps; `reads=False` leaves them). All sites but the newest `keep_recent` get
one line naming the command (`Read <path>` for a Read) and its age, but only when their body is longer
than that line: an expiry note never makes the history longer,
so a tiny output (an `ls` of two files) keeps its body. A run of two or more expiring calls (in result
order on a thread; a kept successful result ends a run, a failed or denied one does not) whose assistant
messages hold nothing but expiring or failed calls goes further: each call goes with its result, as a pair
(S-20), except the last of the run, which stays with one line (`texts.EXPIRED_GROUP`) naming its command,
its age and the first few calls removed before it. A call whose message also holds text or thinking keeps
its call and note (removing it would leave that prose alone). Not spilled: re-running a glance is cheaper than
reading an archive. Denied, interrupted and failed results are not sites (they are not snapshots of
state; the residue rules own the first two).

**Rounds.** A result's age is counted in rounds: real assistant messages (API replies, one per
`message.id`, CLI-written `<synthetic>` ones excluded) on the same thread after the message that made the
call. A long autonomous run is one user turn but hundreds of rounds, and a round is what makes a snapshot
stale: the model acted in between.

**Trim** (off by default). A site is any text result at least `min_chars` long (denials and interrupted
calls excepted: the other rules own them). All but the newest
`keep_recent` are written to `<workspace>/<spill_dir>/<sha256-prefix>.txt` (atomically, once per content,
the naming of the spill guard) and replaced by a pointer line. The spill folder must be inside the
workspace so the agent's own Read reaches it.

Idempotence: a body that already is a flower note (`texts.FLOWER_NOTE_PREFIX`) is never a trim site and is
never rewritten again; an expired result, and a short one that kept its body, still count as sites, so
`keep_recent` selects the same newest results on a second pass. The "longer than the note" test measures
the note with the widest age it could show (`_AGE_CEILING`), not the actual one: a second pass can count
fewer rounds (denial pruning removes whole messages), and a kept body must not then expire.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower import texts
from flower.errors import ConfigError, UnsafePathError
from flower.stores._plan import Plan, RewriteDetail, RewriteReport, run_alone
from flower.stores._transcript import (
    Entry,
    TranscriptIndex,
    blocks_of,
    is_protected,
    message_key,
    result_text,
)
from flower.stores.prune import _settle_emptied, find_interrupted
from flower.util.confined import Confined, resolve_inside

__all__ = [
    "EphemeralPolicy",
    "TrimPolicy",
    "expire_ephemeral",
    "plan_expiry",
    "plan_trim",
    "spill_text",
    "trim_results",
]

_COMMAND_CHARS = 60
_AGE_CEILING = 999_999
"""The widest age an expiry note is measured with when deciding whether it is shorter than the body."""
_HASH_CHARS = 16


@dataclass(frozen=True)
class EphemeralPolicy:
    """Expiry of stale glance results (S-19.1).

    A glance result older than the newest `keep_recent` is replaced by a one-line note only when its body is
    longer than that note; shorter bodies stay as they are, so expiry never makes the history longer.
    """

    keep_recent: int = 6
    """How many of the newest glance results keep their body (short results count among them too)."""
    predicate: Callable[[str], bool] | None = None
    """Which Bash commands expire; None means `flower.walls.glance.judge.is_ephemeral` (S-8: one predicate for
    "the coordinator may run it" and "its result expires")."""
    reads: bool = True
    """Whether text `Read` results expire too (the file keeps what they showed; reading it again is the
    re-run). Images and documents never do (S-20)."""

    def __post_init__(self) -> None:
        if self.keep_recent < 0:
            raise ConfigError(f"EphemeralPolicy.keep_recent must be >= 0, got {self.keep_recent}")

    def resolved_predicate(self) -> Callable[[str], bool]:
        if self.predicate is not None:
            return self.predicate
        from flower.walls.glance.judge import (
            is_ephemeral,  # lazy: glance parses shell, stores should not need it
        )

        return is_ephemeral


@dataclass(frozen=True)
class TrimPolicy:
    """Moving large tool results out of the resumed context (S-19.2)."""

    keep_recent: int = 20
    """How many of the newest large results stay inline."""
    min_chars: int = 2000
    """A result body this long or longer is large."""
    spill_dir: str = ".flower/spill"
    """Where bodies go, relative to the workspace; must stay inside it."""

    def __post_init__(self) -> None:
        if self.keep_recent < 0 or self.min_chars < 1:
            raise ConfigError(f"TrimPolicy needs keep_recent >= 0 and min_chars >= 1, got {self}")
        if Path(self.spill_dir).is_absolute() or ".." in Path(self.spill_dir).parts:
            raise ConfigError(
                f"TrimPolicy.spill_dir must be a relative path inside the workspace: {self.spill_dir!r}"
            )


_GROUP_SHOWN = 3
"""Removed calls a group's note names."""


def _newest_excluded(sites: list[Any], keep: int) -> list[Any]:
    return sites[: len(sites) - keep] if keep < len(sites) else []


def _short_command(command: str) -> str:
    line = command.strip().splitlines()[0] if command.strip() else ""
    return line if len(line) <= _COMMAND_CHARS else line[: _COMMAND_CHARS - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _rounds(age: int) -> str:
    return "1 round" if age == 1 else f"{age} rounds"


def _expiry_note(command: str, age: int, body: str) -> str | None:
    """The note replacing `body`, or None when `body` stays: already a note, or not longer than the note.

    Measured against the note at its widest age too, so a later pass that counts fewer rounds decides alike.
    """
    if body.startswith(texts.FLOWER_NOTE_PREFIX):
        return None
    short = _short_command(command)
    note = texts.EXPIRED_RESULT.format(command=short, age=_rounds(age))
    widest = texts.EXPIRED_RESULT.format(command=short, age=_rounds(_AGE_CEILING))
    return note if len(body) > max(len(note), len(widest)) else None


def _glance_label(tool: str, arguments: Any, reads: bool) -> str | None:
    """What a call that may expire is called in its note (a Bash command, `Read <path>`), else None."""
    if not isinstance(arguments, dict):
        return None
    if tool == "Bash":
        command = arguments.get("command")
        return command if isinstance(command, str) else None
    if tool == "Read" and reads:
        path = arguments.get("file_path")
        if not isinstance(path, str) or not path.strip():
            return None
        span = " ".join(f"{key}={arguments[key]}" for key in ("offset", "limit") if arguments.get(key) is not None)
        return f"Read {path}" + (f" ({span})" if span else "")
    return None


def plan_expiry(
    entries: list[Entry],
    index: TranscriptIndex,
    plan: Plan,
    policy: EphemeralPolicy,
    skip: set[tuple[int, int]],
) -> None:
    """Record expiry edits; `skip` holds (entry, block) results another rule owns (interrupted calls)."""
    predicate = policy.resolved_predicate()
    verdicts: dict[str, bool] = {}  # the predicate parses shell; commands repeat (git status), ask once each
    sites: list[tuple[int, int, str, str, int]] = []
    for result in index.ordered_results:
        use = index.uses.get(result.tool_use_id)
        if use is None or use.entry > result.entry or (result.entry, result.block) in skip:
            continue
        command = _glance_label(use.name, use.input, policy.reads)
        if command is None:
            continue
        entry = entries[result.entry]
        block = entry["message"]["content"][result.block]
        if is_protected(entry) or "toolDenialKind" in entry or block.get("is_error") is True:
            continue
        text = result_text(block)
        if text is None:
            continue
        if use.name == "Bash":
            if command not in verdicts:
                verdicts[command] = bool(predicate(command))
            if not verdicts[command]:
                continue
        sites.append((result.entry, result.block, command, text, index.age(use)))
    expiring = [site for site in _newest_excluded(sites, policy.keep_recent)
                if not site[3].startswith(texts.FLOWER_NOTE_PREFIX)]
    by_call = {str(entries[site[0]]["message"]["content"][site[1]].get("tool_use_id")): site for site in expiring}
    groups = _removable_groups(entries, index, by_call)
    grouped = {call for group in groups for call in group}
    for position, number, command, text, age in expiring:
        block = entries[position]["message"]["content"][number]
        note = _expiry_note(command, age, text)
        if note is None or block.get("tool_use_id") in grouped:
            continue
        plan.blocks[(position, number)] = {**block, "content": note}
        plan.note(RewriteDetail("expired", entries[position].get("uuid"), block.get("tool_use_id"),
                                len(text) - len(note), command))
    touched: set[int] = set()
    for *gone, anchor in groups:
        for call in gone:
            _remove_pair(entries, index, plan, call, by_call[call], touched)
        position, number, command, text, age = by_call[anchor]
        labels = [_short_command(by_call[call][2]) for call in gone]
        shown = "; ".join(labels[:_GROUP_SHOWN]) + ("; \N{HORIZONTAL ELLIPSIS}" if len(labels) > _GROUP_SHOWN else "")
        removed = f"{len(gone)} earlier expired call" + ("s" if len(gone) > 1 else "")
        note = texts.EXPIRED_GROUP.format(command=_short_command(command), age=_rounds(age), removed=removed,
                                          commands=shown)
        block = entries[position]["message"]["content"][number]
        plan.blocks[(position, number)] = {**block, "content": note}
        plan.note(RewriteDetail("expired", entries[position].get("uuid"), anchor, len(text) - len(note), command))
    _settle_emptied(entries, plan, touched)


def _removable_groups(entries: list[Entry], index: TranscriptIndex,
                      by_call: dict[str, tuple[int, int, str, str, int]]) -> list[list[str]]:
    """Runs of expiring calls (in result order, per thread) that can go as pairs, each run of two or more:
    a call can go when its assistant message holds nothing but calls that expire too or failed (no text or
    thinking is left alone in a message) and its one result is the expiring one. A successful result that stays
    ends a run; a failed or denied one does not (the denial stage may remove it, the orphan stage adds
    failed results: a second pass must find the same runs)."""
    messages: dict[str, list[dict[str, Any]]] = {}
    for position, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("type") == "assistant":
            messages.setdefault(message_key(entry, position), []).extend(blocks_of(entry) or [])

    def whole(call: str) -> bool:
        use = index.uses.get(call)
        if use is None or is_protected(entries[use.entry]) or len(index.results.get(call, ())) != 1:
            return False
        blocks = messages.get(message_key(entries[use.entry], use.entry), [])
        return bool(blocks) and all(isinstance(b, dict) and b.get("type") == "tool_use"
                                    and (str(b.get("id")) in by_call or failed(str(b.get("id")))) for b in blocks)

    def failed(call: str) -> bool:
        """A call that failed, was denied or has no result (the orphan stage gives it a failed one)."""
        return all(_failure(entries, result) for result in index.results.get(call, ()))
    groups: list[list[str]] = []
    current: dict[Any, list[str]] = {}
    for result in index.ordered_results:
        use = index.uses.get(result.tool_use_id)
        thread = use.thread if use is not None else None
        run = current.setdefault(thread, [])
        if result.tool_use_id in by_call and whole(result.tool_use_id):
            run.append(result.tool_use_id)
            continue
        if _failure(entries, result):
            continue  # failures, denials, healed orphans: whether a later stage removes or adds them, no break
        if len(run) >= 2:
            groups.append(run)
        current[thread] = []
    groups.extend(run for run in current.values() if len(run) >= 2)
    return groups


def _failure(entries: list[Entry], result: Any) -> bool:
    entry = entries[result.entry]
    return "toolDenialKind" in entry or entry["message"]["content"][result.block].get("is_error") is True


def _remove_pair(entries: list[Entry], index: TranscriptIndex, plan: Plan, call: str,
                 site: tuple[int, int, str, str, int], touched: set[int]) -> None:
    """Remove an expiring call and its result, as a pair (S-20); the store keeps both."""
    use = index.uses[call]
    position, number, command, text, _ = site
    plan.blocks[(use.entry, use.block)] = None
    plan.blocks[(position, number)] = None
    touched.update((use.entry, position))
    chars = len(use.name) + len(json.dumps(use.input, ensure_ascii=False, default=str)) + len(text)
    plan.note(RewriteDetail("expired", entries[position].get("uuid"), call, chars, command))


def plan_trim(
    entries: list[Entry],
    index: TranscriptIndex,
    plan: Plan,
    policy: TrimPolicy,
    workspace: Path,
    skip: set[tuple[int, int]],
) -> None:
    """Record trim edits, writing each moved body to the spill folder (the one side effect of a rewrite)."""
    sites: list[tuple[int, int, str]] = []
    for result in index.ordered_results:
        key = (result.entry, result.block)
        entry = entries[result.entry]
        if key in skip or key in plan.blocks or is_protected(entry) or "toolDenialKind" in entry:
            continue
        text = result_text(entry["message"]["content"][result.block])
        if text is None or len(text) < policy.min_chars or text.startswith(texts.FLOWER_NOTE_PREFIX):
            continue
        sites.append((result.entry, result.block, text))
    if len(sites) <= policy.keep_recent:
        return
    try:
        # the same boundary as the spill guard: a symlinked `.flower` or `spill/` must not carry copies of
        # tool output out of the workspace; then the results stay inline and the report says why
        folder = Confined(os.path.realpath(workspace), resolve_inside(workspace, policy.spill_dir))
        folder.make()
    except (OSError, UnsafePathError) as error:
        plan.note(RewriteDetail("skipped", None, None, 0, f"trim: {error}"))
        return
    for position, number, text in _newest_excluded(sites, policy.keep_recent):
        try:
            path = spill_text(folder, text)
        except (OSError, UnsafePathError) as error:
            plan.note(RewriteDetail("skipped", entries[position].get("uuid"), None, 0, f"trim: {error}"))
            continue
        note = texts.TRIMMED_RESULT.format(chars=f"{len(text):,}", path=path)
        block = entries[position]["message"]["content"][number]
        plan.blocks[(position, number)] = {**block, "content": note}
        plan.note(
            RewriteDetail(
                "trimmed",
                entries[position].get("uuid"),
                block.get("tool_use_id"),
                len(text) - len(note),
                str(path),
            )
        )


def spill_text(folder: Confined | Path, text: str) -> Path:
    """Write `text` to `folder/<sha256-prefix>.txt` unless that already is a regular file holding it; atomic
    (temp file + rename), and no symlink below the folder's anchor is followed (a `Path` is its own anchor)."""
    data = text.encode("utf-8", "surrogatepass")  # transcripts can carry lone surrogates; keep them
    confined = folder if isinstance(folder, Confined) else Confined(os.path.realpath(folder))
    name = f"{hashlib.sha256(data).hexdigest()[:_HASH_CHARS]}.txt"
    confined.write_once(name, data, prefix=".trim.")
    return confined.path / name


def expire_ephemeral(
    entries: list[Entry], policy: EphemeralPolicy | None = None
) -> tuple[list[Entry], RewriteReport]:
    """Rewrite 1 alone: stale glance results become one line."""
    chosen = policy if policy is not None else EphemeralPolicy()
    return run_alone(
        entries, lambda index, plan: plan_expiry(entries, index, plan, chosen, find_interrupted(entries))
    )


def trim_results(
    entries: list[Entry], *, workspace: str | Path, policy: TrimPolicy | None = None
) -> tuple[list[Entry], RewriteReport]:
    """Rewrite 2 alone: large results move to the spill folder."""
    chosen = policy if policy is not None else TrimPolicy()
    skip = find_interrupted(entries)
    return run_alone(
        entries, lambda index, plan: plan_trim(entries, index, plan, chosen, Path(workspace), skip)
    )
