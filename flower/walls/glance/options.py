"""The glance option parser: one shared reading of a command's words into flags and operands (S-9, B-2).

Concept. Every rule of `flower.walls.glance.rules` is read by this one parser, so no rule can parse its
words differently from the others. A `Rule` says how its command reads options (`order`):

- "stop": options end at the first operand, as bash builtins (`command`, `type`), `env`, awk, lsof and
  every `getopts`-based script do. `command rm -v FILE` has no option at all: `-v` is an operand of rm.
- "permute": options may follow operands (git's parse-options, rg, tree, jq, cobra tools).
- "gnu": GNU getopt_long permutes, unless POSIXLY_CORRECT is set in the environment; then it stops at
  the first operand. We cannot know the environment, so the line must pass both readings.

`--` ends options in every order. `interpretations()` yields each reading a rule allows; the judge
checks all of them, so a word that one reading takes for a flag and the other for an operand must be
harmless either way.

Invariants.
- Allow, never deny: a flag is usable only if its rule lists it (`-n` no value, `-n=` a required value,
  `-n=?` an optional attached value, `--arg==` two following words as jq reads them).
- A word bash would still expand (`$X`, a glob) is never read as a flag: its real value is unknown.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from flower import texts

__all__ = ["Args", "Order", "Refusal", "Rule", "Word", "interpretations", "literal", "parse", "reason"]

Order = Literal["gnu", "stop", "permute"]


class Refusal(Exception):
    """Why a command is not a glance; `code` keys `texts.GLANCE_WHY`, `what` names the culprit."""

    def __init__(self, code: str, what: str = "") -> None:
        super().__init__(code, what)
        self.code, self.what = code, what


def reason(refusal: Refusal) -> str:
    """The refusal as the one short line a denial message shows."""
    # One line, and short: it lands in the coordinator's context. A stray \r is the usual culprit
    # when `git status\r` is refused, so it stays visible.
    what = " ".join(refusal.what.replace("\r", "\\r").split())
    return texts.GLANCE_WHY[refusal.code].format(what=what if len(what) <= 60 else what[:57] + "...")


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal."""

    value: str
    """The text the program receives (a leading `~` is left as typed: bash turns it into a path)."""
    literal: bool
    """False when bash would still expand it ($NAME, glob, brace): its real value is unknown."""
    params: bool = False
    """Bash would substitute a parameter in it (`$NAME`, `~+`): it could become any text at all."""
    end: int = -1
    """Where the word ends in the command's source text (-1: unknown)."""
    braced: bool = False
    """Bash would split it by brace expansion (`a{,b}`, `{1..9}`)."""
    bracket: bool = False
    """It holds a bash bracket expression (`[^a]`, `[[:alpha:]]`), which Python's glob reads differently."""


@dataclass(frozen=True)
class Args:
    """A command line split by its rule's flag table: what a `Rule.check` inspects."""

    name: str
    flags: tuple[tuple[str, str | None], ...]
    operands: tuple[Word, ...]
    before_dashdash: int = -1
    """How many operands came before `--` (-1: there was no `--`): after it they are paths, not revisions."""

    def has(self, *names: str) -> bool:
        return any(flag in names for flag, _ in self.flags)

    def values(self, *names: str) -> list[str]:
        return [value or "" for flag, value in self.flags if flag in names]


