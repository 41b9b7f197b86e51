"""The jq checker of a glance: a filter must visit its input once, with bounded output (S-9).

An allow-list of builtins that walk their input once; no `def` (recursion), `recurse(f)`, `range`,
`repeat`, `while`, `until`, `limit`, `reduce`/`foreach`, no `*` (string repetition), no assignment
(`.[1e9] = 1` allocates), no regex functions that loop on empty matches in jq 1.6, no number over six
digits, no `import`/`include`, at most one whole-tree walk. String interpolations are checked as
programs of their own.
"""

from __future__ import annotations

import re

from flower.walls.glance.options import Refusal

__all__ = ["check_jq", "jq_program_ok"]

_BIG_NUMBER = re.compile(r"[0-9]{7,}|[0-9.][eE][+-]?[0-9]")

# --- jq ------------------------------------------------------------------------------------------------

_JQ_ALLOWED = frozenset(
    """
    tonumber and or not if then elif else end as try catch label break empty error null true false
    length utf8bytelength keys keys_unsorted values has in map map_values path del to_entries from_entries
    with_entries select arrays objects iterables booleans numbers normals finites strings nulls scalars
    add any all flatten floor sqrt fabs abs round ceil min max min_by max_by unique unique_by group_by
    sort sort_by reverse contains inside startswith endswith ltrimstr rtrimstr trim ltrim rtrim explode
    implode split join ascii_downcase ascii_upcase ascii tostring tojson fromjson type infinite nan
    isinfinite isnan isnormal isvalid first last nth indices index rindex test paths leaf_paths getpath
    tostream fromstream truncate_stream env input_filename input_line_number now todate fromdate
    todateiso8601 fromdateiso8601 dateadd datesub date mktime gmtime localtime strftime strptime
    strflocaltime transpose input inputs debug stderr halt halt_error walk isempty
    tojson ascii getpath error not objects base64 base64d text json csv tsv html uri sh base32 base32d
    """.split()
)
_JQ_TOKEN = re.compile(
    r'\.[A-Za-z_][A-Za-z0-9_]*|\$?[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*|@[A-Za-z0-9_]+'
    r"|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|\.\.|\?//|[|=!<>+\-*/%]=|//=?|\S"
)


def jq_program_ok(program: str) -> bool:
    """Whether a jq filter visits its input once, with bounded output."""
    try:
        check_jq(program)
    except Refusal:
        return False
    return True


def check_jq(program: str) -> None:
    """Refuse a jq filter that may recurse, loop, allocate without bound or read other files."""
    if _jq_scan(program, 0, nested=False) != len(program):
        raise Refusal("script", "jq")
    if _jq_growth(program) > _JQ_MAX_GROWTH:
        # `(.+.)|(.+.)`, `(1,1)|(1,1)`, `[.[],.[]]`, `tojson|tojson`: each can double the output, chained
        # the output grows as 2 ** count.
        raise Refusal("loop", "jq")
    if len(re.findall(r"\bas\s*[\[{$]", program)) > 1 or re.search(r"\$\w+\s*(?:\[\s*\]|\|\s*\.\[\s*\])", program):
        # `.[] as $x | .[] as $y`, `. as $all | .[] | $all[]`: a product of the input with itself.
        raise Refusal("loop", "jq")
    walks = len(re.findall(r"\.\.|\b(?:paths|leaf_paths|walk|tostream)\b", program))
    if walks > 1:
        # Each `..` yields every node below each input: chained, the output grows as size ** count.
        raise Refusal("loop", "jq ..")
    if walks and _jq_growth(program):
        # `walk([.,.])` doubles every node bottom-up (2 ** depth); `[..|[.,.]]` doubles each of all nodes.
        raise Refusal("loop", "jq ..")


_JQ_MAX_GROWTH = 6
"""At most this many operators that may double the output (so at most 64 times the input)."""


