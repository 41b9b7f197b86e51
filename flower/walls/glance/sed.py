"""The checker of sed scripts a glance may carry (S-9); awk programs have `flower.walls.glance.awk`, jq filters
`flower.walls.glance.jq`.

Concept. A program handed to sed, awk or jq is a glance only if it can neither write, run, connect nor
run without end. Each checker is a small lexer of its language that allows the read-and-print core and
refuses the rest with `Refusal("script", ...)` (writes, runs) or `Refusal("loop", ...)` (never ends or
eats memory):

- sed: no `w`/`W`/`e`, no `s///w`, `s///e`; no branch back to an earlier label (`:a;...;ba` can spin
  for ever) and no `D` (restarts the cycle without reading: `G;D` never ends); no `r`/`R` (a file named
  inside the program could be a FIFO the wall never sees). Fragments of `-e` are joined with newlines, as GNU sed does, so labels span them.
"""

from __future__ import annotations

import re

from flower.walls.glance.options import Refusal
from flower.walls.glance.paths import device_word

__all__ = ["MAX_GROWTH", "check_sed", "sed_script_ok"]

# --- sed: GNU sed's script grammar ------------------------------------------------------------------

_SED_PLAIN = set("=dgGhHnNpPxzF")
# GNU sed's read_label: blanks skipped, then the label runs to a blank, `;` or newline; the next command
# may follow at once (`:a p;ba` is the label `a`, then `p`, then a jump back to `a`).
_SED_LABEL = re.compile(r"[ \t]*([^; \t\n]*)")


def _sed_delimited(script: str, i: int, delim: str) -> int:
    """Index just past the closing `delim` (backslash escapes the next char, as in GNU match_slash)."""
    while i < len(script):
        ch = script[i]
        if ch == "\\":
            i += 2
        elif ch == "\n":
            break
        elif ch == delim:
            return i + 1
        else:
            i += 1
    raise Refusal("script", "sed")


_SED_NUMERIC_ADDRESS = re.compile(r"[0-9]+(?:~[0-9]+)?|\$|[+~][0-9]+")
_SED_NUMBER = re.compile(r"[ \t]*[0-9]*")


def _sed_address(script: str, i: int) -> int:
    m = _SED_NUMERIC_ADDRESS.match(script, i)
    if m:
        return m.end()
    if script.startswith("/", i):
        i = _sed_delimited(script, i + 1, "/")
    elif script.startswith("\\", i) and i + 1 < len(script) and script[i + 1] not in "\n\\":
        i = _sed_delimited(script, i + 2, script[i + 1])
    else:
        return i
    while i < len(script) and script[i] in "IM":
        i += 1
    return i


def _sed_end(script: str, i: int) -> int:
    while i < len(script) and script[i] in " \t":
        i += 1
    if i < len(script) and script[i] not in ";\n}#":
        raise Refusal("script", "sed")
    return i


def sed_script_ok(script: str) -> bool:
    """Whether every command of a GNU sed script only reads and prints, and the script ends."""
    try:
        _sed_walk(script)
    except Refusal:
        return False
    return True


MAX_GROWTH = 64
"""A sed script or awk program may multiply a line's length by at most this much per cycle/record:
`h;G` doubles it, `s/.*/&&/` doubles it, `gsub(/./,"&&")` doubles it, and repeated they grow as 2 ** k."""


class _Hold:
    """How many copies of the hold space at a cycle's start the pattern and hold spaces hold: the hold
    space lives from cycle to cycle, so a cycle that leaves it holding two copies of itself (`G;G;h`,
    `g;s/.*/&&/;h`, `G;H`) doubles it per input line. A command that may be skipped (an address, a
    block, after a branch) counts as both done and not done: the larger count is kept."""

    def __init__(self) -> None:
        self.pattern, self.hold = 0, 1

    def apply(self, cmd: str, factor: int, maybe: bool) -> None:
        pattern, hold = self.pattern, self.hold
        if cmd in "gG":
            pattern = hold + (pattern if cmd == "G" else 0)
        elif cmd in "hH":
            hold = pattern + (hold if cmd == "H" else 0)
        elif cmd == "x":
            pattern, hold = hold, pattern
        elif cmd in "nz":
            pattern = 0
        elif cmd == "s":
            pattern *= factor
        if maybe:
            pattern, hold = max(pattern, self.pattern), max(hold, self.hold)
        self.pattern, self.hold = min(pattern, 1 << 20), min(hold, 1 << 20)


