"""Markdown documents cut into `## Heading` sections: one parser for handoffs, briefs and goals.

    doc = parse_sections(text, known=("doing", "next"))
    doc["next"]            # the body under "## Next" (keys are normalised: lower case, no trailing colon)
    doc.title("next")      # "Next", as written
    render_sections(doc)   # back to markdown

Invariants:
- A heading is an ATX heading (`#` to `######`, then a space or the end of the line), indented at most
  three spaces, outside any fenced code block. A line inside a ``` or ~~~ fence is content whatever it
  says; a fence closes with the same character, at least as long, and nothing after it (CommonMark); an
  unclosed fence runs to the end of the document.
- With `known`, only headings whose key is in it start a section; any other heading is content of the
  section it stands in. With `level`, only headings of that depth count.
- Nothing is dropped: text before the first section is the `preamble`, and a repeated heading appends its
  body to the first one's (blank line between), so `render_sections` keeps every line of content.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = [
    "Heading",
    "Labelled",
    "Sections",
    "first_nonempty",
    "headings",
    "labelled_sections",
    "parse_sections",
    "render_sections",
    "section_key",
    "unfenced_lines",
]

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def section_key(title: str) -> str:
    """The key a heading is looked up by: lower case, inner spaces collapsed, no trailing colon or hashes."""
    title = _CLOSING_HASHES.sub("", title.strip())
    return " ".join(title.strip().rstrip(":").strip().lower().split())


@dataclass(frozen=True)
class Heading:
    """One heading line outside fenced code."""

    line: int
    """0-based line number."""
    level: int
    """1 for `#`, 2 for `##`, ..."""
    title: str
    """The heading's text as written (closing hashes removed)."""

    @property
    def key(self) -> str:
        return section_key(self.title)


def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line of `text` outside fenced code blocks; an unclosed fence drops the
    rest of the text. The one fence scanner of the headings and the labelled sections."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines()):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not opened.group(2).strip():
                fence = None
            continue
        if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            fence = opened.group(1)
            continue
        yield number, line


def headings(text: str) -> Iterator[Heading]:
    """The ATX headings of `text` that are not inside a fenced code block."""
    for number, line in _outside_fences(text):
        match = _HEADING.match(line)
        if match:
            title = _CLOSING_HASHES.sub("", match.group(2) or "").strip()
            yield Heading(number, len(match.group(1)), title)


@dataclass
class Sections(Mapping[str, str]):
    """An ordered, read-only mapping from section key to body (stripped), plus the preamble."""

    preamble: str = ""
    """Text before the first section, stripped."""
    _bodies: dict[str, str] = field(default_factory=dict)
    _titles: dict[str, str] = field(default_factory=dict)
    _levels: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, key: str) -> str:
        return self._bodies[section_key(key)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._bodies)

    def __len__(self) -> int:
        return len(self._bodies)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and section_key(key) in self._bodies

    def title(self, key: str) -> str:
        """The heading as written for `key`."""
        return self._titles[section_key(key)]

    def level(self, key: str) -> int:
        return self._levels[section_key(key)]

    def with_section(self, title: str, body: str, level: int = 2) -> Sections:
        """A copy with `title`'s body replaced (or the section appended at the end)."""
        key = section_key(title)
        copy = Sections(self.preamble, dict(self._bodies), dict(self._titles), dict(self._levels))
        copy._bodies[key] = body.strip()
        copy._titles.setdefault(key, title.strip())
        copy._levels.setdefault(key, level)
        return copy

    def _add(self, heading: Heading, body: str) -> None:
        key, body = heading.key, body.strip()
        if key in self._bodies:
            self._bodies[key] = "\n\n".join(part for part in (self._bodies[key], body) if part)
            return
        self._bodies[key] = body
        self._titles[key] = heading.title
        self._levels[key] = heading.level


def parse_sections(text: str, *, known: Collection[str] | None = None, level: int | None = None) -> Sections:
    """Cut `text` at its headings (only `known` keys / only `level`, when given) into `Sections`."""
    wanted = {section_key(k) for k in known} if known is not None else None
    cuts = [h for h in headings(text)
            if (wanted is None or h.key in wanted) and (level is None or h.level == level)]
    lines = text.splitlines()
    doc = Sections()
    doc.preamble = "\n".join(lines[: cuts[0].line] if cuts else lines).strip()
    for heading, after in zip(cuts, [*cuts[1:], None]):
        end = after.line if after is not None else len(lines)
        doc._add(heading, "\n".join(lines[heading.line + 1 : end]))
    return doc


def render_sections(doc: Sections, level: int | None = None) -> str:
    """Markdown again: the preamble, then each section under its heading (its own depth unless `level`)."""
    parts = [doc.preamble] if doc.preamble else []
    for key in doc:
        marks = "#" * (level or doc.level(key))
        parts.append(f"{marks} {doc.title(key)}\n\n{doc[key]}".rstrip())
    return "\n\n".join(parts) + "\n"


