"""The glance predicate (issue #3; S-8 one predicate, S-9 segment-by-segment allow-list, B-2 real parser).

The corpus lives in glance_corpus.py; each refused command names the fragment its reason must contain.
The fuzz tests compose allowed and forbidden segments with random separators, quoting and redirections.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import bashlex
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flower import texts
from flower.stores.trim import EphemeralPolicy
from flower.walls.glance import judge as glance
from flower.walls.glance.jq import jq_program_ok
from flower.walls.glance.judge import COMMANDS, describe_refusal, is_ephemeral
from flower.walls.glance.options import Word, parse
from flower.walls.glance.paths import device_word, numeric_local
from flower.walls.glance.rules import Rule, awk_program_ok, sed_script_ok
from flower.walls.guard import delegate_guard
from tests.support.glance_corpus import ALLOWED, REFUSED

FLOWER = Path(glance.__file__).resolve().parents[2]


# --- the corpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed_commands_are_glances(command: str) -> None:
    """S-9: read-only queries, alone or joined by ;, &&, ||, |, newlines, with harmless redirections."""
    assert describe_refusal(command) is None
    assert is_ephemeral(command) is True


@pytest.mark.parametrize(("command", "fragment"), REFUSED)
def test_refused_commands_are_refused_for_the_right_reason(command: str, fragment: str) -> None:
    """S-9, B-2: each hole stays closed, and the reason names the culprit (not some other failure)."""
    assert is_ephemeral(command) is False
    reason = describe_refusal(command)
    assert reason is not None and fragment in reason, reason


def test_corpus_is_large_and_has_no_duplicates() -> None:
    """S-8 asks for a corpus with adversarial cases; a duplicate would hide a missing case."""
    commands = ALLOWED + [command for command, _ in REFUSED]
    assert len(commands) >= 200
    assert len(set(commands)) == len(commands)


def _heads(command: str) -> set[tuple[str, ...]]:
    """The first one, two and three words of every simple command (bashlex's own quote removal)."""
    found: set[tuple[str, ...]] = set()

    def walk(node: Any) -> None:
        if node.kind == "command":
            words = [part.word for part in node.parts if part.kind == "word"]
            found.update(tuple(words[:k]) for k in (1, 2, 3))
        for part in getattr(node, "parts", None) or ():
            walk(part)

    for tree in bashlex.parse(command):
        walk(tree)
    return found


def _rule_paths(rules: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for name, rule in rules.items():
        paths.append((*prefix, name))
        if rule.subcommands:
            paths.extend(_rule_paths(rule.subcommands, (*prefix, name)))
    return paths


def test_every_allowed_command_and_subcommand_has_an_allowed_example() -> None:
    """S-9: the corpus exercises every family the table allows, so no entry is dead or untested."""
    seen = set().union(*(_heads(command) for command in ALLOWED))
    missing = [path for path in _rule_paths(COMMANDS) if path not in seen]
    assert missing == []


# --- S-8: one predicate for both questions ------------------------------------------------------


def test_the_wall_and_the_expiry_ask_the_same_function() -> None:
    """S-8: the names the two layers may use are the predicate itself, not copies, and the resume
    rewrite's default policy resolves to it."""
    assert glance.may_run_on_main is is_ephemeral
    assert glance.expires_on_resume is is_ephemeral
    assert EphemeralPolicy().resolved_predicate() is is_ephemeral


@pytest.mark.anyio
async def test_the_wall_allows_exactly_what_expires_over_the_whole_corpus(tmp_path: Path) -> None:
    """S-8: over every corpus command, the coordinator's Bash wall lets it run if and only if the resume
    rewrite would expire its result; a denial carries describe_refusal's reason."""
    (hook,) = delegate_guard(allow_glance=True).hooks
    expires = EphemeralPolicy().resolved_predicate()
    for directory in {w for c in ALLOWED for w in c.split()[2:3] if c.startswith("git -C ")}:
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)  # git -C DIR: the wall reads DIR's config
    for command in ALLOWED + [command for command, _ in REFUSED]:
        data = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command},
                "cwd": str(tmp_path)}
        decision = await hook(data, "toolu_1", {"signal": None})
        denied = (decision.get("hookSpecificOutput") or {}).get("permissionDecision") == "deny"
        assert (not denied) == expires(command), command
        if denied:
            why = describe_refusal(command)
            assert why is not None
            reason = decision["hookSpecificOutput"]["permissionDecisionReason"]
            assert texts.GLANCE_REFUSAL.format(why=why) in reason


