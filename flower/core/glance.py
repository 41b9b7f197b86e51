"""Glance: which Bash commands are quick read-only looks at the present state (S-8, S-9, B-2).

Concept. A *glance* is a Bash command whose only effect is to print facts that go stale (`git status`,
`ls`, `grep`, `ps` ...). Two layers ask the same question and must never disagree: the wall lets the
coordinator run a glance itself instead of dispatching a subagent, and the resume rewrite expires an
old glance result because what it showed may have changed. Both use `is_ephemeral`;
`may_run_on_main` and `expires_on_resume` are the very same function object, never a copy.

Invariants.
- Fail closed. A command is a glance only if every part of it is positively recognised: parse errors,
  node kinds we do not handle, expansions we cannot prove harmless, unknown commands and unknown flags
  all refuse. `is_ephemeral` never raises; an exception inside the judge means "not a glance".
- Every simple command of every list, pipeline and newline-separated line is judged. One bad
  segment refuses the whole command.
- Allow-lists only. `COMMANDS` (tables in `flower.core.glance_rules`) maps each allowed command to a
  `Rule` naming the flags (and git/docker subcommands) it may use. A flag missing from its table is refused, which also refuses GNU long
  option abbreviations (`sort --out=f` means `--output=f`) and options added by later versions.
- The judge never runs anything and keeps no state but an LRU cache of verdicts.

Why bashlex, not tree-sitter-bash (B-2). bashlex is a pure-Python port of GNU bash's own parser (its
yacc grammar and tokenizer), so words and operators split where bash splits them, and it raises on
what it does not implement (`$((..))`, `[[ ]]`, `time`, `coproc`): exactly the fail-closed behaviour we
need. tree-sitter-bash is an error-tolerant editor grammar: it always returns a tree and marks trouble
with ERROR/MISSING nodes we would have to hunt for, it is an independent re-implementation of bash
syntax, and it needs compiled wheels. bashlex is not perfect either: its quote removal is wrong for
mixed quotes (`"a"'b'` keeps the single quotes) and it misreads `$'...'`. So word values are recomputed
from the source text by `_scan`, which refuses what bashlex may have misread, and `_check_gaps`
refuses any source text that no node accounts for.

Decisions (each one is pinned by the corpus in tests/unit/glance_corpus.py).
- `$NAME`, globs and brace expansion are allowed only in arguments of *argument-blind* commands
  (`Rule(flags=None)`: cat, ls, grep, echo, ...), which have no flag or operand that writes, runs or
  never ends, so any value is harmless. Elsewhere the program's real argv cannot be known (`uniq *`
  may receive an output file, `tail *.log` a file named `-f`), so such words are refused, except after
  `--` for commands with unlimited operands. `$(...)`, backticks, `<(...)`, `$'...'`, `$"..."` and
  `${X:-...}`-style forms are refused everywhere.
- `< FILE` is allowed (reading is what a glance does) except `/dev/tcp` and `/dev/udp`, where bash
  opens a socket. Output may only go to `/dev/null` or be duplicated between stdout and stderr.
- `--output`, `--force*` and `--hard` are refused in any word of any command (so `kubectl get
  --output=json` is refused while `kubectl get -o json` runs).
- `printf` runs, except `printf -v` (assigns a variable). `env` runs alone only: with an operand it
  runs a command. `cd` is not a glance: the Bash tool keeps the working directory between calls.
- Never-ending forms are refused: `tail -f/-F/--follow` and the obsolete `tail -5f`/`tail +5f`,
  `free -s`, `lsof -r`, `ss -E`, `netstat -c`, `kubectl get -w`, `ping` without `-c`/`-w`; `top`,
  `watch`, `yes` are simply absent. `git shortlog` needs a revision (without one it reads stdin).
- Commands longer than `MAX_COMMAND_CHARS` are refused unread: a glance is short.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import bashlex

from flower.core import texts
from flower.core.glance_rules import COMMANDS, Args, Refusal as _Refuse, Rule, Word, literal as _literal

__all__ = [
    "COMMANDS",
    "MAX_COMMAND_CHARS",
    "Rule",
    "describe_refusal",
    "expires_on_resume",
    "is_ephemeral",
    "may_run_on_main",
]

MAX_COMMAND_CHARS = 2000
"""Longer commands are refused without parsing (a glance is short; parsing cost grows with length)."""


@dataclass(frozen=True)
class _Spec:
    noarg: frozenset[str] = field(default_factory=frozenset)
    required: frozenset[str] = field(default_factory=frozenset)
    optional: frozenset[str] = field(default_factory=frozenset)


@functools.lru_cache(maxsize=None)
def _spec(text: str) -> _Spec:
    noarg, required, optional = set(), set(), set()
    for token in text.split():
        if token.endswith("=?"):
            optional.add(token[:-2])
        elif token.endswith("="):
            required.add(token[:-1])
        else:
            noarg.add(token)
    return _Spec(frozenset(noarg), frozenset(required), frozenset(optional))


# --- words -------------------------------------------------------------------------------------

_SIMPLE_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]")
_GAP = re.compile(r"(?:[ \t\n]|\\\n|#[^\n]*)*")  # bash blanks only: \r is a word character
_UNEXPECTED_BARE = set("|&;<>()`") | {" ", "\t", "\n"}


def _scan(raw: str) -> Word:
    """Remove quotes from one word's source text the way bash does; refuse forms bashlex may misread."""
    out: list[str] = []
    bare: list[bool] = []
    expands = False
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 >= n:
                raise _Refuse("parse")
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
                bare.append(False)
            i += 2
        elif c == "'":
            j = raw.find("'", i + 1)
            if j < 0:
                raise _Refuse("parse")
            out.extend(raw[i + 1 : j])
            bare.extend([False] * (j - i - 1))
            i = j + 1
        elif c == '"':
            i, dq_expands = _scan_double(raw, i + 1, out, bare)
            expands = expands or dq_expands
        elif c == "$":
            if raw[i + 1 : i + 2] in ("'", '"', "("):
                raise _Refuse("construct", _DOLLAR_FORMS[raw[i + 1]])
            expands = True
            out.append(c)
            bare.append(True)
            i += 1
        elif c in _UNEXPECTED_BARE:
            # bash would have ended the word here: bashlex and bash disagree, trust neither.
            raise _Refuse("construct", "command substitution" if c == "`" else "parse")
        else:
            out.append(c)
            bare.append(True)
            i += 1
    # A lone `[` is no glob (bash needs a closing `]`), which keeps `[ -f x ]` a plain command.
    globbed = any(
        b and (ch in "*?" or ch == "[" and "]" in out[k:]) for k, (ch, b) in enumerate(zip(out, bare))
    )
    return Word("".join(out), not (expands or globbed or _braces(out, bare)))


