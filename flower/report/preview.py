"""What the next resume of a session would feed back, and what the rewrite costs and saves (B-11).

`build_preview(session_id, main, subagents, policies=...)` runs the same pure rewrite a resume runs
(`flower.stores.rewrite.rewrite`, with the policies the run recorded in its manifest, else the runtime's
defaults: expiry on, trim off, keep one denial) on the stored transcripts and compares the model-visible content before and after: a unified diff, the rewrite's
own report, characters saved, and an estimate of the prompt-cache price of the change.

The cache estimate (P-4): a resume sends the stored history as its prefix. Everything up to the first entry
the rewrite changed is byte-identical, so a warm cache still serves it; from that entry to the end the
rewritten text must be written to the cache instead of read from it. Tokens are estimated as characters/4.
Every later request then reads fewer tokens. All prices are in `PRICING`, in one place.

Invariants: pure over entries (nothing is written, the input is not mutated); the first changed entry is
found on the model-visible rendering, so rewrites that change only bookkeeping fields cost nothing here.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flower.report.analysis import visible_chars

__all__ = [
    "PRICING",
    "Preview",
    "Pricing",
    "TranscriptPreview",
    "build_preview",
    "preview_json",
    "render_entry",
]

Entry = Mapping[str, Any]


@dataclass(frozen=True)
class Pricing:
    """Prompt-cache prices in USD per million tokens, and the characters-per-token estimate.

    Defaults: Anthropic's published Opus 4.5 rates (5-minute cache write $6.25, cache read $0.50 per MTok);
    the write/read ratio (12.5x) is the same for every current model, so break-even turns do not depend on it.
    """

    cache_write: float = 6.25
    cache_read: float = 0.50
    chars_per_token: float = 4.0

    def tokens(self, chars: int) -> int:
        return round(chars / self.chars_per_token)

    def usd(self, tokens: int, rate: float) -> float:
        return tokens * rate / 1_000_000


PRICING = Pricing()


def _lines(prefix: str, text: str, max_lines: int | None) -> list[str]:
    lines = text.splitlines() or [""]
    shown = lines if max_lines is None else lines[:max_lines]
    out = [f"{prefix}{shown[0]}"] + [f"    {line}" for line in shown[1:]]
    if len(shown) < len(lines):
        out.append(f"    ... ({len(lines) - len(shown)} more lines)")
    return out


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) if p.get("type") == "text" else f"[{p.get('type')}]"
            for p in content
            if isinstance(p, Mapping)
        )
    return ""


def render_entry(entry: Entry, max_lines: int | None = None) -> list[str]:
    """The model-visible content of one entry as diffable lines ([] for entries the model never sees)."""
    message = entry.get("message")
    if entry.get("type") not in ("user", "assistant") or not isinstance(message, Mapping):
        return []
    role = str(entry["type"])
    content = message.get("content")
    if isinstance(content, str):
        return _lines(f"{role}: ", content, max_lines)
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            out += _lines(f"{role}: ", str(block.get("text") or ""), max_lines)
        elif kind == "thinking":
            out += _lines(f"{role} thinking: ", str(block.get("thinking") or ""), max_lines)
        elif kind == "tool_use":
            data = json.dumps(block.get("input") or {}, ensure_ascii=False, sort_keys=True)
            out += _lines(f"tool_use {block.get('name')} ({block.get('id')}): ", data, max_lines)
        elif kind == "tool_result":
            error = " error" if block.get("is_error") else ""
            out += _lines(
                f"tool_result{error} ({block.get('tool_use_id')}): ",
                _result_text(block.get("content")),
                max_lines,
            )
        else:
            out.append(f"{role}: [{kind}]")
    return out


def _visible(entries: Sequence[Entry]) -> list[tuple[Entry, list[str]]]:
    return [(entry, lines) for entry in entries if (lines := render_entry(entry))]


def _first_change(before: list[tuple[Entry, list[str]]], after: list[tuple[Entry, list[str]]]) -> int | None:
    for index, (old, new) in enumerate(zip(before, after)):
        if old[1] != new[1]:
            return index
    return None if len(before) == len(after) else min(len(before), len(after))


def _tail(pairs: list[tuple[Entry, list[str]]], first: int | None) -> int:
    return visible_chars([entry for entry, _ in pairs[first:]]) if first is not None else 0


@dataclass(frozen=True)
class TranscriptPreview:
    """One transcript (the main one or a subagent's) before and after the rewrite."""

    label: str
    report: Any
    """`flower.stores.rewrite.RewriteReport`."""
    diff: tuple[str, ...]
    chars_before: int
    chars_after: int
    tail_chars_before: int
    """Model-visible characters from the first changed entry to the end, as stored."""
    tail_chars_after: int
    """The same span after the rewrite (what a warm cache must now write)."""
    changed: bool


def rewrite_options(policies: Mapping[str, Any] | None) -> dict[str, Any]:
    """`rewrite()` keyword arguments from a manifest's recorded policies (None: the runtime's defaults).

    A trim writes spill files; a preview must write nothing where the run keeps its files, so trimmed
    results point into a throwaway directory here (the pointer text differs only in that path)."""
    from flower.stores.rewrite import EphemeralPolicy, TrimPolicy

    if not policies:
        return {}
    trim, ephemeral = policies.get("trim"), policies.get("ephemeral")
    options: dict[str, Any] = {
        "trim": TrimPolicy(**trim) if trim else False,
        "ephemeral": EphemeralPolicy(**ephemeral) if ephemeral else False,
        "keep_denials": policies.get("keep_denials", 1),
    }
    if trim:
        import tempfile

        options["workspace"] = tempfile.mkdtemp(prefix="flower-preview-")
    return options


def preview_transcript(
    label: str, entries: Sequence[Entry], *, max_lines: int | None = 12,
    policies: Mapping[str, Any] | None = None,
) -> TranscriptPreview:
    from flower.stores.rewrite import rewrite

    rewritten, report = rewrite([dict(e) for e in entries], **rewrite_options(policies))
    before, after = _visible(entries), _visible(rewritten)
    first = _first_change(before, after)
    old_lines = [line for entry, _ in before for line in render_entry(entry, max_lines)]
    new_lines = [line for entry, _ in after for line in render_entry(entry, max_lines)]
    diff = difflib.unified_diff(
        old_lines, new_lines, f"{label} (stored)", f"{label} (next resume)", n=1, lineterm=""
    )
    return TranscriptPreview(
        label=label,
        report=report,
        diff=tuple(diff),
        chars_before=visible_chars(entries),
        chars_after=visible_chars(rewritten),
        tail_chars_before=_tail(before, first),
        tail_chars_after=_tail(after, first),
        changed=first is not None,
    )


@dataclass(frozen=True)
class Preview:
    """The next resume of one session: its main transcript, its subagents, and the cache arithmetic."""

    session_id: str
    main: TranscriptPreview
    subagents: tuple[TranscriptPreview, ...]
    pricing: Pricing
    stages: tuple[str, ...] = ()
    """The rewrite stages the next resume runs, in order."""

    @property
    def chars_saved(self) -> int:
        """Model-visible characters the main thread's next request carries fewer."""
        return self.main.chars_before - self.main.chars_after

    @property
    def cache_write_usd(self) -> float:
        """Extra cost of the first resumed request when the cache is still warm: the span from the first
        changed entry is written anew instead of read."""
        p = self.pricing
        return p.usd(p.tokens(self.main.tail_chars_after), p.cache_write) - p.usd(
            p.tokens(self.main.tail_chars_before), p.cache_read
        )

    @property
    def saved_per_request_usd(self) -> float:
        """What each later request saves by reading fewer cached tokens."""
        return self.pricing.usd(self.pricing.tokens(max(0, self.chars_saved)), self.pricing.cache_read)

    @property
    def cold_saved_usd(self) -> float:
        """With an expired cache (the usual case after a pause) the first request writes fewer tokens."""
        return self.pricing.usd(self.pricing.tokens(max(0, self.chars_saved)), self.pricing.cache_write)

    @property
    def break_even_requests(self) -> float | None:
        """Later requests needed to earn back a warm-cache rewrite (None when nothing is saved)."""
        if not self.main.changed:
            return 0.0
        per = self.saved_per_request_usd
        return max(0.0, self.cache_write_usd) / per if per > 0 else None


def build_preview(
    session_id: str,
    main_entries: Sequence[Entry],
    sub_entries_by_agent: Mapping[str, Sequence[Entry]] | None = None,
    *,
    pricing: Pricing = PRICING,
    max_lines: int | None = 12,
    policies: Mapping[str, Any] | None = None,
) -> Preview:
    """The preview of resuming `session_id`; `max_lines` caps each block in the diff (None: whole blocks);
    `policies` are the rewrites the run recorded (`Runtime` writes them to the manifest)."""
    subs = tuple(
        preview_transcript(f"subagent {agent}", entries, max_lines=max_lines, policies=policies)
        for agent, entries in (sub_entries_by_agent or {}).items()
    )
    main = preview_transcript("main", main_entries, max_lines=max_lines, policies=policies)
    return Preview(session_id, main, subs, pricing, stages=rewrite_stages(policies))


def rewrite_stages(policies: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The names of the rewrite stages a resume under `policies` runs, in order (the stores' registry)."""
    from flower.stores.stages import RewriteOptions, stage_names
    from flower.stores.trim import EphemeralPolicy

    options = rewrite_options(policies)
    if not options:  # the runtime's defaults
        return tuple(stage_names(RewriteOptions(ephemeral=EphemeralPolicy())))
    return tuple(stage_names(RewriteOptions(
        ephemeral=options["ephemeral"] or None, trim=options["trim"] or None,
        keep_denials=options["keep_denials"])))


def _transcript_json(part: TranscriptPreview) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "label": part.label,
        "changed": part.changed,
        "report": asdict(part.report),
        "summary": str(part.report),
        "chars_before": part.chars_before,
        "chars_after": part.chars_after,
        "tail_chars_before": part.tail_chars_before,
        "tail_chars_after": part.tail_chars_after,
        "diff": list(part.diff),
    }


def preview_json(preview: Preview) -> dict[str, Any]:
    be = preview.break_even_requests
    return {
        "session_id": preview.session_id,
        "stages": list(preview.stages),
        "main": _transcript_json(preview.main),
        "subagents": [_transcript_json(part) for part in preview.subagents],
        "chars_saved": preview.chars_saved,
        "tokens_saved": preview.pricing.tokens(preview.chars_saved),
        "cache": {
            "warm_extra_usd": round(preview.cache_write_usd, 6),
            "saved_per_request_usd": round(preview.saved_per_request_usd, 6),
            "cold_saved_usd": round(preview.cold_saved_usd, 6),
            "break_even_requests": None if be is None else round(be, 1),
            "pricing": {
                "cache_write_per_mtok": preview.pricing.cache_write,
                "cache_read_per_mtok": preview.pricing.cache_read,
                "chars_per_token": preview.pricing.chars_per_token,
            },
        },
    }
