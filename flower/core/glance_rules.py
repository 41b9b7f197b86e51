"""The glance allow-list: which commands, subcommands and flags a glance may use (S-9).

Concept. `COMMANDS` maps a command name to a `Rule`; `flower.core.glance` parses a command line with
bashlex, splits each simple command's words by its rule's flag table and refuses everything else.
This module holds only data and the checks that need a command's own syntax (sed scripts, awk
programs, find expressions, git branch/config modes).

Invariants.
- Allow, never deny: a flag is usable only if its table lists it. Tables list real option names only,
  so no entry can be a GNU/git abbreviation of a dangerous option (a test pins this for `--output`,
  `--force`, `--in-place` and friends).
- A flag that takes a value is listed as taking one (`-k=`); when unsure whether a flag takes a value
  we list it as not taking one, so a following word is judged as a flag or operand rather than skipped.
- `flags=None` (argument-blind) is reserved for commands none of whose options or operands can write,
  run a program or never end; each such entry was checked against the tool's manual.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["COMMANDS", "Args", "Refusal", "Rule", "Word", "literal"]


class Refusal(Exception):
    """Why a command is not a glance; `code` keys `texts.GLANCE_WHY`, `what` names the culprit."""

    def __init__(self, code: str, what: str = "") -> None:
        super().__init__(code, what)
        self.code, self.what = code, what


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal."""

    value: str
    """The text the program receives (a leading `~` is left as typed: bash turns it into a path)."""
    literal: bool
    """False when bash would still expand it ($NAME, glob, brace): its real value is unknown."""


@dataclass(frozen=True)
class Args:
    """A command line split by its rule's flag table: what a `Rule.check` inspects."""

    name: str
    flags: tuple[tuple[str, str | None], ...]
    operands: tuple[Word, ...]

    def has(self, *names: str) -> bool:
        return any(flag in names for flag, _ in self.flags)

    def values(self, *names: str) -> list[str]:
        return [value or "" for flag, value in self.flags if flag in names]


@dataclass(frozen=True)
class Rule:
    """How one command (or one subcommand) may appear in a glance."""

    flags: str | None = ""
    """The allowed flags, space-separated: `-n` takes no value, `-n=` requires one (attached or next
    word), `-n=?` takes an optional attached one. None: argument-blind, any arguments are harmless."""
    max_operands: int | None = None
    """At most this many operands (non-flag words); None: any number."""
    numeric: bool = False
    """Accept `-<digits>` (`head -5`, `git log -10`)."""
    plus: str = ""
    """Flags spelled with `+` (lsof `+D dir`), same syntax as `flags`."""
    posix: bool = False
    """Options end at the first operand (awk, env): later words are operands even if they start with -."""
    getopt: bool = True
    """Short-flag values may be attached (`-n5`); False for parsers that always take the next word."""
    subcommands: Mapping[str, Rule] | None = None
    """When set, the first operand must name one of these, judged by its own rule."""
    bare: bool = True
    """With `subcommands`: whether the command may appear without one (`git stash` alone pushes)."""
    check: Callable[[Args], None] | None = None
    """A last look at the parsed line; raises `Refusal` (sed scripts, awk programs, git branch ...)."""
    words: Callable[[str, list[Word]], None] | None = None
    """Replaces flag parsing entirely, for commands with their own syntax (find)."""


def literal(word: Word, where: str) -> str:
    """The word's value, or a refusal when bash would still expand it."""
    if not word.literal:
        raise Refusal("expansion", f"{where} {word.value}")
    return word.value


# --- sed: GNU sed's script grammar, refusing w/W/e and the s///w, s///e flags ---------------------

_SED_PLAIN = set("=dDgGhHnNpPxzF")
_SED_LABEL = re.compile(r"[ \t]*([A-Za-z0-9_.-]*)")


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
    """Whether every command of a GNU sed script only reads and prints."""
    try:
        _sed_walk(script)
    except Refusal:
        return False
    return True


