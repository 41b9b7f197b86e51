"""Documents a run keeps about its goal: `Brief`, `Goal` and `Verdict` (L-9, L-10).

Each is plain data parsed from what a model wrote, with the shared section parser
(`flower.util.sections.labelled_sections`): fenced code never reaches a document, an unclosed fence drops the
rest, headings may be written `## X`, `**X**`, `X:` or numbered, in English or Chinese, and the first non-empty
copy of a section wins. `parse` never raises; `load` returns None for a missing or unreadable file.

Invariants:
- `to_markdown()` then `parse()` gives the same document back (an empty section is written as a placeholder
  and read back as empty).
- `prompt_block()` carries only the filled sections, never the document's own notes: it is what downstream
  steps get instead of a clarifier's raw reply.
- A verdict that cannot be read is not achieved (`state == ""`, `achieved` False).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from flower import texts
from flower.util.confined import read_note, replace_text
from flower.util.sections import first_nonempty, labelled_sections

__all__ = ["BRIEF_SECTIONS", "GOAL_SECTIONS", "VERDICT_SECTIONS", "Brief", "Goal", "Verdict", "VerdictState"]

T = TypeVar("T")

BRIEF_SECTIONS: Mapping[str, tuple[str, ...]] = {
    "goal": ("Goal", "goals", "objective", "目标", "需求目标"),
    "acceptance": ("Acceptance criteria", "acceptance", "acceptance criterion", "definition of done", "done when",
                   "验收标准", "验收条件", "验收"),
    "bounds": ("Bounds", "scope", "out of scope", "non-goals", "constraints", "边界", "范围边界", "不做什么", "范围"),
    "unknowns": ("Unknowns and assumptions", "unknowns & assumptions", "unknowns", "assumptions", "open questions",
                 "未知与假设", "未知项与假设", "未知项", "已知未知", "假设", "未知"),
    "additions": ("Added during the run", "added at wake", "additions", "运行中补充"),
}
"""Canonical key -> (display name, other aliases). `additions` holds what the human sent during the run."""
GOAL_SECTIONS: Mapping[str, tuple[str, ...]] = {
    "statement": ("Goal", "goal statement", "statement", "done means", "目标", "完成标志"),
    "checks": ("Checks", "checklist", "acceptance checks", "判定清单", "判定条件", "验收清单", "检查项", "判定"),
}
VERDICT_SECTIONS: Mapping[str, tuple[str, ...]] = {
    "state": ("Verdict", "conclusion", "judgement", "judgment", "结论", "判定"),
    "reason": ("Reason", "why", "evidence", "理由", "依据"),
    "failed": ("Failed", "failed items", "failed checks", "not met", "未通过", "未通过项"),
}
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)、])\s+(?:\[[ xX]\]\s+)?")
_UNVERIFIABLE = re.compile(r"\[\s*(?:cannot|can't|can not)\s+(?:be\s+)?verif(?:y|ied)\s+here|\[\s*无法在此验证",
                           re.IGNORECASE)


def _display(table: Mapping[str, tuple[str, ...]], key: str) -> str:
    return table[key][0]


def _read(path: str | os.PathLike[str]) -> str | None:
    return read_note(path)  # never through a planted symlink, never an endless device


def _write(path: str | os.PathLike[str], text: str) -> Path:
    """Write atomically (a reader never sees half a document)."""
    return replace_text(path, text)


def _filled(body: str) -> str:
    return "" if body.strip() == texts.NOT_FILLED else body.strip()


def _items(body: str) -> tuple[str, ...]:
    """One item per non-empty line, list markers stripped."""
    return tuple(line for line in (_ITEM.sub("", raw).strip() for raw in body.splitlines()) if line)


@dataclass(frozen=True)
class Brief:
    """What the human wants: the goal, how to tell it is done, what is out of bounds, what is unknown."""

    goal: str = ""
    acceptance: str = ""
    bounds: str = ""
    unknowns: str = ""
    additions: tuple[str, ...] = ()
    """Messages the human added during the run or at a wake, in order (never parsed away)."""

    REQUIRED = ("goal", "acceptance", "bounds", "unknowns")

    @classmethod
    def parse(cls, text: str) -> Brief:
        found = labelled_sections(text or "", BRIEF_SECTIONS)
        first = first_nonempty(found)
        additions = tuple(s.body for s in found if s.key == "additions" and s.body)
        goal, acceptance, bounds, unknowns = (_filled(first.get(key, "")) for key in cls.REQUIRED)
        return cls(goal, acceptance, bounds, unknowns, additions)

    def missing(self) -> list[str]:
        """The display names of the required sections that are empty."""
        return [_display(BRIEF_SECTIONS, key) for key in self.REQUIRED if not getattr(self, key).strip()]

    @property
    def complete(self) -> bool:
        return not self.missing()

    def to_markdown(self) -> str:
        parts = ["# Brief", texts.BRIEF_NOTE]
        parts += [f"## {_display(BRIEF_SECTIONS, key)}\n\n{getattr(self, key) or texts.NOT_FILLED}"
                  for key in self.REQUIRED]
        parts += [f"## {_display(BRIEF_SECTIONS, 'additions')}\n\n{extra}" for extra in self.additions]
        return "\n\n".join(parts) + "\n"

    def prompt_block(self) -> str:
        """The filled sections only, for the prompts of later steps."""
        parts = [f"## {_display(BRIEF_SECTIONS, key)}\n{getattr(self, key)}" for key in self.REQUIRED
                 if getattr(self, key)]
        parts += [f"## {_display(BRIEF_SECTIONS, 'additions')}\n{extra}" for extra in self.additions]
        return "\n\n".join(parts)

    def write(self, path: str | os.PathLike[str]) -> Path:
        return _write(path, self.to_markdown())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Brief | None:
        text = _read(path)
        return None if text is None else cls.parse(text)


@dataclass(frozen=True)
class Goal:
    """A goal a judge can check: one statement and a list of checks, some perhaps unverifiable here."""

    statement: str = ""
    checks: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Goal:
        first = first_nonempty(labelled_sections(text or "", GOAL_SECTIONS))
        checks = _filled(first.get("checks", ""))
        return cls(_filled(first.get("statement", "")), _items(checks))

    def missing(self) -> list[str]:
        gaps = [] if self.statement.strip() else [_display(GOAL_SECTIONS, "statement")]
        return gaps + ([] if self.checks else [_display(GOAL_SECTIONS, "checks")])

    @property
    def complete(self) -> bool:
        return not self.missing()

    @property
    def unverifiable(self) -> tuple[str, ...]:
        """The checks marked "[cannot verify here: ...]"."""
        return tuple(check for check in self.checks if _UNVERIFIABLE.search(check))

    def amend(self, extra: str) -> Goal:
        """The goal with `extra` appended to the statement (never replacing it)."""
        extra = extra.strip()
        return self if not extra else Goal(f"{self.statement}\n\n(amended) {extra}".strip(), self.checks)

    def to_markdown(self) -> str:
        checks = "\n".join(f"- {check}" for check in self.checks) or texts.NOT_FILLED
        return (f"# The goal\n\n{texts.GOAL_NOTE}\n\n## {_display(GOAL_SECTIONS, 'statement')}\n\n"
                f"{self.statement or texts.NOT_FILLED}\n\n## {_display(GOAL_SECTIONS, 'checks')}\n\n{checks}\n")

    def prompt_block(self) -> str:
        checks = "\n".join(f"- {check}" for check in self.checks)
        return f"## Goal\n{self.statement}\n\n## Checks\n{checks}".strip()

    def write(self, path: str | os.PathLike[str]) -> Path:
        return _write(path, self.to_markdown())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Goal | None:
        text = _read(path)
        return None if text is None else cls.parse(text)


VerdictState = Literal["achieved", "not_yet", "unreachable", ""]
# Ordered by meaning; within the text the earliest match wins, the longest at a position ("not achieved"
# before "achieved"), and words match whole ("no" inside "unknown" is not a verdict).
_STATE_WORDS: tuple[tuple[VerdictState, tuple[str, ...]], ...] = (
    ("unreachable", ("unreachable", "not reachable", "impossible", "cannot be achieved", "can't be achieved",
                     "unverifiable", "cannot be verified", "无法验证", "没法验证", "验证不了", "无法判定", "无法达成",
                     "不可达成", "做不到", "不可能")),
    ("not_yet", ("not yet", "not_yet", "not achieved", "not met", "not done", "未达成", "没达成", "尚未达成", "未完成")),
    ("achieved", ("achieved", "met", "done", "passed", "已达成", "达成", "已完成")),
)
_WEAK = ("met", "done", "passed")
"""Words that decide a verdict section but are too common to decide a whole reply without one."""
_OWNER = {word: state for state, words in _STATE_WORDS for word in words}


def _words(words: list[str]) -> re.Pattern[str]:
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(r"(?<![\w-])(" + alternation + r")(?![\w-])", re.IGNORECASE)


_STATE = _words(list(_OWNER))
_STATE_STRONG = _words([w for w in _OWNER if w not in _WEAK])


def _state_of(text: str, pattern: re.Pattern[str] = _STATE) -> VerdictState:
    bare = text.strip().strip(".。!").strip().lower()
    if bare in ("1", "true"):
        return "achieved"
    if bare in ("0", "false"):
        return "not_yet"
    match = pattern.search(text)
    return _OWNER[match.group(1).lower()] if match else ""


@dataclass(frozen=True)
class Verdict:
    """What a judge decided about one round."""

    state: VerdictState = ""
    """"" when the verdict could not be read: it counts as not achieved."""
    reason: str = ""
    failed: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, text: str) -> Verdict:
        first = first_nonempty(labelled_sections(text or "", VERDICT_SECTIONS))
        said = _filled(first.get("state", ""))
        state = _state_of(said) if said else ""
        if not state:
            state = _state_of(text or "", _STATE_STRONG)
        reason = _filled(first.get("reason", ""))
        if not reason and said:
            reason = "\n".join(said.splitlines()[1:]).strip()
        return cls(state, reason, _items(_filled(first.get("failed", ""))))

    @property
    def achieved(self) -> bool:
        return self.state == "achieved"

    @property
    def unreachable(self) -> bool:
        return self.state == "unreachable"

    @property
    def ok(self) -> bool:
        """The verdict could be read at all."""
        return self.state != ""

    def feedback(self) -> str:
        """What the worker's resumed session is told after a round that did not achieve the goal."""
        failed = "\n".join(f"- {item}" for item in self.failed) or "- (the judge listed none)"
        return texts.VERDICT_FEEDBACK.format(reason=self.reason or texts.VERDICT_NO_REASON, failed=failed)

    def to_markdown(self) -> str:
        failed = "\n".join(f"- {item}" for item in self.failed) or texts.NOT_FILLED
        return (f"## Verdict\n\n{self.state or texts.NOT_FILLED}\n\n## Reason\n\n{self.reason or texts.NOT_FILLED}"
                f"\n\n## Failed\n\n{failed}\n")

    def write(self, path: str | os.PathLike[str]) -> Path:
        return _write(path, self.to_markdown())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Verdict | None:
        text = _read(path)
        return None if text is None else cls.parse(text)