def test_only_the_glance_module_parses_shell() -> None:
    """S-8, B-2: no second shell judge can drift from this one: bashlex is imported by glance alone."""
    importers = []
    for path in sorted(FLOWER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if "bashlex" in names or (module or "").startswith("bashlex"):
                importers.append(path.relative_to(FLOWER).as_posix())
    assert importers == ["walls/glance/judge.py"]


# --- never raises, bounded ------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, b"ls", 42, ["ls"], object()])
def test_non_text_is_not_a_glance_and_does_not_raise(value: Any) -> None:
    """B-2: anything that is not a command string is refused, never an exception."""
    assert is_ephemeral(value) is False
    assert describe_refusal(value) == texts.GLANCE_WHY["empty"]


def test_over_long_commands_are_refused_unread() -> None:
    """A glance is short; parsing cost grows with length, so the cap bounds the hook's cost."""
    command = "ls " + "a " * glance.MAX_COMMAND_CHARS
    assert is_ephemeral(command) is False
    assert describe_refusal(command) == texts.GLANCE_WHY["long"]


def test_reasons_are_short() -> None:
    """Reasons ride in the coordinator's context inside a denial; keep them to a line."""
    for command, _ in REFUSED:
        assert len(describe_refusal(command) or "") <= 160, command


# --- the tables -------------------------------------------------------------------------------------

# Options that must stay refused, per command: no allowed flag may equal one or be an abbreviation of it
# (GNU getopt_long and git's parse-options accept unique prefixes).
DANGEROUS = {
    "sort": ["--output", "--compress-program", "--temporary-directory"],
    "sed": ["--in-place", "--file"],
    "tail": ["--follow", "--retry", "--pid", "--sleep-interval"],
    "date": ["--set"],
    "rg": ["--pre", "--pre-glob", "--hostname-bin"],
    "hostname": ["--file", "--boot"],
    "file": ["--compile"],
    "awk": ["--include", "--load", "--file", "--dump-variables", "--profile", "--pretty-print", "--exec"],
    "ss": ["--kill", "--events", "--diag"],
    "netstat": ["--continuous"],
    "free": ["--seconds", "--count"],
    "git diff": ["--output", "--ext-diff"],
    "git log": ["--output", "--ext-diff", "--show-signature"],
    "git show": ["--output", "--ext-diff"],
    "git branch": ["--delete", "--move", "--copy", "--force", "--set-upstream-to", "--edit-description"],
    "git config": ["--add", "--unset", "--replace-all", "--edit", "--rename-section", "--remove-section"],
    "kubectl get": ["--watch", "--watch-only"],
    "journalctl": ["--follow", "--vacuum-size", "--rotate", "--flush"],
}
EVERYWHERE = ["--output", "--force", "--hard"]


def _rule(path: str) -> Rule:
    rule, *rest = path.split()
    found = COMMANDS[rule]
    for sub in rest:
        assert found.subcommands is not None
        found = found.subcommands[sub]
    return found


def _long_flags(rule: Rule) -> set[str]:
    return {token.split("=")[0] for token in (rule.flags or "").split() if token.startswith("--")}


@pytest.mark.parametrize("path", sorted(DANGEROUS))
def test_no_allowed_long_flag_abbreviates_a_dangerous_one(path: str) -> None:
    allowed = _long_flags(_rule(path))
    clashes = [(a, d) for a in allowed for d in DANGEROUS[path] + EVERYWHERE if d.startswith(a)]
    assert clashes == []


def test_no_flag_is_listed_twice_with_different_arity() -> None:
    """A flag both value-taking and not would let the parser skip (or miss) a word."""
    for path in _rule_paths(COMMANDS):
        rule = _rule(" ".join(path))
        arity: dict[str, str] = {}
        for token in (rule.flags or "").split():
            name = token.split("=")[0]
            kind = token[len(name):]
            assert arity.setdefault(name, kind) == kind, (path, name)


# --- the script checkers, directly ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "ok"),
    [
        ("p", True), ("1,5p", True), ("/a/,/b/{p;q}", True), ("s|a|b|gI", True), ("s/a\\/b/c/2p", True),
        ("0,/re/d", True), ("1~2p", True), ("$!N;P;D", False), (":a;N;$!ba", False), ("y/ab/cd/", True),
        ("1r other.txt", False), ("$a tail line", True), ("l 40", True), ("\\%x%p", True), ("# c\np", True),
        ("w out", False), ("1W out", False), ("e ls", False), ("s/a/b/w out", False), ("s/a/b/e", False),
        ("s/a/b/gw out", False), ("{p", False), ("p}", False), ("s/a/b", False), ("k", False),
        ("1{w x\n}", False), ("a\\", False), ("s/a/b/;w x", False), ("/x/!e", False),
    ],
)
def test_sed_scripts(script: str, ok: bool) -> None:
    """S-9: GNU sed scripts pass only without w/W/e commands and s///w, s///e flags."""
    assert sed_script_ok(script) is ok