def _jq_growth(program: str) -> int:
    """How many operators may double the output: `+`, a `,` outside an object, tojson/tostring, `@format`."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', program)
    brackets: list[str] = []
    count = 0
    for token in _JQ_TOKEN.findall(text):
        if token in "([{":
            brackets.append(token)
        elif token in ")]}" and brackets:
            brackets.pop()
        elif token == "," and brackets[-1:] != ["{"] or token == "+" or token in ("tojson", "tostring") or (
            token.startswith("@")  # @base64 grows by 4/3, @uri by 3, @html by 5, @sh by 4, @json by 2
        ):
            count += 1
    # `{a: ., b: .}` holds its input twice: an object value that is the whole input (or a variable) counts.
    count += len(re.findall(r":\s*(?:\.|\$\w+)\s*(?=[,}])", text))
    return count + program.count("\\(")  # each interpolation may repeat its input once more


def _jq_string(src: str, i: int) -> int:
    """Index past the string opening at `i`; each `\\(...)` interpolation is checked as a program."""
    i += 1
    while i < len(src):
        c = src[i]
        if c == '"':
            return i + 1
        if c == "\\" and src[i + 1 : i + 2] == "(":
            i = _jq_scan(src, i + 2, nested=True)
        else:
            i += 2 if c == "\\" else 1
    raise Refusal("script", "jq")


def _jq_flags(src: str, i: int) -> int:
    """Past the regex flags of `test(re; flags)`/`split(re; flags)`: a string literal without `g`
    (global matching loops on an empty match in jq 1.6), directly followed by the closing `)`."""
    while i < len(src) and src[i].isspace():
        i += 1
    if not src.startswith('"', i):
        raise Refusal("loop", "jq ;")
    end = _jq_string(src, i)
    if "g" in src[i + 1 : end - 1] or "\\" in src[i + 1 : end - 1]:
        raise Refusal("loop", "jq regex flags")
    rest = end
    while rest < len(src) and src[rest].isspace():
        rest += 1
    if not src.startswith(")", rest):
        raise Refusal("loop", "jq ;")
    return end


def _jq_scan(src: str, i: int, *, nested: bool) -> int:
    """Check tokens from `i`; with `nested`, stop past the `)` that closes an interpolation."""
    brackets: list[str] = []
    callers: list[str] = []  # per open bracket: the identifier right before it (`test(`)
    key = False  # an identifier here is an object key (`{name: .x}`, `{name}`)
    last = ""
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
            continue
        if c == "#":
            raise Refusal("script", "jq")  # a comment could hide text from this lexer
        if c == '"':
            i, key = _jq_string(src, i), False
            continue
        match = _JQ_TOKEN.match(src, i)
        token = match.group() if match else c
        i += len(token)
        if token in "([{":
            brackets.append(token)
            callers.append(last if token == "(" else "")
            key, last = token == "{", ""
            continue
        if token in ")]}":
            if not brackets:
                if nested and token == ")":
                    return i
                raise Refusal("script", "jq")
            if {")": "(", "]": "[", "}": "{"}[token] != brackets.pop():
                raise Refusal("script", "jq")
            callers.pop()
            key, last = False, ""
            continue
        if token == ";" and callers[-1:] in (["test"], ["split"]):
            i = _jq_flags(src, i)  # `test("x"; "i")`: literal flags without g, then the call ends
            continue
        if token == "," and brackets[-1:] == ["{"]:
            key = True
            continue
        if token[0].isdigit() or (token[0] == "." and token[1:2].isdigit()):
            if _BIG_NUMBER.search(token):
                raise Refusal("loop", f"jq {token}")
        elif token[0] in "$@":
            if token.startswith("$__"):
                raise Refusal("script", f"jq {token}")
        elif token[0].isalpha() or token[0] == "_":
            if token not in _JQ_ALLOWED and not key:
                raise Refusal("loop" if token in _JQ_LOOPS else "script", f"jq {token}")
        elif token in ("*", ";") or token.endswith("=") and token not in ("==", "!=", "<=", ">="):
            # `*` repeats strings, `;` passes regex flags or a second argument, `=` allocates paths.
            raise Refusal("loop", f"jq {token}")
        key, last = False, token
    if nested or brackets:
        raise Refusal("script", "jq")
    return i


_JQ_LOOPS = frozenset(
    "def recurse recurse_down range repeat while until limit reduce foreach combinations sub gsub scan splits"
    " match capture".split()
)