def _sed_walk(script: str) -> None:
    i, n, depth = 0, len(script), 0
    growth = 1
    labels: set[str] = set()
    hold, branched = _Hold(), False
    while True:
        while i < n and script[i] in " \t\n;":
            i += 1
        if i >= n:
            break
        if script[i] == "#":
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        start = i
        i = _sed_address(script, i)
        if script.startswith(",", i):
            i = _sed_address(script, i + 1)
        maybe = i > start or depth > 0 or branched
        while i < n and script[i] in " \t!":
            i += 1
        if i >= n:
            raise Refusal("script", "sed")
        cmd, i = script[i], i + 1
        if cmd == "{":
            depth += 1
        elif cmd == "}":
            depth -= 1
            if depth < 0:
                raise Refusal("script", "sed")
            i = _sed_end(script, i)
        elif cmd in _SED_PLAIN:
            growth *= 2 if cmd in "GH" else 1  # append the hold space (which `h` may have made a copy)
            hold.apply(cmd, 1, maybe)
            i = _sed_end(script, i)
        elif cmd in "lLqQ":
            i = _sed_end(script, _SED_NUMBER.match(script, i).end())  # type: ignore[union-attr]
        elif cmd in ":btTv":
            m = _SED_LABEL.match(script, i)
            label = m.group(1).strip()  # type: ignore[union-attr]
            if cmd == ":":
                if not label:
                    raise Refusal("script", "sed")
                labels.add(label)
            elif cmd in "btT":
                branched = True
            if cmd in "btT" and label in labels:
                raise Refusal("loop", "sed")  # a jump back to an earlier label: a loop
            elif cmd in "btT" and label and not re.fullmatch(r"[\w.-]+", label):
                raise Refusal("script", "sed")
            i = m.end()  # type: ignore[union-attr]
        elif cmd in "aicrR":
            i = _sed_text(script, i, cmd)
        elif cmd in "sy":
            i, factor = _sed_substitute(script, i, cmd)
            growth *= factor
            hold.apply(cmd, factor, maybe)
        elif cmd == "D":
            raise Refusal("loop", "sed")  # restarts the cycle without reading: `G;D` never ends
        else:
            raise Refusal("script", "sed")  # w, W, e and anything we do not know
    if depth:
        raise Refusal("script", "sed")
    if growth > MAX_GROWTH or hold.hold > 1:
        raise Refusal("loop", "sed")


def _sed_text(script: str, i: int, cmd: str) -> int:
    """a/i/c text and r/R file names run to the end of the line; refuse the multi-line `\\` forms,
    whose continuation rules we would rather not model, and device files."""
    end = script.find("\n", i)
    end = len(script) if end < 0 else end
    text = script[i:end].strip(" \t")
    if text.startswith("\\") or text.endswith("\\") or (cmd in "rR" and not text):
        raise Refusal("script", "sed")
    if cmd in "rR" and (device_word(text) or text == "-"):
        raise Refusal("device", f"sed {cmd} {text}")
    if cmd in "rR":
        # The file is named inside the program, where the wall's look at the disk cannot see a FIFO.
        raise Refusal("script", "sed")
    return end


def _sed_substitute(script: str, i: int, cmd: str) -> tuple[int, int]:
    """Past the command, and by how much it may multiply the pattern space's length."""
    if i >= len(script) or script[i] in "\\\n":
        raise Refusal("script", "sed")
    delim = script[i]
    middle = _sed_delimited(script, i + 1, delim)
    i = _sed_delimited(script, middle, delim)
    replacement = script[middle : i - 1]
    flags_start = i
    if cmd == "s":
        while i < len(script) and (script[i] in "gpiImM" or script[i].isdigit()):
            i += 1  # w (write) and e (execute) are not in the set
    if cmd != "s":
        return _sed_end(script, i), 1
    copies = len(re.findall(r"(?<!\\)(?:\\\\)*(?:&|\\[0-9])", replacement))
    factor = max(copies, 1)
    if "g" in script[flags_start:i]:
        factor *= max(len(replacement), 1)  # every match (of one character, at least) becomes the replacement
    return _sed_end(script, i), factor


def check_sed(scripts: list[str]) -> None:
    """Refuse a sed program (its `-e` fragments, joined as GNU sed joins them)."""
    _sed_walk("\n".join(scripts))
