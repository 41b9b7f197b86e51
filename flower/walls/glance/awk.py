"""The checker of awk programs a glance may carry (S-9): the concept is `flower.walls.glance.sed`'s.

- awk: no system(), pipes, print redirection, @-directives, comments; no `while`/`do`/C-style `for`
  (only `for (k in array)`, which visits a finite array), no functions (recursion); `getline` only from
  the main input (`getline < FILE` could open a computed or `/inet/` path), no `ARGV`/`ARGC`/`PROCINFO`
  (which redirect input), printf/sprintf formats must be string literals, no `%*`, no number over six
  digits (a 1e9-wide field eats memory), no statement that can double a string each time it runs
  (`s = s s`, two variables joined into one of them, `gsub` into a variable that outlives the record).
"""

from __future__ import annotations

import re

from flower.walls.glance.options import Refusal
from flower.walls.glance.sed import MAX_GROWTH

__all__ = ["awk_program_ok", "check_awk", "check_awk_assignment"]

# --- awk -----------------------------------------------------------------------------------------------

_AWK_BANNED = re.compile(r"\bsystem\b|[@#]|/inet|\bARG[VC]\b|\bPROCINFO\b|\bfunc(?:tion)?\b|%\*")
_AWK_LOOPS = re.compile(r"\b(?:while|do)\b")
_AWK_FOR_IN = re.compile(r"for\s*\(\s*[A-Za-z_]\w*\s+in\s+[A-Za-z_]\w*\s*\)")
_AWK_BIG_NUMBER = re.compile(r"[0-9]{7,}|[0-9.][eE][+-]?[0-9]")
_AWK_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AWK_NUMBER = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?")
# After these words an operand is expected, so `/` opens a regex rather than dividing.
_AWK_REGEX_AFTER = {"print", "printf", "return", "case", "in", "do", "else", "getline"}


def awk_program_ok(program: str) -> bool:
    """Whether an awk program only reads and prints to stdout and ends."""
    try:
        check_awk(program)
    except Refusal:
        return False
    return True


def check_awk(program: str) -> None:
    """Refuse an awk program that writes, runs, connects or may not end (module docstring)."""
    if _AWK_BANNED.search(program):
        raise Refusal("script", "awk")
    if _AWK_LOOPS.search(program) or _AWK_BIG_NUMBER.search(program):
        raise Refusal("loop", "awk")
    if len(re.findall(r"\bfor\b", program)) != len(_AWK_FOR_IN.findall(program)):
        raise Refusal("loop", "awk")
    if len(_AWK_FOR_IN.findall(program)) > 1:
        raise Refusal("loop", "awk")  # `for (i in a) for (j in a)`: the square of the input
    if not _awk_lex(program):
        raise Refusal("script", "awk")
    if _awk_grows(program) or _awk_multiplies(program):
        raise Refusal("loop", "awk")


_AWK_UNSAFE_VARS = frozenset("NF NR FNR OFMT CONVFMT".split())
"""Built-in variables a glance may not set: `NF=1e12` allocates that many fields, `OFMT=%999999999.0f`
prints a gigabyte per number, NR/FNR only mislead."""


def check_awk_assignment(text: str) -> None:
    """Refuse a `-v NAME=VALUE` or `NAME=VALUE` operand that sets an unsafe built-in variable."""
    name = text.partition("=")[0].strip()
    if name in _AWK_UNSAFE_VARS:
        raise Refusal("loop", f"awk {name}=")


_AWK_FIELD = re.compile(r"\$\s*(?:[0-9]+|NF\b|[A-Za-z_]\w*|\()")
_AWK_OP_ASSIGN = r"\s*(?:\[[^\]]*\])?\s*(?:[-+*/%^]?=(?!=)|\+\+|--)"