def _sed_walk(script: str) -> None:
    i, n, depth = 0, len(script), 0
    while True:
        while i < n and script[i] in " \t\n;":
            i += 1
        if i >= n:
            break
        if script[i] == "#":
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        i = _sed_address(script, i)
        if script.startswith(",", i):
            i = _sed_address(script, i + 1)
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
            i = _sed_end(script, i)
        elif cmd in "lLqQ":
            i = _sed_end(script, _SED_NUMBER.match(script, i).end())  # type: ignore[union-attr]
        elif cmd in ":btTv":
            m = _SED_LABEL.match(script, i)
            if cmd == ":" and not m.group(1):  # type: ignore[union-attr]
                raise Refusal("script", "sed")
            i = _sed_end(script, m.end())  # type: ignore[union-attr]
        elif cmd in "aicrR":
            i = _sed_text(script, i, cmd)
        elif cmd in "sy":
            i = _sed_substitute(script, i, cmd)
        else:
            raise Refusal("script", "sed")  # w, W, e and anything we do not know
    if depth:
        raise Refusal("script", "sed")


def _sed_text(script: str, i: int, cmd: str) -> int:
    """a/i/c text and r/R file names run to the end of the line; refuse the multi-line `\\` forms,
    whose continuation rules we would rather not model."""
    end = script.find("\n", i)
    end = len(script) if end < 0 else end
    text = script[i:end].strip(" \t")
    if text.startswith("\\") or text.endswith("\\") or (cmd in "rR" and not text):
        raise Refusal("script", "sed")
    return end


def _sed_substitute(script: str, i: int, cmd: str) -> int:
    if i >= len(script) or script[i] in "\\\n":
        raise Refusal("script", "sed")
    delim = script[i]
    i = _sed_delimited(script, _sed_delimited(script, i + 1, delim), delim)
    if cmd == "s":
        while i < len(script) and (script[i] in "gpiImM" or script[i].isdigit()):
            i += 1  # w (write) and e (execute) are not in the set
    return _sed_end(script, i)


def _check_sed(args: Args) -> None:
    scripts = args.values("-e", "--expression")
    if not scripts:
        if not args.operands:
            raise Refusal("script", "sed")
        scripts = [literal(args.operands[0], "sed")]
    if not all(sed_script_ok(s) for s in scripts):
        raise Refusal("script", "sed")


# --- awk: a lexer good enough to find output redirection; pipes, system() and @ refused outright ---

_AWK_BANNED = re.compile(r"\bsystem\b|[@#]|/inet")  # /inet/...: gawk's network special files
_AWK_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AWK_NUMBER = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?")
# After these words an operand is expected, so `/` opens a regex rather than dividing.
_AWK_REGEX_AFTER = {"print", "printf", "return", "case", "in", "do", "else"}


def awk_program_ok(program: str) -> bool:
    """Whether an awk program only reads and prints to stdout: no system(), no pipes (`|`, `|&`,
    `cmd | getline`), no `print > file`, no @load/@include, no comments (which could hide code
    from a lexer that misjudged a regex)."""
    if _AWK_BANNED.search(program):
        return False
    if any(len(run) != 2 for run in re.findall(r"\|+", program)):
        return False  # only `||` (logical or) may appear
    try:
        return _awk_no_redirect(program)
    except Refusal:
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