@pytest.mark.parametrize(
    ("program", "ok"),
    [
        ("{print $1}", True), ("NR>1", True), ("$3 > 100 {print}", True), ("{print ($1 > $2)}", True),
        ("{a[$1]++} END {for (k in a) print k, a[k]}", True), ("/x/ && !/y/", True), ("{print $2/2}", True),
        ("{n = split($0, p, /,/); print n}", True), ("{getline line < \"f\"; print line}", False),
        ("{x = (a)/2; print x}", True), ("{if ($1 > 2) print}", True), ("{print length($0) >= 3}", False),
        ("{print > \"f\"}", False), ("{print >> \"f\"}", False), ("{printf \"x\" > \"f\"}", False),
        ("{print | \"sh\"}", False), ("{\"ls\" | getline}", False), ("BEGIN{system(\"ls\")}", False),
        ("@load \"x\"", False), ("# c", False), ("{print a /\"/ > \"f\"}", False),
        ("{x = a\n/\"/; print > \"f\"; /\"/}", False), ("{print (1)/2 > \"f\"}", False),
        ("{print \"a\" > \"/dev/stderr\"}", False), ("(", False), ("{print \"unterminated}", False),
    ],
)
def test_awk_programs(program: str, ok: bool) -> None:
    """S-9: awk programs pass only without system(), pipes, @-directives or print/printf redirection."""
    assert awk_program_ok(program) is ok


# --- fuzz (B-2) -------------------------------------------------------------------------------------

PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:/+%-")
GOOD_SEGMENTS = [
    ["git", "status"], ["git", "log", "--oneline", "-5"], ["git", "diff", "--stat"], ["git", "branch", "-a"],
    ["ls", "-la"], ["cat", "README.md"], ["head", "-n", "5", "a.txt"], ["wc", "-l", "a.txt"], ["pwd"],
    ["grep", "-rn", "TODO", "src"], ["sort", "-u", "a.txt"], ["uniq", "-c", "a.txt"], ["echo", "---"], ["ps", "aux"],
    ["jq", ".name", "p.json"], ["sed", "-n", "1,5p", "f.txt"], ["awk", "{print $1}", "a.txt"],
    ["tail", "-n", "3", "l"],
    ["find", ".", "-name", "*.py"], ["uname", "-a"], ["date", "+%s"], ["which", "python3"],
    ["command", "-v", "git"], ["du", "-sh", "."], ["rg", "-n", "foo", "src"], ["cut", "-d:", "-f1", "a.txt"],
    ["rev", "a.txt"],
]
BAD_SEGMENTS = [
    ["rm", "-rf", "build"], ["git", "commit", "-m", "x"], ["git", "push", "--force"],
    ["sed", "-i", "s/a/b/", "f"], ["sort", "-o", "out", "in"], ["tee", "out.txt"], ["find", ".", "-delete"],
    ["git", "branch", "newb"],
    ["tail", "-f", "log"], ["python3", "x.py"], ["curl", "http://x"], ["xargs", "rm"],
    ["git", "reset", "--hard"],
    ["uniq", "a", "b"], ["date", "-s", "now"], ["awk", "BEGIN{system(\"x\")}"], ["make"], ["npm", "install"],
    ["hostname", "evil"], ["env", "rm", "x"], ["git", "remote", "add", "o", "u"], ["mv", "a", "b"],
    ["sed", "-n", "w out", "f"], ["awk", "{print > \"f\"}"], ["git", "stash"], ["cd", "/"],
]
BAD_RAW = [
    "echo $(rm x)", "echo `rm x`", "cat <(ls)", "X=1 ls", "(ls)", "{ ls; }", "ls &", "f() { ls; }",
    "echo \"$(rm x)\"", "ls > out.txt", "ls >> log", "r\\m -rf x",
]
HARMLESS = ["", " 2>&1", " >/dev/null", " 2>/dev/null", " &>/dev/null", " >&2", " < in.txt"]
HARMFUL = [" > out.txt", " >> out.txt", " 2> err.log", " &> all.txt", " >| x", " 3>x"]
SEPARATORS = [";", " ; ", " && ", "&&", " || ", " | ", "|", "\n", " |& "]


def _token(token: str) -> st.SearchStrategy[str]:
    if set(token) <= PLAIN:
        return st.sampled_from([token, f"'{token}'", f'"{token}"', "\\" + token])
    return st.just(f"'{token}'")  # `$`, spaces, globs, quotes: only single quotes keep them literal


def _segment(tokens: list[str]) -> st.SearchStrategy[str]:
    return st.tuples(*map(_token, tokens)).map(" ".join)


GOOD = st.tuples(st.sampled_from(GOOD_SEGMENTS).flatmap(_segment), st.sampled_from(HARMLESS)).map("".join)
BAD = st.one_of(
    st.tuples(st.sampled_from(BAD_SEGMENTS).flatmap(_segment), st.sampled_from(HARMLESS + HARMFUL)).map(
        "".join
    ),
    st.tuples(st.sampled_from(GOOD_SEGMENTS).flatmap(_segment), st.sampled_from(HARMFUL)).map("".join),
    st.sampled_from(BAD_RAW),
)


@st.composite
def compositions(draw: Any, bad: bool) -> str:
    parts = draw(st.lists(GOOD, min_size=0 if bad else 1, max_size=5))
    if bad:
        parts.insert(draw(st.integers(0, len(parts))), draw(BAD))
    separators = [draw(st.sampled_from(SEPARATORS)) for _ in parts[1:]]
    return parts[0] + "".join(sep + part for sep, part in zip(separators, parts[1:]))


@settings(max_examples=300, deadline=None)
@given(compositions(bad=False))
def test_fuzz_compositions_of_glances_are_glances(command: str) -> None:
    """B-2: the parser path accepts real compositions; it does not pass the other tests by refusing all."""
    assert describe_refusal(command) is None


@settings(max_examples=300, deadline=None)
@given(compositions(bad=True))
def test_fuzz_a_forbidden_segment_anywhere_refuses_the_whole(command: str) -> None:
    """B-2: no crash, and no acceptance of a command containing a mutating segment or redirection."""
    assert is_ephemeral(command) is False
    assert describe_refusal(command) is not None


SHELLISH = st.text(alphabet="abcdefgilmnorstux -|&;<>()$`'\"\\{}[]*?~#!=\n\t0123456789/.", max_size=60)