def _awk_multiplies(program: str) -> bool:
    """Whether the program may multiply a string, a record or its field count without bound: a value
    that comes to hold two copies of itself (`$0 = $0 $0`, `t = s; u = t; s = t u`, across records
    too), an assignment to NF/OFMT/CONVFMT or to a computed field (`$i = x` makes i fields), or
    `sub`/`gsub` calls whose replacements grow the text more than `MAX_GROWTH` times per record."""
    # Strings and regex literals blanked, lengths kept (so offsets into `program` still hold).
    text = re.sub(r'"(?:[^"\\]|\\.)*"', lambda m: '"' + "." * (len(m.group()) - 2) + '"', program)
    text = re.sub(
        r"([(,~]\s*)(/(?:[^/\\\n]|\\.)*/)", lambda m: m.group(1) + "/" + "." * (len(m.group(2)) - 2) + "/", text
    )
    for name in _AWK_UNSAFE_VARS:
        for m in re.finditer(rf"(?<![\w$])(\+\+|--)?\s*{name}\b(?={_AWK_OP_ASSIGN})?", text):
            after = text[m.end():]
            if m.group(1) == "++" or re.match(r"\s*(?:[+*/%^]?=(?!=)|\+\+)", after):
                return True
    for m in re.finditer(r"(\+\+|--)?\s*\$\s*([A-Za-z_]\w*|\()", text):
        end = m.end()
        if m.group(2) == "(":  # `$(NF+999999) = 1`: look past the balanced parentheses
            depth = 1
            while end < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
        after = text[end:]
        if m.group(2) != "NF" and (m.group(1) or re.match(_AWK_OP_ASSIGN, after)):
            return True  # `$i = x`, `$(n*n) = x`: the record grows to that many fields
    growth = 1
    for m in re.finditer(r"\b(g?)sub\s*\(", text):
        depth, i, commas = 1, m.end(), []
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if text[i] == "," and depth == 1:
                commas.append(i)
            i += 1
        if not commas:
            return True
        end = commas[1] if len(commas) > 1 else i - 1
        replacement = program[commas[0] + 1 : end].strip()
        if not re.fullmatch(r'"(?:[^"\\]|\\.)*"', replacement):
            return True  # a computed replacement could hold any number of `&`
        if len(commas) > 1 and re.match(r"\s*\$\s*(?:[A-Za-z_(])", text[commas[1] + 1 :]) and not re.match(
            r"\s*\$\s*NF\b", text[commas[1] + 1 :]
        ):
            return True
        copies = max(len(re.findall(r"(?<!\\)&", replacement)), 1)
        growth *= copies * (max(len(replacement) - 2, 1) if m.group(1) else 1)
    if growth > MAX_GROWTH or (growth > 1 and _AWK_FOR_IN.search(program)):
        return True  # inside `for (k in a)` a growing sub/gsub runs once per element: growth ** len(a)
    return _awk_self_copies(_AWK_FIELD.sub(" _F_ ", text))


def _awk_self_copies(text: str) -> bool:
    copies: dict[str, dict[str, int]] = {}
    statements = []
    for match in _AWK_ASSIGN.finditer(text):
        if text[match.end() - 2 : match.end() - 1] in "+-*/%^" and text[match.end() - 2] != " ":
            continue  # `x += 1` is arithmetic
        rhs = re.split(r"[;{}\n]", text[match.end() :], maxsplit=1)[0]
        names = [n for n in re.findall(r"(?<![\w$])([A-Za-z_]\w*)\b(?!\s*\()", rhs)
                 if n not in _AWK_BUILTIN_VARS and n not in _AWK_WORDS]
        if names:  # a constant resets the target only where it runs (BEGIN runs once): ignore it
            statements.append((match.group(1), names))
    for _ in range(len(statements) + 1):  # the program runs once per record: feedback across records
        for target, names in statements:
            total: dict[str, int] = {}
            for name in names:
                for source, count in copies.get(name, {name: 1}).items():
                    total[source] = min(total.get(source, 0) + count, 2)
            if total.get(target, 0) >= 2:
                return True
            copies[target] = total
    return False


_AWK_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\[[^\]=]*\])?\s*=(?!=)")
_AWK_BUILTIN_VARS = frozenset(
    "NR NF FNR FS OFS RS ORS FILENAME SUBSEP RSTART RLENGTH CONVFMT OFMT ENVIRON RT IGNORECASE".split()
)
_AWK_WORDS = frozenset("in getline print printf if else next exit delete return".split())