def _awk_no_redirect(src: str) -> bool:
    i, n, depth = 0, len(src), 0
    operand = False  # was the previous token an operand (so `/` divides)?
    parens: list[bool] = []  # per open paren: does it hold an if/while/for condition?
    last_word = ""
    print_depth: int | None = None
    while i < n:
        c = src[i]
        if c == "\n":
            # A newline after an operand ends the statement, so a `/` on the next line opens a regex.
            i, operand = i + 1, False
            continue
        if c in " \t\r" or src.startswith("\\\n", i):
            i += 1 if c != "\\" else 2
            continue
        word = ""
        if c == '"':
            i, operand = _awk_delimited(src, i + 1, '"'), True
        elif c == "/" and not operand:
            end = _awk_delimited(src, i + 1, "/")
            body = src[i + 1 : end - 1]
            if '"' in body or ("[" in body and "]" not in body[body.rindex("[") :]):
                return False  # awks disagree on `/` inside brackets; refuse rather than guess
            i, operand = end, True
        elif c.isalpha() or c == "_":
            word = _AWK_IDENT.match(src, i).group()  # type: ignore[union-attr]
            i += len(word)
            if word in ("print", "printf"):
                print_depth = depth
            operand = word not in _AWK_REGEX_AFTER and word not in ("if", "while", "for")
        elif c.isdigit() or (c == "." and src[i + 1 : i + 2].isdigit()):
            i, operand = _AWK_NUMBER.match(src, i).end(), True  # type: ignore[union-attr]
        elif c == "(":
            parens.append(last_word in ("if", "while", "for"))
            depth, i, operand = depth + 1, i + 1, False
        elif c == ")":
            if not parens:
                return False
            operand = not parens.pop()
            depth, i = depth - 1, i + 1
        elif c in ";{}":
            print_depth, i, operand = None, i + 1, False
        elif c == ">":
            if print_depth is not None and depth == print_depth:
                return False
            i, operand = i + 1, False
        elif c == "]":
            i, operand = i + 1, True
        elif src.startswith(("++", "--"), i):
            i, operand = i + 2, True
        else:
            i, operand = i + 1, False
        last_word = word
    return not parens


def _check_awk(args: Args) -> None:
    if not args.operands:
        raise Refusal("script", "awk")
    if not awk_program_ok(literal(args.operands[0], "awk")):
        raise Refusal("script", "awk")


# --- find: paths, then an expression of allowed tests and the printing actions -------------------

_FIND_NOARG = frozenset(
    "-depth -mount -xdev -follow -noleaf -ignore_readdir_race -noignore_readdir_race -daystart -warn"
    " -nowarn -empty -executable -readable -writable -false -true -nogroup -nouser -prune -print"
    " -print0 -ls -quit -not -and -a -or -o -help --help -version --version ( ) ! ,".split()
)
_FIND_ONEARG = frozenset(
    "-maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -ctime -fstype -gid -group -ilname -iname"
    " -inum -ipath -iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm -regex"
    " -regextype -samefile -size -type -uid -used -user -wholename -xtype -printf -context"
    " -files0-from".split()
)
_FIND_NEWER_XY = re.compile(r"-newer[aBcmt][aBcmt]")


def _find_words(name: str, words: list[Word]) -> None:
    values = [literal(w, name) for w in words]
    i = 0
    while i < len(values) and (values[i] in ("-H", "-L", "-P") or re.fullmatch(r"-O[0-3]", values[i])):
        i += 1
    while i < len(values) and not values[i].startswith("-") and values[i] not in ("(", ")", "!", ","):
        i += 1  # starting points
    while i < len(values):
        token = values[i]
        i += 1
        if token in _FIND_NOARG:
            continue
        if (token in _FIND_ONEARG or _FIND_NEWER_XY.fullmatch(token)) and i < len(values):
            i += 1
            continue
        raise Refusal("flag", f"find {token}")


# --- small checks ---------------------------------------------------------------------------------


def _check_tail(args: Args) -> None:
    # coreutils still reads obsolete forms: `tail +5f FILE` (from line 5, follow forever) and `tail -cf FILE`
    # (last bytes, follow), which a getopt reading would take for a file `+5f` and `-c` with value `f`.
    if any(w.value.startswith("+") for w in args.operands):
        raise Refusal("flag", "tail +N")
    if ("-c", "f") in args.flags:
        raise Refusal("flag", "tail -cf")


def _check_date(args: Args) -> None:
    if args.operands and not args.operands[0].value.startswith("+"):
        raise Refusal("operands", "date")  # `date MMDDhhmm` sets the clock


def _check_command(args: Args) -> None:
    if not args.has("-v", "-V"):
        raise Refusal("flag", "command (without -v/-V it runs its argument)")


def _check_printf(args: Args) -> None:
    if args.operands and literal(args.operands[0], "printf").startswith("-v"):
        raise Refusal("flag", "printf -v")