@settings(max_examples=400, deadline=None)
@given(st.one_of(SHELLISH, st.text(max_size=40)))
def test_fuzz_arbitrary_text_never_raises_and_both_answers_agree(command: str) -> None:
    """B-2: any text gets a boolean, never an exception, and the reason exists exactly when refused."""
    verdict = is_ephemeral(command)
    assert isinstance(verdict, bool)
    assert verdict == (describe_refusal(command) is None)


# --- issue #16: the new classes, fuzzed ---------------------------------------------------------------

# Item 1: a flag placed after the first operand of a command that stops there is an operand, so it
# cannot turn a running form into a lookup (`command rm -v x` runs rm).
RUNNERS = ["rm", "sh", "env", "cp", "mv", "python3", "touch", "chmod", "dd", "tee"]
LOOKUP_FLAGS = ["-v", "-V", "-p", "-pv"]


@st.composite
def option_after_operand(draw: Any) -> str:
    runner = draw(st.sampled_from(RUNNERS))
    before = draw(st.lists(st.sampled_from(["-p"]), max_size=1))
    after = draw(st.lists(st.sampled_from(LOOKUP_FLAGS + ["--", "x", "-c", "'touch m'"]), min_size=1, max_size=4))
    if not any(flag in after for flag in LOOKUP_FLAGS):
        after.insert(draw(st.integers(0, len(after))), draw(st.sampled_from(LOOKUP_FLAGS)))
    return " ".join(["command", *before, runner, *after])


@settings(max_examples=300, deadline=None)
@given(option_after_operand())
def test_fuzz_a_lookup_flag_after_the_first_operand_is_no_lookup(command: str) -> None:
    """Issue #16 item 1: bash stops `command`'s options at its first operand."""
    assert is_ephemeral(command) is False, command


# Item 2: whatever wraps `-v`/`-R` and wherever it sits, test/[ never see a subscript to evaluate.
@st.composite
def subscripts(draw: Any) -> str:
    inner = draw(st.sampled_from(["$(touch m)", "`touch m`", "$(id)", "1", "x"]))
    word = draw(st.sampled_from([f"'a[{inner}]'", f'"a[{inner}]"', f"a\\[{inner}\\]"]))
    flag = draw(st.sampled_from(["-v", "-R", "'-v'", '"-v"', "-\\v"]))
    prefix = draw(st.sampled_from(["", "! ", "-n x -a ", "x = x -o ", "-f f -a ! "]))
    if draw(st.booleans()):
        return f"test {prefix}{flag} {word}"
    return f"[ {prefix}{flag} {word} ]"


@settings(max_examples=300, deadline=None)
@given(subscripts())
def test_fuzz_no_subscript_reaches_bash(command: str) -> None:
    """Issue #16 item 2."""
    assert is_ephemeral(command) is False, command


# Item 4: an endless device, spelled any way a path can be spelled, in any position of any reader.
DEVICES = ["dev/zero", "dev/urandom", "dev/random", "dev/stdin", "dev/fd/0", "dev/tty", "proc/self/fd/0",
           "proc/1/fd/0", "dev/full"]


@st.composite
def device_paths(draw: Any) -> str:
    parts = draw(st.sampled_from(DEVICES)).split("/")
    spelled = "".join(draw(st.sampled_from(["/", "//", "/./"])) + part for part in parts)
    prefix = draw(st.sampled_from(["", "/tmp/..", "/usr/..", "/.", "/", "/etc/../tmp/.."]))
    if draw(st.booleans()):  # a glob on one letter of the device root (`/d?v`, `/*/zero`, `/[p]roc`)
        root = spelled.index(parts[0])
        i = root + draw(st.integers(0, len(parts[0]) - 1))
        glob = draw(st.sampled_from(["?", "*", "[" + spelled[i] + "]"]))
        spelled = spelled[:i] + glob + spelled[i + 1 :]
        prefix = ""  # a glob after `..` is refused for the `..` alone; keep the root glob the culprit
    return prefix + spelled


