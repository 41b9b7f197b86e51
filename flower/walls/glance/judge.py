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
- Allow-lists only. `COMMANDS` (tables in `flower.walls.glance.rules`) maps each allowed command to a
  `Rule` naming the flags (and git/docker subcommands) it may use. A flag missing from its table is
  refused, which also refuses GNU long option abbreviations (`sort --out=f` means `--output=f`) and
  options added by later versions. Every rule's words are read by the one shared option parser
  (`flower.walls.glance.options`), which stops at the first operand exactly where the command does.
- No word names a device, a process file descriptor or a gawk `/inet/` socket, in any position
  (`flower.walls.glance.paths`); with `cwd=` (the wall), no word names an existing FIFO, socket or
  device through a symlink either (`flower.walls.glance.disk`). That one check reads the filesystem,
  so only the wall uses it: a command it refuses never ran, so there is no result to expire.
- The judge never runs anything and keeps no state but an LRU cache of verdicts.
- Git glances run with a repository's programs pinned off: `harden_git` inserts `GIT_PINS` and each
  subcommand's `--no-ext-diff --no-textconv`/`--no-filters`; the wall hands the result to the CLI as
  the hook's `updatedInput`.

Why bashlex, not tree-sitter-bash (B-2). bashlex is a pure-Python port of GNU bash's own parser (its
yacc grammar and tokenizer), so words and operators split where bash splits them, and it raises on
what it does not implement (`$((..))`, `[[ ]]`, `time`, `coproc`): exactly the fail-closed behaviour we
need. tree-sitter-bash is an error-tolerant editor grammar: it always returns a tree and marks trouble
with ERROR/MISSING nodes we would have to hunt for, it is an independent re-implementation of bash
syntax, and it needs compiled wheels. bashlex is not perfect either: its quote removal is wrong for
mixed quotes (`"a"'b'` keeps the single quotes) and it misreads `$'...'`. So word values are recomputed
from the source text by `_scan`, which refuses what bashlex may have misread, and `_check_gaps`
refuses any source text that no node accounts for.

Decisions (each one is pinned by the corpus in tests/support/glance_corpus.py).
- `$NAME`, globs and brace expansion are allowed only in arguments of *argument-blind* commands
  (`Rule(flags=None)`: cat, ls, grep, echo, ...), which have no flag or operand that writes, runs or
  never ends, so any value is harmless. Elsewhere the program's real argv cannot be known (`uniq *`
  may receive an output file, `tail *.log` a file named `-f`), so such words are refused, except after
  `--` for commands with unlimited operands. `$NAME` is refused wherever a file is read (`cat $_` may
  name `/dev/zero`). `$(...)`, backticks, `<(...)`, `$'...'`, `$"..."` and
  `${X:-...}`-style forms are refused everywhere.
- `< FILE` is allowed (reading is what a glance does) except devices (`/dev/tcp`, `/dev/udp`, where
  bash opens a socket, `/dev/zero` ...). Output may only go to `/dev/null` or be duplicated between stdout and stderr.
- `--output`, `--force*` and `--hard` are refused in any word of any command (so `kubectl get
  --output=json` is refused while `kubectl get -o json` runs).
- `printf` runs, except `printf -v` (assigns a variable); `test -v`/`[ -v` are refused (bash evaluates
  the array subscript, running any `$(...)` in it). `env` runs alone only: with an operand it
  runs a command. `cd` is not a glance: the Bash tool keeps the working directory between calls.
- Never-ending forms are refused: `tail -f/-F/--follow` and the obsolete `tail -5f`/`tail +5f`,
  `free -s`, `lsof -r`, `ss -E`, `netstat -c`, `kubectl get -w`, `ping` without `-c`/`-w`; `top`,
  `watch`, `yes` are simply absent. `git shortlog` needs a revision (without one it reads stdin).
  sed/awk/jq programs may not loop (`flower.walls.glance.sed`, `awk`, `jq`); `tac` needs files (of a pipe it
  spills to a temp file), `sort -S/-T` are absent, ping waits at most 10 s per reply.
- Commands longer than `MAX_COMMAND_CHARS` are refused unread: a glance is short.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import bashlex