def _awk_grows(program: str) -> bool:
    """Whether a statement may double a string each time it runs (`s = s s`, `s = s t` after `t = s`,
    `gsub(/x/, "&&", s)` on a variable that outlives the record): memory exponential in the input."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', program)
    text = re.sub(r"([(,~]\s*)/(?:[^/\\\n]|\\.)*/", r"\1//", text)  # regex literals in arguments
    for match in _AWK_ASSIGN.finditer(text):
        target = match.group(1)
        rhs = re.split(r"[;{}\n]", text[match.end():], maxsplit=1)[0]
        names = [m.group(1) for m in re.finditer(r"(?<![\w$])([A-Za-z_]\w*)\b(?!\s*\()", rhs)]
        names = [n for n in names if n not in _AWK_BUILTIN_VARS and n not in _AWK_WORDS]
        if len(names) != len(set(names)) or (target in names and len(names) > 1):
            return True
    for match in re.finditer(r"\bg?sub\s*\(", text):
        depth, i, commas = 1, match.end(), []
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if text[i] == "," and depth == 1:
                commas.append(i)
            i += 1
        if len(commas) >= 2 and not text[commas[1] + 1 : i - 1].strip().startswith("$"):
            return True  # the third argument is a variable that keeps what the last record made of it
    return False


def _awk_delimited(src: str, i: int, quote: str) -> int:
    while i < len(src):
        ch = src[i]
        if ch == "\\":
            i += 2
        elif ch == "\n":
            break
        elif ch == quote:
            return i + 1
        else:
            i += 1
    raise Refusal("script", "awk")


def _awk_lex(src: str) -> bool:
    """Walk the tokens: no print redirection, no `getline <`, printf/sprintf formats are literals."""
    i, n, depth = 0, len(src), 0
    operand = False  # was the previous token an operand (so `/` divides)?
    parens: list[bool] = []  # per open paren: does it hold an if/while/for condition?
    last_word = ""
    print_depth: int | None = None
    getline = False  # inside a statement that called getline
    want_format = False  # the next token must be a printf/sprintf format string
    after_format = False  # the token after the format must end it
    while i < n:
        c = src[i]
        if c == "\n":
            # A newline after an operand ends the statement, so a `/` on the next line opens a regex.
            i, operand, getline = i + 1, False, False
            continue
        if c in " \t\r" or src.startswith("\\\n", i):
            i += 1 if c != "\\" else 2
            continue
        if after_format:
            after_format = False
            if c not in ",);}" and not src.startswith(("&&", "||"), i):
                return False  # `printf "%" $1 "d"`: a format computed from data
        if want_format and not (c == "(" and last_word in ("printf", "sprintf")):
            want_format = False
            if c != '"':
                return False
            after_format = True
        word = ""
        if c.isalpha() or c == "_":
            word = _AWK_IDENT.match(src, i).group()  # type: ignore[union-attr]
            i += len(word)
            if word in ("print", "printf"):
                print_depth = depth
            if word in ("printf", "sprintf"):
                want_format = True
            getline = getline or word == "getline"
            operand = word not in _AWK_REGEX_AFTER and word not in ("if", "while", "for")
        elif c == "(":
            parens.append(last_word in ("if", "while", "for"))
            depth, i, operand = depth + 1, i + 1, False
        elif c == ")":
            if not parens:
                return False
            operand = not parens.pop()
            depth, i = depth - 1, i + 1
        elif c in ";{}":
            print_depth, i, operand, getline = None, i + 1, False, False
        elif c == ">":
            if print_depth is not None and depth == print_depth:
                return False
            i, operand = i + 1, False
        elif c == "<":
            if getline:
                return False  # `getline < FILE`: the file may be computed or a /inet/ socket
            i, operand = i + 1, False
        else:
            i, operand = _awk_plain_token(src, i, operand)
        last_word = word
    return not parens and not want_format


def _awk_plain_token(src: str, i: int, operand: bool) -> tuple[int, bool]:
    """Past the token at `i` that touches no lexer state but `operand` (a string, a regex, a number, an
    operator): where it ends and whether it was an operand. Refuses what `_awk_lex` refuses."""
    c = src[i]
    if c == '"':
        return _awk_delimited(src, i + 1, '"'), True
    if c == "/" and not operand:
        end = _awk_delimited(src, i + 1, "/")
        body = src[i + 1 : end - 1]
        if '"' in body or ("[" in body and "]" not in body[body.rindex("[") :]):
            raise Refusal("script", "awk")  # awks disagree on `/` inside brackets; refuse rather than guess
        return end, True
    if c.isdigit() or (c == "." and src[i + 1 : i + 2].isdigit()):
        return _AWK_NUMBER.match(src, i).end(), True  # type: ignore[union-attr]
    if c == "]":
        return i + 1, True
    if src.startswith(("++", "--"), i):
        return i + 2, True
    if c == "|":
        if not src.startswith("||", i) or src.startswith("|||", i):
            # `print | "cmd"`, `"cmd" | getline`, `|&`: only `||` (logical or), outside strings and regexes
            raise Refusal("script", "awk")
        return i + 2, False
    return i + 1, False
