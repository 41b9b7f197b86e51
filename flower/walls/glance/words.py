"""Shell words as bash sees them: quote removal recomputed from the source text (S-9, B-2).

bashlex's own quote removal is wrong for mixed quotes (`"a"'b'` keeps the single quotes) and it
misreads `$'...'`, so `flower.walls.glance.judge` takes each word's value from the source text here. A word
records whether bash would still expand it (`literal`), whether a parameter is substituted in it
(`params`: it could become any text) and where it ends (for the git pins).

Invariants: forms bashlex may misread (`$'...'`, `$"..."`, a bare `|` inside a word) are refused, never
guessed; `$(...)`, backticks and `${X:-...}`-style expansions are refused everywhere.
"""

from __future__ import annotations

import re

from flower.walls.glance.options import Refusal, Word

__all__ = ["GAP", "KINDS", "word"]

# --- words -------------------------------------------------------------------------------------

_SIMPLE_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]")
GAP = re.compile(r"(?:[ \t\n]|\\\n|#[^\n]*)*")  # bash blanks only: \r is a word character
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
                raise Refusal("parse")
            if raw[i + 1] != "\n":
                out.append(raw[i + 1])
                bare.append(False)
            i += 2
        elif c == "'":
            j = raw.find("'", i + 1)
            if j < 0:
                raise Refusal("parse")
            out.extend(raw[i + 1 : j])
            bare.extend([False] * (j - i - 1))
            i = j + 1
        elif c == '"':
            i, dq_expands = _scan_double(raw, i + 1, out, bare)
            expands = expands or dq_expands
        elif c == "$":
            if raw[i + 1 : i + 2] in ("'", '"', "("):
                raise Refusal("construct", _DOLLAR_FORMS[raw[i + 1]])
            expands = True
            out.append(c)
            bare.append(True)
            i += 1
        elif c in _UNEXPECTED_BARE:
            # bash would have ended the word here: bashlex and bash disagree, trust neither.
            raise Refusal("construct", "command substitution" if c == "`" else "parse")
        else:
            out.append(c)
            bare.append(True)
            i += 1
    # A lone `[` is no glob (bash needs a closing `]`), which keeps `[ -f x ]` a plain command.
    globbed = any(
        b and (ch in "*?" or ch == "[" and "]" in out[k:]) for k, (ch, b) in enumerate(zip(out, bare))
    )
    # `~+` and `~-` are $PWD and $OLDPWD: parameters in disguise.
    expands = expands or (len(out) > 1 and out[0] == "~" and bare[0] and out[1] in "+-")
    braced = _braces(out, bare)
    bracket = any(b and ch == "[" and "]" in out[k + 1 :] for k, (ch, b) in enumerate(zip(out, bare)))
    return Word("".join(out), not (expands or globbed or braced), params=expands, braced=braced, bracket=bracket)


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
            raise Refusal("construct", "command substitution")
        expands = expands or c == "$"
        out.append(c)
        bare.append(False)
        i += 1
    raise Refusal("parse")


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


def word(node: object, src: str) -> Word:
    for part in getattr(node, "parts", None) or ():
        kind = part.kind
        if kind == "parameter":
            if not _SIMPLE_PARAM.fullmatch(getattr(part, "value", "") or ""):
                raise Refusal("expansion", src[part.pos[0] : part.pos[1]])
        elif kind != "tilde":
            raise Refusal("construct", KINDS.get(kind, kind))
    start, end = node.pos  # type: ignore[attr-defined]
    scanned = _scan(src[start:end])
    return Word(scanned.value, scanned.literal, scanned.params, end, scanned.braced, scanned.bracket)


KINDS = {
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