def _check_ping(args: Args) -> None:
    limits = {"-c": 100, "-w": 60}
    bounded = [f for f, v in args.flags if f in limits and v and v.isdigit() and 0 < int(v) <= limits[f]]
    if not bounded:
        raise Refusal("flag", "ping (needs -c N or -w SECONDS)")


# The flags that put git branch in list mode (builtin/branch.c); -v/-a/-r do not: `git branch -v x` creates x.
_BRANCH_LISTS = ("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at")


def _check_git_branch(args: Args) -> None:
    # An operand names a branch to create, unless a list-mode flag makes it a pattern or commit.
    if args.operands and (not args.has(*_BRANCH_LISTS) or args.has("--show-current")):
        raise Refusal("subcommand", "git branch NAME")


_CONFIG_MODES = {"--get": 2, "--get-all": 2, "--get-regexp": 2, "--get-urlmatch": 2, "--list": 0, "-l": 0}


def _check_git_config(args: Args) -> None:
    modes = [f for f, _ in args.flags if f in _CONFIG_MODES]
    ops = [literal(w, "git config") for w in args.operands]
    if len(modes) == 1 and len(ops) <= _CONFIG_MODES[modes[0]] and (ops or modes[0] in ("--list", "-l")):
        return
    if not modes and ops[:1] == ["get"] and len(ops) == 2 or not modes and ops == ["list"]:
        return
    raise Refusal("subcommand", "git config (only --get, --get-all, --get-regexp, --list, get, list)")


def _check_git_shortlog(args: Args) -> None:
    if not args.operands:
        raise Refusal("operands", "git shortlog without a revision (it would read stdin)")


# --- the tables -----------------------------------------------------------------------------------
# Flag syntax: `-x` no value, `-x=` a required value, `-x=?` an optional attached value.

_GIT_DIFF = (
    "-p -u -s --patch --no-patch --raw --patch-with-raw --patch-with-stat --numstat --shortstat"
    " --summary --name-only --name-status --compact-summary --full-index --binary --check --no-renames"
    " --color=? --no-color --color-words=? --word-diff=? --word-diff-regex= --color-moved=?"
    " --no-color-moved -b --ignore-space-change -w --ignore-all-space --ignore-space-at-eol"
    " --ignore-blank-lines --ignore-cr-at-eol -I= --ignore-matching-lines= --minimal --patience"
    " --histogram --diff-algorithm= --indent-heuristic --no-indent-heuristic -R -a --text --exit-code"
    " --quiet --no-ext-diff -W --function-context --stat=? --stat-width= --stat-name-width="
    " --stat-graph-width= --stat-count= --dirstat=? -X=? --cumulative --relative=? --no-relative -U=?"
    " --unified= --inter-hunk-context= -M=? --find-renames=? -C=? --find-copies=? --find-copies-harder"
    " -B=? --break-rewrites=? -D --irreversible-delete -l= --diff-filter= -S= -G= --pickaxe-all"
    " --pickaxe-regex --find-object= -O= --src-prefix= --dst-prefix= --no-prefix --default-prefix"
    " --line-prefix= --abbrev=? --no-abbrev --submodule=? --ignore-submodules=? -z"
)
_GIT_REVS = (
    " --max-count= --skip= --since= --after= --until= --before= --author= --committer= --grep="
    " --all-match --invert-grep -i --regexp-ignore-case --basic-regexp -E --extended-regexp -F"
    " --fixed-strings -P --perl-regexp --merges --no-merges --min-parents= --max-parents= --first-parent"
    " --not --all --branches=? --tags=? --remotes=? --glob= --exclude= --reflog --cherry-mark"
    " --cherry-pick --left-only --right-only --cherry -g --walk-reflogs --merge --boundary"
    " --simplify-by-decoration --full-history --dense --sparse --simplify-merges --ancestry-path=?"
    " --show-pulls --date-order --author-date-order --topo-order --reverse --no-walk=? --do-walk"
    " --pretty=? --format= --abbrev-commit --no-abbrev-commit --oneline --encoding= --expand-tabs=?"
    " --no-expand-tabs --notes=? --no-notes --relative-date --date= --parents --children --left-right"
    " --graph --decorate=? --no-decorate --decorate-refs= --decorate-refs-exclude= --source --mailmap"
    " --use-mailmap --no-mailmap --full-diff --log-size -L= --follow -m -c --cc --dd --diff-merges="
    " --no-diff-merges -t"
)
_GIT_LOG = _GIT_DIFF + _GIT_REVS + " -n="
_GIT_REVIEW = Rule(_GIT_LOG, numeric=True)