@st.composite
def device_commands(draw: Any) -> str:
    path = draw(device_paths())
    form = draw(st.sampled_from([
        "cat {p}", "head -c 5 {p}", "tail -c 1 {p}", "wc -c {p}", "wc -c < {p}", "grep x {p}",
        "sort {p}", "md5sum {p}", "jq . {p}", "sed -n 1p {p}", "awk 1 {p}", "diff {p} a.txt",
        "cmp a.txt {p}", "grep -f {p} a.txt", "cut -c1 {p}", "tac {p}", "uniq {p}", "nl {p}",
        "sort --random-source={p} -R a.txt", "rg x {p}", "cat a.txt {p}", "ls; cat {p}",
        "git diff --no-index {p} a.txt", "tr a b < {p}",
    ]))
    return form.format(p=path)


@settings(max_examples=400, deadline=None)
@given(device_commands())
def test_fuzz_an_endless_device_in_any_position_is_refused(command: str) -> None:
    """Issue #16 item 4."""
    assert is_ephemeral(command) is False, command


# --- issue #16: the root causes, directly --------------------------------------------------------------


def _words(*values: str) -> list[Word]:
    return [Word(v, True) for v in values]


@pytest.mark.parametrize(
    ("order", "stop", "flags", "operands"),
    [
        ("stop", True, [("-v", None)], ["rm", "-x"]),
        ("permute", False, [("-v", None), ("-x", None)], ["rm"]),
    ],
)
def test_the_shared_parser_stops_where_the_command_stops(order: Any, stop: bool, flags: Any, operands: Any) -> None:
    """Item 1: the same words read two ways; `--` ends options in both."""
    rule = Rule("-v -x", order=order)
    args, _ = parse(rule, "c", _words("-v", "rm", "-x"), stop=stop)
    assert list(args.flags) == flags and [w.value for w in args.operands] == operands
    args, _ = parse(rule, "c", _words("--", "-v"), stop=stop)
    assert args.flags == () and [w.value for w in args.operands] == ["-v"]


def test_gnu_rules_are_judged_under_both_readings() -> None:
    """Item 1: with POSIXLY_CORRECT, GNU getopt stops at the first operand: `uniq in -c out` is then three
    operands; without it `sort in -o out` writes. A line must pass both readings."""
    assert COMMANDS["uniq"].order == "gnu"
    assert describe_refusal("uniq in.txt -c") == texts.GLANCE_WHY["operands"].format(what="uniq")
    assert "`sort -o`" in (describe_refusal("sort in.txt -o out.txt") or "")


def test_every_rule_says_how_it_reads_options() -> None:
    """Item 1, audit: the commands that stop at their first operand are marked so."""
    stops = {name for name, rule in COMMANDS.items() if rule.order == "stop"}
    assert {"command", "type", "env", "awk", "gawk", "mawk", "nawk", "lsof", "git"} <= stops
    assert COMMANDS["which"].order == "gnu"  # Debian's getopts script stops, GNU which permutes
    git = COMMANDS["git"].subcommands or {}
    assert all(rule.order == "permute" for rule in git.values())


@pytest.mark.parametrize(
    ("value", "literal", "device"),
    [
        ("/dev/null", True, False), ("--file=/dev/null", True, False), ("/dev/zero", True, True),
        ("//dev/./zero", True, True), ("/tmp/../dev/zero", True, True), ("-f/dev/zero", True, True),
        ("--random-source=/dev/urandom", True, True), ("/proc/cpuinfo", True, False),
        ("/proc/self/fd/0", True, True), ("/proc/kmsg", True, True), ("/d?v/zero", False, True),
        ("/*/zero", False, True), ("../../*", False, True), ("src/*.py", False, False),
        ("/usr/lib/*.so", False, False), ("/development/x", True, False), ("/inet/tcp/0/h/80", True, True),
    ],
)
def test_device_words(value: str, literal: bool, device: bool) -> None:
    """Item 4: a path through /dev or /proc (bar /dev/null and plain /proc reports), in any spelling."""
    assert device_word(value, literal) is device