from flower import texts
from flower.walls.glance.disk import Found as _Found
from flower.walls.glance.disk import on_disk
from flower.walls.glance.git import GIT_PINS, check_git_words
from flower.walls.glance.options import Args, Rule, Word, each_reading, parse
from flower.walls.glance.options import Refusal as _Refuse
from flower.walls.glance.options import literal as _literal
from flower.walls.glance.options import reason as _reason
from flower.walls.glance.paths import device_word, inet_word, root_word
from flower.walls.glance.rules import COMMANDS, NUMERIC_HOSTS, check_widths, option_values, reads_stdin
from flower.walls.glance.words import GAP as _GAP
from flower.walls.glance.words import KINDS as _KINDS
from flower.walls.glance.words import word as _word

__all__ = [
    "COMMANDS",
    "MAX_COMMAND_CHARS",
    "Rule",
    "describe_refusal",
    "expires_on_resume",
    "harden_git",
    "is_ephemeral",
    "may_run_on_main",
    "parse_shell",
    "programs",
]

MAX_COMMAND_CHARS = 2000
"""Longer commands are refused without parsing (a glance is short; parsing cost grows with length)."""


# --- command lines -----------------------------------------------------------------------------

_BANNED_LONG = ("--output", "--force")
_COLUMNS = frozenset({("df", "--output")})
"""Where `--output` names the columns to print, not a file to write (`df --output=source,avail`)."""


def _harden(rule: Rule, anchor: int, harden: list[tuple[int, str]]) -> None:
    flags = rule.extra.get("harden")
    if isinstance(flags, str) and rule.subcommands is None:
        harden.append((anchor, flags))


def _apply(rule: Rule, name: str, words: list[Word], anchor: int, harden: list[tuple[int, str]]) -> list[Args]:
    """Judge one command line (or subcommand line) by its rule; return the readings it was judged by."""
    if rule.words is not None:
        rule.words(name, words)
        return []
    if rule.flags is None:
        args = Args(name, (), tuple(words))
        if rule.check is not None:
            rule.check(args)
        return [args]
    if rule.fallback is not None and rule.subcommands is not None:
        if not (words and words[0].literal and words[0].value in rule.verbs):
            # `git reflog`, `git reflog HEAD`: no verb, so the whole line is the fallback's.
            chosen = rule.subcommands[rule.fallback]
            _harden(chosen, anchor, harden)
            return _apply(chosen, f"{name} {rule.fallback}", words, anchor, harden)
    if rule.subcommands is not None:
        args, rest = parse(rule, name, words, stop=True, subcommand=True)
        if rule.check is not None:
            rule.check(args)
        if not rest:
            if not rule.bare:
                raise _Refuse("subcommand", name)
            return [args]
        sub = _literal(rest[0], name)
        if sub not in rule.subcommands:
            raise _Refuse("subcommand", f"{name} {sub}")
        chosen = rule.subcommands[sub]
        _harden(chosen, rest[0].end, harden)
        return [args, *_apply(chosen, f"{name} {sub}", rest[1:], rest[0].end, harden)]
    readings = list(each_reading(rule, name, words))
    for args in readings:
        if rule.max_operands is not None and len(args.operands) > rule.max_operands:
            raise _Refuse("operands", name)
        if rule.check is not None:
            rule.check(args)
    return readings