_GIT: dict[str, Rule] = {
    "status": Rule(
        "-s --short -b --branch --show-stash --porcelain=? --long -v --verbose -u=? --untracked-files=?"
        " --ignored=? --ignore-submodules=? -z --column=? --no-column --ahead-behind --no-ahead-behind"
        " --renames --no-renames --find-renames=?"
    ),
    "diff": Rule(_GIT_DIFF + " --cached --staged --merge-base --no-index"),
    "log": _GIT_REVIEW,
    "show": _GIT_REVIEW,
    "rev-list": Rule(_GIT_LOG + " --count --objects --no-object-names --timestamp", numeric=True),
    "shortlog": Rule(
        # shortlog's own --committer is a switch (group by committer), not log's --committer=PATTERN.
        _GIT_REVS.replace(" --committer=", "")
        + " -n --numbered -s --summary -e --email --committer -w=? --group=",
        check=_check_git_shortlog,
    ),
    "branch": Rule(
        "-a --all -r --remotes -v --verbose -l --list --show-current --contains=? --no-contains=?"
        " --merged=? --no-merged=? --points-at= --sort= --format= --color=? --no-color --column=?"
        " --no-column --abbrev=? --no-abbrev -i --ignore-case --omit-empty",
        check=_check_git_branch,
    ),
    "stash": Rule(
        bare=False,
        subcommands={
            "list": _GIT_REVIEW,
            "show": Rule(_GIT_DIFF + " --include-untracked --only-untracked", max_operands=1),
        },
    ),
    "worktree": Rule(bare=False, subcommands={"list": Rule("--porcelain -v --verbose -z --expire=", 0)}),
    "remote": Rule("-v --verbose", subcommands={"get-url": Rule("--push --all", 1)}),
    "reflog": Rule(_GIT_LOG, numeric=True, subcommands={"show": _GIT_REVIEW}),
    "rev-parse": Rule(
        "--git-dir --git-common-dir --show-toplevel --show-prefix --show-cdup"
        " --show-superproject-working-tree --is-inside-work-tree --is-inside-git-dir"
        " --is-bare-repository --is-shallow-repository --absolute-git-dir --abbrev-ref=? --short=?"
        " --verify -q --quiet --symbolic --symbolic-full-name --all --branches=? --tags=? --remotes=?"
        " --glob= --exclude= --since= --until= --after= --before= --default= --prefix= --revs-only"
        " --no-revs --flags --no-flags --sq --not --local-env-vars --resolve-git-dir= --git-path="
        " --show-object-format=? --show-ref-format --path-format= --disambiguate="
    ),
    "describe": Rule(
        "--tags --all --long --abbrev=? --always --dirty=? --broken=? --match= --exclude="
        " --first-parent --contains --exact-match --candidates= --debug"
    ),
    "ls-files": Rule(
        "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -u --unmerged -k"
        " --killed -z -t -v -f --full-name --recurse-submodules --abbrev=? --error-unmatch --exclude="
        " -x= --exclude-from= -X= --exclude-per-directory= --exclude-standard --directory"
        " --no-empty-directory --eol --deduplicate --format= --sparse --with-tree="
    ),
    "ls-tree": Rule(
        "-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree"
        " --abbrev=? --format="
    ),
    "blame": Rule(
        "-b --root --show-stats -L= -l -t -S= --reverse -p --porcelain --line-porcelain --incremental"
        " --encoding= --contents= --date= --progress --no-progress -M=? -C=? --ignore-rev="
        " --ignore-revs-file= --color-lines --color-by-age -c -e --show-email -f --show-name -n"
        " --show-number -s -w --abbrev=? --first-parent --minimal --score-debug"
    ),
    "for-each-ref": Rule(
        "--count= --sort= --format= --color=? --shell -s --perl -p --python --tcl --points-at="
        " --merged=? --no-merged=? --contains=? --no-contains=? --ignore-case --omit-empty --exclude="
        " --include-root-refs"
    ),
    "cat-file": Rule("-t -s -e -p --mailmap --use-mailmap --no-mailmap --allow-unknown-type", 2),
    "config": Rule(
        "--get --get-all --get-regexp --get-urlmatch --list -l --show-origin --show-scope --global"
        " --system --local --worktree --type= --bool --int --bool-or-int --path --expiry-date --null -z"
        " --name-only --includes --no-includes --default= --fixed-value --all --regexp --value= --url=",
        check=_check_git_config,
    ),
    "show-ref": Rule("--head --branches --heads --tags -d --dereference -s --hash=? --abbrev=? --verify"
                     " -q --quiet --exists"),
    "merge-base": Rule("-a --all --octopus --independent --is-ancestor --fork-point"),
    "name-rev": Rule("--tags --refs= --exclude= --all --name-only --no-undefined --always"),
    "grep": Rule(
        "-i --ignore-case -I -w --word-regexp -v --invert-match -h -H --full-name -E --extended-regexp"
        " -G --basic-regexp -P --perl-regexp -F --fixed-strings -n --line-number --column -l"
        " --files-with-matches --name-only -L --files-without-match -z --null -o --only-matching -c"
        " --count --color=? --no-color --break --heading -p --show-function -W --function-context -A= -B="
        " -C= --after-context= --before-context= --context= -e= -f= --and --or --not --all-match -q"
        " --quiet --cached --untracked --no-index --no-exclude-standard --exclude-standard"
        " --recurse-submodules --max-depth= -r --recursive --no-recursive -a --text --threads= -m="
        " --max-count=",
        numeric=True,
    ),
    "count-objects": Rule("-v --verbose -H --human-readable", 0),
    "check-ignore": Rule("-q --quiet -v --verbose -n --non-matching --no-index"),
    "hash-object": Rule("-t= --path= --no-filters --literally"),  # no -w (writes), no --stdin
    "symbolic-ref": Rule("-q --quiet --short --no-recurse", 1),  # two operands would set the ref
    "cherry": Rule("-v --abbrev=?", 3),
    "var": Rule("-l", 1),
    "version": Rule("--build-options", 0),
}