@pytest.mark.parametrize(
    ("text", "ok"),
    [("127.0.0.1", True), ("::1", True), ("[::1]", True), ("10.1.2.3", True), ("192.168.0.1", True),
     ("8.8.8.8", False), ("localhost", False), ("evil.example.com", False), ("0x7f000001", False),
     ("127.1", False), ("2130706433", False)],
)
def test_numeric_local_addresses_only(text: str, ok: bool) -> None:
    """Item 3: nothing a resolver would look up."""
    assert numeric_local(text) is ok


@pytest.mark.parametrize(
    ("program", "ok"),
    [
        (".name", True), (".[] | select(.a > 3) | .b", True), ('.[] | "\\(.name) \\(.v)"', True),
        ("{name, n: (.x | length)}", True), ("..|numbers", True), ("keys[]", True), (".[1000]", True),
        ("def f: f; f", False), ("recurse(.+1)", False), ("[range(1e9)]", False), ("repeat(1)", False),
        ("until(. > 9; . + 1)", False), ("limit(3; .[])", False), ("reduce .[] as $x (0; . + $x)", False),
        ('"x" * 100', False), (".a = 1", False), (".a |= 1", False), ('gsub(""; "x")', False),
        ('"\\(def f: f; f)"', False), (".[1000000000]", False), ("input_filename", True),
        ('include "m"; .', False), ("$__loc__", False), (". # comment", False), ('test("a"; "g")', False),
        ('test("a"; "ix")', True), ('split(", *"; null)', False), ('test("a"; "i") | not', True),
        ('test("a"; "i" + "g")', False), ('[.[] | split(","; "g")]', False), (".x | tonumber", True),
        ("[..|..|..|..]", False), ("[paths] | length", True), ("[..] | length", True),
    ],
)
def test_jq_programs(program: str, ok: bool) -> None:
    """Item 4: jq filters pass only when they visit their input once with bounded output."""
    assert jq_program_ok(program) is ok


@pytest.mark.parametrize(
    ("script", "ok"),
    [(":a;N;ba", False), ("/x/b end; p; :end", True), (":a;s/x/xx/;ta", False), ("s/x/y/;T;p", True),
     ("G;D", False), ("r /dev/zero", False), ("R /dev/stdin", False), ("b;:a;ba", False)],
)
def test_sed_loops(script: str, ok: bool) -> None:
    """Item 4: a jump back to an earlier label, or D, can spin for ever."""
    assert sed_script_ok(script) is ok


@pytest.mark.parametrize(
    ("program", "ok"),
    [("BEGIN{while(1);}", False), ("{for(i=1;i<=NF;i++) print $i}", False), ("END{for (k in a) print k}", True),
     ("function f(){f()} BEGIN{f()}", False), ("BEGIN{printf \"%999999999d\", 1}", False),
     ("{printf $0}", False), ("{printf \"%s\\n\", $2}", True), ("{getline x < \"/etc/passwd\"}", False),
     ("{getline; print}", True), ("BEGIN{ARGV[1]=\"x\"}", False), ("{s = s s}", False), ("{s = s $1}", True)],
)
def test_awk_loops_and_inputs(program: str, ok: bool) -> None:
    """Items 3 and 4: no loop but for-in, no recursion, no computed input, no doubling."""
    assert awk_program_ok(program) is ok


def test_the_corpus_of_issue_16_is_counted() -> None:
    """The report quotes these sizes; the corpus must keep growing, never shrink."""
    assert len(ALLOWED) >= 300 and len(REFUSED) >= 390


@pytest.mark.parametrize("path", sorted(DANGEROUS))
def test_a_dangerous_option_after_an_operand_is_refused_unless_the_command_stops(path: str) -> None:
    """Issue #16 item 1, audit: every rule that reads options after operands (GNU getopt, git, cobra)
    refuses the dangerous ones there too; a rule that stops takes them for operands (awk's files)."""
    rule = _rule(path)
    for danger in DANGEROUS[path]:
        command = f"{path} {'{print}' if path == 'awk' else 'operand'} {danger}=x"
        if rule.order == "stop":
            assert path == "awk" and is_ephemeral(command), command
        else:
            assert is_ephemeral(command) is False, command