@dataclass(frozen=True)
class Rule:
    """How one command (or one subcommand) may appear in a glance."""

    flags: str | None = ""
    """The allowed flags, space-separated (see the module docstring). None: argument-blind, any
    arguments are harmless (still subject to the device, expansion and `check` rules)."""
    max_operands: int | None = None
    """At most this many operands (non-flag words); None: any number."""
    numeric: bool = False
    """Accept `-<digits>` (`head -5`, `git log -10`)."""
    plus: str = ""
    """Flags spelled with `+` (lsof `+D dir`), same syntax as `flags`."""
    order: Order = "gnu"
    """How the command reads options after an operand (module docstring)."""
    getopt: bool = True
    """Short-flag values may be attached (`-n5`); False for parsers that always take the next word."""
    optional_next: bool = False
    """An optional value may also be the next word when it does not start with `-` (lsof `-i :80`)."""
    subcommands: Mapping[str, Rule] | None = None
    """When set, the first operand must name one of these, judged by its own rule."""
    bare: bool = True
    """With `subcommands`: whether the command may appear without one (`git stash` alone pushes)."""
    fallback: str | None = None
    """With `subcommands`: a first operand that is none of `verbs` is read as this subcommand's
    operand (`git reflog HEAD` is `git reflog show HEAD`)."""
    verbs: frozenset[str] = frozenset()
    """With `fallback`: the words the command takes for subcommands."""
    check: Callable[[Args], None] | None = None
    """A last look at each parsed reading; raises `Refusal` (sed scripts, awk programs, git branch ...)."""
    words: Callable[[str, list[Word]], None] | None = None
    """Replaces flag parsing entirely, for commands with their own syntax (find)."""
    reads: bool = False
    """Operands name files whose content is read: a `$NAME` there could name a device, so it is refused."""
    globs: bool = False
    """A glob before `--` that starts with a wildcard (`*.py`) is an operand and `--include=*.py` the option
    with its value, as they are unless a file's name begins with `-`: the wall's look at the disk refuses
    a glob matching such a name (a file `--pager=x.py` is an option in disguise)."""
    extra: Mapping[str, object] = field(default_factory=dict)
    """Free-form facts other modules attach (the git hardening flags of a subcommand)."""


def literal(word: Word, where: str) -> str:
    """The word's value, or a refusal when bash would still expand it."""
    if not word.literal:
        raise Refusal("expansion", f"{where} {word.value}")
    return word.value


@dataclass(frozen=True)
class _Spec:
    noarg: frozenset[str]
    required: frozenset[str]
    optional: frozenset[str]
    pairs: frozenset[str]


@functools.lru_cache(maxsize=None)
def _spec(text: str) -> _Spec:
    noarg, required, optional, pairs = set(), set(), set(), set()
    for token in text.split():
        if token.endswith("=="):
            pairs.add(token[:-2])
        elif token.endswith("=?"):
            optional.add(token[:-2])
        elif token.endswith("="):
            required.add(token[:-1])
        else:
            noarg.add(token)
    return _Spec(frozenset(noarg), frozenset(required), frozenset(optional), frozenset(pairs))


_Flags = list[tuple[str, "str | None"]]
_MAYBE_FLAG = set("*?[{-+~$\\'\"")


def interpretations(rule: Rule) -> tuple[bool, ...]:
    """The readings to check: True stops options at the first operand, False permutes."""
    return {"gnu": (False, True), "stop": (True,), "permute": (False,)}[rule.order]