_DOLLAR_FORMS = {"'": "`$'...'` quoting", '"': '`$"..."` quoting', "(": "command substitution"}


def _scan_double(raw: str, i: int, out: list[str], bare: list[bool]) -> tuple[int, bool]:
    expands = False
    while i < len(raw):
        c = raw[i]
        if c == '"':
            return i + 1, expands
        if c == "\\" and raw[i + 1 : i + 2] in ("$", "`", '"', "\\", "\n"):
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
                bare.append(False)
            i += 2
            continue
        if c == "`" or (c == "$" and raw[i + 1 : i + 2] in ("(", "'", '"')):
            raise _Refuse("construct", "command substitution")
        expands = expands or c == "$"
        out.append(c)
        bare.append(False)
        i += 1
    raise _Refuse("parse")


def _braces(out: list[str], bare: list[bool]) -> bool:
    """Whether an unquoted `{...}` holding `,` or `..` makes bash split the word (`uniq a{,b}`)."""
    stack: list[int] = []
    for k, (ch, b) in enumerate(zip(out, bare)):
        if b and ch == "{":
            stack.append(k)
        elif b and ch == "}" and stack:
            inner = "".join(out[stack.pop() + 1 : k])
            if "," in inner or ".." in inner:
                return True
    return False


def _word(node: object, src: str) -> Word:
    for part in getattr(node, "parts", None) or ():
        kind = part.kind
        if kind == "parameter":
            if not _SIMPLE_PARAM.fullmatch(getattr(part, "value", "") or ""):
                raise _Refuse("expansion", src[part.pos[0] : part.pos[1]])
        elif kind != "tilde":
            raise _Refuse("construct", _KINDS.get(kind, kind))
    start, end = node.pos  # type: ignore[attr-defined]
    return _scan(src[start:end])


_KINDS = {
    "commandsubstitution": "command substitution",
    "processsubstitution": "process substitution",
    "compound": "a subshell, group or compound command",
    "function": "a function definition",
    "for": "a loop",
    "while": "a loop",
    "until": "a loop",
    "if": "an if statement",
    "case": "a case statement",
    "assignment": "a variable assignment",
    "heredoc": "a here-document",
}


# --- flags -------------------------------------------------------------------------------------

_Flags = list[tuple[str, "str | None"]]