def _judge_command(node: object, src: str, found: _Found, piped: bool = False) -> None:
    words: list[Word] = []
    fed = piped  # stdin is a pipe from the previous command or a `< FILE`
    for part in node.parts:  # type: ignore[attr-defined]
        if part.kind == "word":
            words.append(_word(part, src))
        elif part.kind == "redirect":
            _check_redirect(part, src, found)
            fed = fed or part.type == "<"
        else:
            raise _Refuse("construct", _KINDS.get(part.kind, part.kind))
    if not words:
        raise _Refuse("empty")
    head = words[0]
    if not head.literal or head.value not in COMMANDS:
        raise _Refuse("command", head.value)
    rule = COMMANDS[head.value]
    found.programs.append(head.value)
    if head.value in NUMERIC_HOSTS:
        found.inserts.append((head.end, NUMERIC_HOSTS[head.value]))
    blind = rule.flags is None and rule.words is None and not rule.reads
    first_path = len(found.paths)
    for word in words[1:]:
        flag = word.value.partition("=")[0]
        if word.literal and (flag.startswith(_BANNED_LONG) or flag == "--hard") and (head.value, flag) not in _COLUMNS:
            raise _Refuse("word", flag)
        if inet_word(word.value):
            raise _Refuse("network", f"{head.value} {word.value}")
        if device_word(word.value, word.literal) or (rule.reads and root_word(word.value)):
            raise _Refuse("device", f"{head.value} {word.value}")
        if word.params and (not blind or word.braced or head.value not in _NO_PATHS):
            # `cat $_`, `du -X${_}v/zero`: a parameter can hold any path, `/dev/zero` included, and the
            # wall's look at the disk must see the final word. `echo $X{1..99999999}`: bash builds it all.
            raise _Refuse("expansion", f"{head.value} {word.value}")
        if word.value[:1] == "~" and word.value[1:2] not in ("", "/", "+", "-"):
            # `ls ~evil.example`: bash asks the user database (NSS: LDAP, SSSD) about a chosen name.
            raise _Refuse("network", f"{head.value} {word.value}")
        if word.bracket:
            # `cat [^a]`: bash's bracket expressions (negation, classes) are not Python's: unknowable.
            raise _Refuse("expansion", f"{head.value} {word.value}")
        if not word.params:
            found.paths.append((word, rule.reads, ""))
    harden: list[tuple[int, str]] = []
    readings = _apply(rule, head.value, words[1:], head.end, harden)
    check_widths(head.value, words[1:])
    for flag, value in option_values(head.value, words[1:], readings):
        # `du -X huge`, `file -m huge`: a separate option value is a file the command may read in full.
        found.paths.append((Word(f"{flag}={value}", True), False, ""))
    if not fed:
        # The Bash tool's stdin is not guaranteed closed: a reader with no file may wait forever.
        reads_stdin(head.value, words[1:], readings)
    if head.value == "git":
        check_git_words("git", [w.value for w in words[1:]])
        dirs = [value for args in readings[:1] for value in args.values("-C")]
        found.gits.append((head.end, harden, dirs))
        if dirs:  # `git -C a hash-object zz` opens a/zz: look where git looks
            base = os.path.join(*dirs)
            found.paths[first_path:] = [(w, r, base) for w, r, _ in found.paths[first_path:]]


_NO_PATHS = frozenset("echo printf true false printenv test [".split())
"""Commands none of whose words names a file they open: only these may take a `$NAME` word."""

_NULL_SINKS = (">", ">>", "&>", "&>>", ">&")


def _check_redirect(node: object, src: str, found: _Found) -> None:
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
        if word.literal and fd in (None, 0):
            if device_word(word.value):
                raise _Refuse("network" if inet_word(word.value) else "device", f"< {word.value}")
            found.paths.append((word, True, ""))
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


def _judge_node(node: object, src: str, found: _Found, piped: bool = False) -> None:
    kind = node.kind  # type: ignore[attr-defined]
    if kind == "list":
        _check_gaps(src, node.pos[0], node.pos[1], node.parts)  # type: ignore[attr-defined]
        for part in node.parts:  # type: ignore[attr-defined]
            if part.kind == "operator":
                if part.op not in (";", "&&", "||"):
                    raise _Refuse("construct", "background `&`" if part.op == "&" else part.op)
            else:
                _judge_node(part, src, found)
    elif kind == "pipeline":
        _check_gaps(src, node.pos[0], node.pos[1], node.parts)  # type: ignore[attr-defined]
        seen_pipe = False
        for part in node.parts:  # type: ignore[attr-defined]
            if part.kind == "pipe":
                if part.pipe not in ("|", "|&"):
                    raise _Refuse("parse")
                seen_pipe = True
            elif not (part.kind == "reservedword" and part.word == "!"):
                _judge_node(part, src, found, piped=seen_pipe)
    elif kind == "command":
        _judge_command(node, src, found, piped)
        _check_gaps(src, node.pos[0], node.pos[1], node.parts)  # type: ignore[attr-defined]
    else:
        raise _Refuse("construct", _KINDS.get(kind, kind))