def parse(rule: Rule, name: str, words: list[Word], *, stop: bool, subcommand: bool = False) -> tuple[Args, list[Word]]:
    """Split `words` by the rule's flag table. With `stop`, options end at the first operand. With
    `subcommand`, return at the first operand (the subcommand) and hand back it and the rest."""
    spec, plus = _spec(rule.flags or ""), _spec(rule.plus)
    flags: _Flags = []
    operands: list[Word] = []
    dashdash, i, before = False, 0, -1
    while i < len(words):
        word = words[i]
        i += 1
        if dashdash or (stop and operands):
            # Past `--`, or past the first operand of a command that stops there, a word is an operand
            # whatever it looks like; only a bounded operand count, or a check reading it, still cares.
            if not word.literal and rule.max_operands is not None:
                raise Refusal("expansion", f"{name} {word.value}")
            operands.append(word)
            continue
        if not word.literal and not word.params and word.value[:1] not in _MAYBE_FLAG:
            # `src/*.py`: a glob whose first character is plain text expands to operands only.
            if rule.max_operands is not None:
                raise Refusal("expansion", f"{name} {word.value}")
            if subcommand:
                raise Refusal("expansion", f"{name} {word.value}")
            operands.append(word)
            continue
        if rule.globs and not word.literal and not word.params and not word.braced:
            if word.value[:1] and word.value[0] in "*?[":
                operands.append(word)
                continue
            flag, eq, _ = word.value.partition("=")
            if eq and flag.startswith("--") and not any(c in flag for c in "*?[\\"):
                word = Word(word.value, True, end=word.end)
        value = literal(word, name)
        if value == "--":
            if subcommand:  # `git -- x`: whether x is then a subcommand is not worth knowing
                raise Refusal("flag", f"{name} --")
            dashdash, before = True, len(operands)
        elif value.startswith("--"):
            i = _long(rule, spec, name, value, words, i, flags)
        elif value.startswith("-") and len(value) > 1:
            if rule.numeric and value[1:].isdigit():
                flags.append(("-#", value[1:]))
            else:
                i = _short(rule, spec, "-", name, value, words, i, flags)
        elif rule.plus and value.startswith("+") and len(value) > 1:
            i = _short(rule, plus, "+", name, value, words, i, flags)
        elif subcommand:
            return Args(name, tuple(flags), ()), words[i - 1 :]
        else:
            operands.append(word)
    return Args(name, tuple(flags), tuple(operands), before), []


def _next_value(name: str, flag: str, words: list[Word], i: int) -> str:
    if i >= len(words):
        raise Refusal("flag", f"{name} {flag}")
    return literal(words[i], f"{name} {flag}")


def _optional_next(rule: Rule, words: list[Word], i: int) -> bool:
    return rule.optional_next and i < len(words) and not words[i].value.startswith(("-", "+"))


def _long(rule: Rule, spec: _Spec, name: str, text: str, words: list[Word], i: int, flags: _Flags) -> int:
    flag, eq, value = text.partition("=")
    if flag in spec.noarg and not eq:
        flags.append((flag, None))
    elif flag in spec.required:
        if not eq:
            value = _next_value(name, flag, words, i)
            i += 1
        flags.append((flag, value))
    elif flag in spec.optional:
        if not eq and _optional_next(rule, words, i):
            value, i = _next_value(name, flag, words, i), i + 1
            eq = "="
        flags.append((flag, value if eq else None))
    elif flag in spec.pairs and not eq:
        first = _next_value(name, flag, words, i)
        flags.append((flag, first + "\0" + _next_value(name, flag, words, i + 1)))
        i += 2
    else:
        raise Refusal("flag", f"{name} {flag}")
    return i


def _short(
    rule: Rule, spec: _Spec, sign: str, name: str, text: str, words: list[Word], i: int, flags: _Flags
) -> int:
    j = 1
    while j < len(text):
        flag, rest = sign + text[j], text[j + 1 :]
        if flag in spec.noarg:
            flags.append((flag, None))
            j += 1
            continue
        if flag not in spec.required and flag not in spec.optional:
            raise Refusal("flag", f"{name} {flag}")
        if rest and not rule.getopt:
            # tree-style parsers take the value from the next word and read on in this one.
            raise Refusal("flag", f"{name} {text}")
        if rest:
            flags.append((flag, rest))
        elif flag in spec.optional:
            if _optional_next(rule, words, i):
                flags.append((flag, _next_value(name, flag, words, i)))
                i += 1
            else:
                flags.append((flag, None))
        else:
            flags.append((flag, _next_value(name, flag, words, i)))
            i += 1
        break
    return i


def each_reading(rule: Rule, name: str, words: list[Word]) -> Iterator[Args]:
    """Every reading of a non-subcommand line the rule's `order` allows."""
    for stop in interpretations(rule):
        yield parse(rule, name, words, stop=stop)[0]