_SYSTEMCTL = (
    "--no-pager --user --system -l --full -a --all -q --quiet -n= --lines= -t= --type= --state= -o="
    " --plain --no-legend -r --recursive -p= --property= --value"
)
_DOCKER_PS = Rule(
    "-a --all -q --quiet -s --size -n= --last= -l --latest --no-trunc --format= -f= --filter=", 0
)
_DOCKER_IMAGES = Rule("-a --all -q --quiet --digests --no-trunc --format= -f= --filter=", 1)
# No --kubeconfig: a kubeconfig can name an `exec` credential plugin, so choosing the file runs a program.
_KUBECTL = "-n= --namespace= --context= --cluster="

_BLIND = Rule(None)
_TABLE: dict[str, Rule] = {
    # Argument-blind: no option or operand of these writes, runs a program or never ends.
    **{name: _BLIND for name in (
        "ls cat head wc stat du df ps pwd whoami id uname arch nproc locale getconf uptime whereis"
        " printenv echo true false test [ grep egrep fgrep jq diff cmp comm cut column nl rev tr tac"
        " paste basename dirname realpath readlink md5sum sha1sum sha256sum sha512sum cksum sw_vers"
    ).split()},
    "printf": Rule(None, check=_check_printf),
    "env": Rule("-0 --null", 0, posix=True),
    "command": Rule("-p -v -V", check=_check_command),
    "type": Rule("-a -f -p -P -t"),
    "which": Rule("-a -s"),
    "hostname": Rule(
        "-a --alias -A --all-fqdns -d --domain -f --fqdn --long -i --ip-address -I --all-ip-addresses"
        " -s --short -y --yp --nis -V --version -h --help", 0,
    ),
    "date": Rule(
        "-d= --date= -f= --file= -I=? --iso-8601=? -r= --reference= -R --rfc-email --rfc-3339= -u"
        " --utc --universal --debug --resolution",
        1, check=_check_date,
    ),
    "tail": Rule(
        "-n= --lines= -c= --bytes= -q --quiet --silent -v --verbose -z --zero-terminated",
        numeric=True, check=_check_tail,
    ),
    "sort": Rule(
        "-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g --general-numeric-sort"
        " -h --human-numeric-sort -i --ignore-nonprinting -M --month-sort -n --numeric-sort -R"
        " --random-sort --random-source= -r --reverse -V --version-sort --sort= -c -C --check=? -k="
        " --key= -m --merge -s --stable -S= --buffer-size= -t= --field-separator= -u --unique -z"
        " --zero-terminated --parallel= --batch-size= --files0-from= --debug"
    ),
    "uniq": Rule(
        "-c --count -d --repeated -D --all-repeated=? -f= --skip-fields= -i --ignore-case -s="
        " --skip-chars= -u --unique -w= --check-chars= -z --zero-terminated --group=?",
        1, numeric=True,
    ),
    "sed": Rule(
        "-n --quiet --silent -e= --expression= -E -r --regexp-extended -s --separate -u --unbuffered -z"
        " --null-data -l= --line-length= --posix --debug --sandbox",
        check=_check_sed,
    ),
    **{name: Rule("-F= --field-separator= -v= --assign=", posix=True, check=_check_awk)
       for name in ("awk", "gawk", "mawk", "nawk")},
    "find": Rule(words=_find_words),
    "tree": Rule(
        "-a -d -l -f -x -L= -P= -I= --gitignore --gitfile= --ignore-case --matchdirs --metafirst --prune"
        " --info --infofile= --noreport --charset= --filelimit= --dirsfirst --filesfirst -q -N -Q -p -u"
        " -g -s -h --si --du -D --timefmt= -F --inodes --device -v -t -c -U -r --sort= -i -A -S -n -C -J"
        " -X --version --help",
        getopt=False,
    ),
    "file": Rule(
        "-b --brief -c --checking-printout -E -e= --exclude= --exclude-quiet= -F= --separator= -f="
        " --files-from= -h --no-dereference -i --mime --mime-type --mime-encoding -k --keep-going -l"
        " --list -L --dereference -m= --magic-file= -N --no-pad -n --no-buffer -0 --print0"
        " -P= --parameter= -r --raw -s --special-files -z --uncompress -Z"
        " --uncompress-noreport --extension --apple -d -v --version --help"
    ),
    "rg": Rule(
        "-i --ignore-case -s --case-sensitive -S --smart-case -w --word-regexp -x --line-regexp -v"
        " --invert-match -n --line-number -N --no-line-number -l --files-with-matches"
        " --files-without-match -c --count --count-matches -C= --context= -A= --after-context= -B="
        " --before-context= -m= --max-count= -g= --glob= --iglob= -t= --type= -T= --type-not= -F"
        " --fixed-strings -e= --regexp= -f= --file= -u --unrestricted --hidden --no-ignore"
        " --no-ignore-vcs -L --follow --files --json --heading --no-heading --color= --column -d="
        " --max-depth= --sort= --sortr= -o --only-matching -r= --replace= -P --pcre2 -U --multiline"
        " --multiline-dotall --stats -q --quiet --trim --vimgrep -0 --null -a --text --type-list"
        " --max-filesize= -p --pretty -H --with-filename -I --no-filename --no-messages --passthru -j="
        " --threads= -M= --max-columns= --max-columns-preview -E= --encoding= --ignore-file="
        " --no-config -b --byte-offset --engine="
    ),
    "free": Rule(
        "-b -k -m -g --bytes --kilo --mega --giga --tera --peta --kibi --mebi --gibi --tebi --pebi -h"
        " --human --si -l --lohi -L --line -t --total -v --committed -w --wide -V --version --help", 0,
    ),
    "pgrep": Rule(
        "-l --list-name -a --list-full -f --full -x --exact -n --newest -o --oldest -c --count -d="
        " --delimiter= -i --ignore-case -v --inverse -w --lightweight -u= --euid= -U= --uid= -g="
        " --pgroup= -G= --group= -P= --parent= -s= --session= -t= --terminal= -r= --runstates= -A"
        " --ignore-ancestors -O= --older= --ns= --nslist= -F= --pidfile= --env= --cgroup="
    ),
    "lsof": Rule(
        "-a -b -c= -d= -g=? -i=? -l -n -N -O -P -p= -R -s=? -t -u= -U -V -w -x=? -F=? -K=? -M -S=? -T=?"
        " -X -E -h -o=?",
        plus="+D= +d=",
    ),
    "ss": Rule(
        "-a --all -l --listening -t --tcp -u --udp -x --unix -w --raw -n --numeric -r --resolve -p"
        " --processes -e --extended -m --memory -o --options -i --info -s --summary -4 --ipv4 -6 --ipv6"
        " -0 --packet -H --no-header -O --oneline -Z --context -z --contexts -b --bpf -M --mptcp -S"
        " --sctp --tipc -f= --family= -A= --query= --socket="
    ),
    "netstat": Rule(
        "-a --all -t --tcp -u --udp -w --raw -x --unix -l --listening -n --numeric --numeric-hosts"
        " --numeric-ports --numeric-users -p --program -e --extend -o --timers -r --route -i"
        " --interfaces -s --statistics -g --groups -M --masquerade -W --wide -v --verbose -4 -6 -A="
        " --protocol= -N --symbolic -C -F -T --notrim", 0,
    ),
    "ping": Rule("-c= -w= -W= -n -q -4 -6", 1, check=_check_ping),
    "git": Rule(
        "-C= --no-pager -P --no-optional-locks --literal-pathspecs --glob-pathspecs --noglob-pathspecs"
        " --icase-pathspecs --no-replace-objects --version",
        subcommands=_GIT,
    ),
    "docker": Rule(bare=False, subcommands={
        "ps": _DOCKER_PS,
        "images": _DOCKER_IMAGES,
        "container": Rule(bare=False, subcommands={"ls": _DOCKER_PS}),
        "image": Rule(bare=False, subcommands={"ls": _DOCKER_IMAGES}),
        "version": Rule("-f= --format=", 0),
        "info": Rule("-f= --format=", 0),
    }),
    "kubectl": Rule(_KUBECTL, bare=False, subcommands={
        "get": Rule(
            _KUBECTL + " -A --all-namespaces -o= -l= --selector= --field-selector= --show-labels -L="
            " --label-columns= --sort-by= --no-headers --chunk-size= --ignore-not-found --show-kind"
            " --subresource="
        ),
        "version": Rule("--client -o=", 0),
    }),
    "systemctl": Rule(_SYSTEMCTL, bare=False, subcommands={
        name: Rule(_SYSTEMCTL) for name in (
            "status is-active is-enabled is-failed list-units list-unit-files list-timers show cat"
        ).split()
    }),
    "journalctl": Rule(
        "-u= --unit= --user-unit= -n=? --lines=? --no-pager -b=? --boot=? -S= --since= -U= --until= -p="
        " --priority= -k --dmesg -o= -r --reverse -x --catalog -q --quiet --user --system -g= --grep="
        " --case-sensitive=? --no-hostname -a --all --utc -t= --identifier= --no-tail -e --pager-end"
        " --list-boots -m --merge"
    ),
}

COMMANDS: Mapping[str, Rule] = _TABLE
"""Every command a glance may use, by name, with its rule (read-only by convention: do not mutate)."""