def _mask_single_quotes(src: str) -> str:
    """`src` with the text inside each single-quoted string replaced by `x`s of the same length, for
    bashlex only: bash takes nothing inside single quotes for syntax, but bashlex misreads some of it
    (`--format='%<(20)%an'` as a process substitution; in double quotes too). Word values are still read from `src`, so the
    offsets must not move; an unterminated quote is left alone (bashlex then refuses it)."""
    out = list(src)
    i, n, double = 0, len(src), False
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if double:
            double = c != '"'
            if c in "<>" and src[i + 1 : i + 2] == "(":
                out[i] = "x"  # inside double quotes `<(` is text, not a process substitution
        elif c == '"':
            double = True
        elif c == "#" and (i == 0 or src[i - 1] in " \t\n;|&()"):
            end = src.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == "'" and src[i - 1 : i] != "$":
            end = src.find("'", i + 1)
            if end < 0:
                break
            out[i + 1 : end] = "x" * (end - i - 1)
            i = end
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def _analyse(command: str) -> tuple[str | None, _Found]:
    """(None, what was found) for a glance, else (the reason it is not one, nothing)."""
    found = _Found([], [])
    try:
        if len(command) > MAX_COMMAND_CHARS:
            raise _Refuse("long")
        if not command.strip():
            raise _Refuse("empty")
        try:
            trees = bashlex.parse(_mask_single_quotes(command))
        except Exception:
            raise _Refuse("parse") from None
        if not trees:
            raise _Refuse("empty")
        for tree in trees:
            _judge_node(tree, command, found)
        _check_gaps(command, 0, len(command), trees)
        return None, found
    except _Refuse as refusal:
        return _reason(refusal), _Found([], [])
    except Exception:
        return texts.GLANCE_WHY["parse"], _Found([], [])


def parse_shell(command: str) -> list[Any]:
    """bashlex's trees of `command`, read as the judge reads it (single-quoted text masked; take word values
    from `command` itself with `flower.walls.glance.words.word`); raises on what bashlex cannot parse. The
    approval rules (L-15) read commands with it too: one shell parser in flower."""
    return list(bashlex.parse(_mask_single_quotes(command)))


def _verdict(command: str, cwd: str | None) -> str | None:
    reason, found = _analyse(command)
    if reason is None and cwd is not None:
        try:
            return on_disk(found, cwd)
        except Exception:
            return texts.GLANCE_WHY["parse"]
    return reason


def is_ephemeral(command: str, cwd: str | None = None) -> bool:
    """Whether `command` is a glance: the coordinator may run it, and its result expires (S-8).

    With `cwd` (the wall passes the Bash call's working directory) the words are also checked on disk.
    """
    try:
        return isinstance(command, str) and _verdict(command, cwd) is None
    except Exception:
        return False


def describe_refusal(command: str, cwd: str | None = None) -> str | None:
    """Why `command` is not a glance, in a short phrase for a denial message; None if it is one."""
    if not isinstance(command, str):
        return texts.GLANCE_WHY["empty"]
    try:
        return _verdict(command, cwd)
    except Exception:
        return texts.GLANCE_WHY["parse"]


def programs(command: str) -> list[str]:
    """The program of each simple command of `command` (a glance), in order; [] for a refused one."""
    reason, found = _analyse(command)
    return [] if reason is not None else list(found.programs)


def harden_git(command: str, pins: Callable[[str], str] = lambda directory: "") -> str:
    """`command` (a glance) with every git command's repository programs pinned off: `GIT_PINS` and
    `pins(directory)` (the filter drivers of the repository git will open) after `git`, and the
    subcommand's `--no-ext-diff --no-textconv` / `--no-filters` after the subcommand; and `-n` after
    lsof and netstat (`NUMERIC_HOSTS`), which would otherwise look up every address's host name."""
    reason, found = _analyse(command)
    if reason is not None or not (found.gits or found.inserts):
        return command
    edits: list[tuple[int, str]] = [(position, " " + flag) for position, flag in found.inserts]
    for head_end, harden, dirs in found.gits:
        extra = pins(os.path.join(".", *dirs))
        edits.append((head_end, " " + GIT_PINS + (" " + extra if extra else "")))
        edits.extend((position, " " + flags) for position, flags in harden)
    for position, text in sorted(edits, reverse=True):
        command = command[:position] + text + command[position:]
    return command


may_run_on_main = is_ephemeral
"""S-8: the wall's question is the glance predicate itself, not a copy of it."""
expires_on_resume = is_ephemeral
"""S-8: the rewrite's question is the glance predicate itself, not a copy of it."""