def _parse(rule: Rule, name: str, words: list[Word], *, stop: bool = False) -> tuple[Args, list[Word]]:
    """Split `words` by the rule's flag table the way getopt would; with `stop`, return at the first
    operand (the subcommand) and hand back the rest."""
    spec, plus = _spec(rule.flags or ""), _spec(rule.plus)
    flags: _Flags = []
    operands: list[Word] = []
    dashdash, i = False, 0
    while i < len(words):
        word = words[i]
        i += 1
        if dashdash or (rule.posix and operands):
            # Past `--` (or past awk's program) a word is an operand whatever bash makes of it; only a
            # bounded operand count, or a check reading it (which insists on literals), still cares.
            if not word.literal and rule.max_operands is not None:
                raise _Refuse("expansion", f"{name} {word.value}")
            operands.append(word)
            continue
        value = _literal(word, name)
        if value == "--":
            if stop:  # `git -- x`: whether x is then a subcommand is not worth knowing
                raise _Refuse("flag", f"{name} --")
            dashdash = True
        elif value.startswith("--"):
            i = _long(spec, name, value, words, i, flags)
        elif value.startswith("-") and len(value) > 1:
            if rule.numeric and value[1:].isdigit():
                flags.append(("-#", value[1:]))
            else:
                i = _short(rule, spec, "-", name, value, words, i, flags)
        elif rule.plus and value.startswith("+") and len(value) > 1:
            i = _short(rule, plus, "+", name, value, words, i, flags)
        elif stop:
            return Args(name, tuple(flags), ()), words[i - 1 :]
        else:
            operands.append(word)
    return Args(name, tuple(flags), tuple(operands)), []


def _next_value(name: str, flag: str, words: list[Word], i: int) -> str:
    if i >= len(words):
        raise _Refuse("flag", f"{name} {flag}")
    return _literal(words[i], f"{name} {flag}")


def _long(spec: _Spec, name: str, text: str, words: list[Word], i: int, flags: _Flags) -> int:
    flag, eq, value = text.partition("=")
    if flag in spec.noarg and not eq:
        flags.append((flag, None))
    elif flag in spec.required:
        if not eq:
            value = _next_value(name, flag, words, i)
            i += 1
        flags.append((flag, value))
    elif flag in spec.optional:
        flags.append((flag, value if eq else None))
    else:
        raise _Refuse("flag", f"{name} {flag}")
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
            raise _Refuse("flag", f"{name} {flag}")
        if rest and not rule.getopt:
            # tree-style parsers take the value from the next word and read on in this one.
            raise _Refuse("flag", f"{name} {text}")
        if rest or flag in spec.optional:
            flags.append((flag, rest or None))
        else:
            flags.append((flag, _next_value(name, flag, words, i)))
            i += 1
        break
    return i


# --- command lines -----------------------------------------------------------------------------

_BANNED_LONG = ("--output", "--force")


def _apply(rule: Rule, name: str, words: list[Word]) -> None:
    if rule.words is not None:
        rule.words(name, words)
        return
    if rule.flags is None:
        if rule.check is not None:
            rule.check(Args(name, (), tuple(words)))
        return
    args, rest = _parse(rule, name, words, stop=rule.subcommands is not None)
    if rule.subcommands is not None:
        if not rest:
            if not rule.bare:
                raise _Refuse("subcommand", name)
            return
        sub = _literal(rest[0], name)
        if sub not in rule.subcommands:
            raise _Refuse("subcommand", f"{name} {sub}")
        _apply(rule.subcommands[sub], f"{name} {sub}", rest[1:])
        return
    if rule.max_operands is not None and len(args.operands) > rule.max_operands:
        raise _Refuse("operands", name)
    if rule.check is not None:
        rule.check(args)


def _judge_command(node: object, src: str) -> None:
    words: list[Word] = []
    for part in node.parts:  # type: ignore[attr-defined]
        if part.kind == "word":
            words.append(_word(part, src))
        elif part.kind == "redirect":
            _check_redirect(part, src)
        else:
            raise _Refuse("construct", _KINDS.get(part.kind, part.kind))
    if not words:
        raise _Refuse("empty")
    head = words[0]
    if not head.literal or head.value not in COMMANDS:
        raise _Refuse("command", head.value)
    for word in words:
        flag = word.value.partition("=")[0]
        if word.literal and (flag.startswith(_BANNED_LONG) or flag == "--hard"):
            raise _Refuse("word", flag)
    _apply(COMMANDS[head.value], head.value, words[1:])


_NULL_SINKS = (">", ">>", "&>", "&>>", ">&")