# --- labelled sections: the forms a model writes them in (L-9) --------------------------------------------
# Briefs, goals and verdicts come back from a model, which writes "## Goal", "**Goal**", "Goal:", "3. Goal"
# or "目标：...". `labelled_sections` reads all of these, for a fixed set of sections named by aliases.
# Invariants (on top of the module's): fenced code is removed from the bodies, and an unclosed fence drops
# everything after it (a truncated reply must come back incomplete, not with a half code block as content);
# a line only starts a section when it is marked as a heading (`#`, bold, a colon after the label, or the
# label alone on its line, optionally numbered), so a body line that merely begins with a label word stays
# content; aliases are tried longest first ("未知与假设" before "未知"); any other ATX heading ends the
# section before it (its text is outside every known section and is dropped); horizontal rules are dropped.

_HRULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_NUMBER = r"(?:\d{1,3}[ \t]*[.、)）][ \t]*)?"


@dataclass(frozen=True)
class Labelled:
    """One labelled section of a document, in the order it appears."""

    key: str
    """The canonical name the alias belongs to."""
    title: str
    """The heading line as written, stripped."""
    body: str
    """Its text: fenced code removed, horizontal rules dropped, blank runs collapsed, stripped."""


def unfenced_lines(text: str) -> list[str]:
    """The lines of `text` outside fenced code blocks; an unclosed fence drops the rest of the text."""
    return [line for _, line in _outside_fences(text)]


def _label_pattern(aliases: Mapping[str, Collection[str]]) -> tuple[re.Pattern[str], dict[str, str]]:
    owner = {alias.strip().lower(): key for key, names in aliases.items() for alias in names if alias.strip()}
    ordered = sorted(owner, key=len, reverse=True)
    alternation = "|".join(re.escape(alias) for alias in ordered) or r"(?!x)x"
    pattern = re.compile(
        r"^ {0,3}(?P<atx>#{1,6}[ \t]*)?" + _NUMBER + r"(?P<bold>\*\*|__)?[ \t]*"
        r"(?P<label>" + alternation + r")(?!\w)[ \t]*(?P<close>\*\*|__)?[ \t]*(?P<colon>[:：])?[ \t]*"
        r"(?P<close2>\*\*|__)?[ \t]*(?P<rest>.*)$",
        re.IGNORECASE,
    )
    return pattern, owner


def _heading_body(match: re.Match[str]) -> str | None:
    """The body text on a heading line ("" when none), or None when the line is not a heading."""
    if match.group("bold") is None and (match.group("close") or match.group("close2")):
        return None  # "Goal**:": a closing bold with no opening one is text, not a heading
    rest = match.group("rest").strip()
    if _HEADING.match(rest) or _HRULE.match(rest) or _FENCE.match(rest):
        rest = ""  # "Goal: # x", "Goal: ---", "Goal: ```": not body text (on a line of its own it would not be)
    bold = match.group("bold") is not None and (match.group("close") or match.group("close2")) is not None
    if match.group("colon"):
        return rest
    if bold:
        return rest
    if match.group("atx") and (not rest or rest[0] in "([（【-–—"):
        return ""  # "## Goal (what we want)": the rest is part of the heading
    return "" if not rest else None


def _clean(lines: list[str]) -> str:
    text = "\n".join(line for line in lines if not _HRULE.match(line))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def labelled_sections(text: str, aliases: Mapping[str, Collection[str]]) -> list[Labelled]:
    """Every section of `text` whose heading names one of `aliases` (canonical key -> its names, any case),
    in order; text outside them is dropped. See the invariants above."""
    pattern, owner = _label_pattern(aliases)
    found: list[Labelled] = []
    current: tuple[str, str, list[str]] | None = None

    def close() -> None:
        if current is not None:
            found.append(Labelled(current[0], current[1], _clean(current[2])))

    for line in unfenced_lines(text):
        match = pattern.match(line)
        body = _heading_body(match) if match else None
        if match is not None and body is not None:
            inner = pattern.match(body) if body else None
            if inner is not None and _heading_body(inner) is not None:
                body = ""  # "Goal: Bounds:" carries no body text, only another label
            close()
            current = (owner[match.group("label").lower()], line.strip(), [body] if body else [])
        elif _HEADING.match(line) and not _HRULE.match(line):
            close()
            current = None
        elif current is not None:
            current[2].append(line)
    close()
    return found


def first_nonempty(sections: list[Labelled]) -> dict[str, str]:
    """Canonical key -> the body of its first non-empty section (a repeated section never overrides)."""
    chosen: dict[str, str] = {}
    for section in sections:
        if section.body and section.key not in chosen:
            chosen[section.key] = section.body
    return chosen