def _check_redirect(node: object, src: str) -> None:
    kind, target = node.type, node.output  # type: ignore[attr-defined]
    fd = getattr(node, "input", None)
    if kind == "<<" or kind == "<<-" or getattr(node, "heredoc", None) is not None:
        raise _Refuse("construct", "a here-document")
    if kind == ">&" and isinstance(target, int):
        if target in (1, 2) and fd in (None, 1, 2):
            return  # 2>&1, 1>&2, >&2: duplicating stdout/stderr writes nothing new
    elif kind in _NULL_SINKS and hasattr(target, "kind"):
        word = _word(target, src)
        if word.literal and word.value == "/dev/null" and fd in (None, 1, 2):
            return
    elif kind == "<" and hasattr(target, "kind"):
        word = _word(target, src)
        if word.literal and fd in (None, 0) and not word.value.startswith(("/dev/tcp/", "/dev/udp/")):
            return
    start, end = node.pos  # type: ignore[attr-defined]
    raise _Refuse("redirect", src[start:end])


def _check_gaps(src: str, start: int, end: int, children: list) -> None:  # type: ignore[type-arg]
    """Refuse source text inside [start, end) that no child node accounts for (only blanks, line
    continuations and comments may sit between the nodes bashlex returns)."""
    cursor = start
    for child in sorted(children, key=lambda c: c.pos[0]):
        if not _GAP.fullmatch(src, cursor, child.pos[0]):
            raise _Refuse("parse")
        cursor = max(cursor, child.pos[1])
    if not _GAP.fullmatch(src, cursor, end):
        raise _Refuse("parse")


def _judge_node(node: object, src: str) -> None:
    kind = node.kind  # type: ignore[attr-defined]
    if kind == "list":
        _check_gaps(src, node.pos[0], node.pos[1], node.parts)  # type: ignore[attr-defined]
        for part in node.parts:  # type: ignore[attr-defined]
            if part.kind == "operator":
                if part.op not in (";", "&&", "||"):
                    raise _Refuse("construct", "background `&`" if part.op == "&" else part.op)
            else:
                _judge_node(part, src)
    elif kind == "pipeline":
        _check_gaps(src, node.pos[0], node.pos[1], node.parts)  # type: ignore[attr-defined]
        for part in node.parts:  # type: ignore[attr-defined]
            if part.kind == "pipe":
                if part.pipe not in ("|", "|&"):
                    raise _Refuse("parse")
            elif not (part.kind == "reservedword" and part.word == "!"):
                _judge_node(part, src)
    elif kind == "command":
        _judge_command(node, src)
        _check_gaps(src, node.pos[0], node.pos[1], node.parts)  # type: ignore[attr-defined]
    else:
        raise _Refuse("construct", _KINDS.get(kind, kind))


@functools.lru_cache(maxsize=4096)
def _verdict(command: str) -> str | None:
    """None for a glance, else the reason it is not one."""
    try:
        if len(command) > MAX_COMMAND_CHARS:
            raise _Refuse("long")
        if not command.strip():
            raise _Refuse("empty")
        try:
            trees = bashlex.parse(command)
        except Exception:
            raise _Refuse("parse") from None
        if not trees:
            raise _Refuse("empty")
        for tree in trees:
            _judge_node(tree, command)
        _check_gaps(command, 0, len(command), trees)
        return None
    except _Refuse as refusal:
        # One line, and short: it lands in the coordinator's context. A stray \r is the usual culprit
        # when `git status\r` is refused, so it stays visible.
        what = " ".join(refusal.what.replace("\r", "\\r").split())
        return texts.GLANCE_WHY[refusal.code].format(what=what if len(what) <= 60 else what[:57] + "...")
    except Exception:
        return texts.GLANCE_WHY["parse"]


def is_ephemeral(command: str) -> bool:
    """Whether `command` is a glance: the coordinator may run it, and its result expires (S-8)."""
    try:
        return isinstance(command, str) and _verdict(command) is None
    except Exception:
        return False


def describe_refusal(command: str) -> str | None:
    """Why `command` is not a glance, in a short phrase for a denial message; None if it is one."""
    if not isinstance(command, str):
        return texts.GLANCE_WHY["empty"]
    try:
        return _verdict(command)
    except Exception:
        return texts.GLANCE_WHY["parse"]


may_run_on_main = is_ephemeral
"""S-8: the wall's question is the glance predicate itself, not a copy of it."""
expires_on_resume = is_ephemeral
"""S-8: the rewrite's question is the glance predicate itself, not a copy of it."""

