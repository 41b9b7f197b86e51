"""The glance allow-list: which commands, subcommands and flags a glance may use (S-9).

Concept. `COMMANDS` maps a command name to a `Rule` (`flower.walls.glance.options`); `flower.walls.glance.judge`
parses a command line with bashlex, reads each simple command's words with the one shared option
parser and refuses everything else. This module holds the table and the checks that need a command's
own meaning (tac's input, ping's peer, ss filters, test's operators); the little languages live in
`sed` and `awk`, git in `git`, paths and addresses in `paths`.

Invariants.
- Allow, never deny: a flag is usable only if its table lists it. Tables list real option names only,
  so no entry can be a GNU/git abbreviation of a dangerous option (a test pins this for `--output`,
  `--force`, `--in-place` and friends).
- A flag that takes a value is listed as taking one (`-k=`); when unsure whether a flag takes a value
  we list it as not taking one, so a following word is judged as a flag or operand rather than skipped.
- Each rule's `order` says whether its command reads options after an operand (getopt_long permutes,
  builtins and `+`-optstrings stop); when the real behaviour depends on the environment, both readings
  are checked.
- `flags=None` (argument-blind) is reserved for commands none of whose options or operands can write,
  run a program or never end; each such entry was checked against the tool's manual.
- No argument reaches bash's arithmetic or subscript evaluation: `test`/`[` refuse `-v`/`-R` (which
  evaluate `NAME[SUBSCRIPT]`) and any word bash would still expand.
- No host name reaches a resolver: ping, lsof `-i @HOST` and ss filters take numeric local addresses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from flower.walls.glance.awk import awk_program_ok, check_awk, check_awk_assignment
from flower.walls.glance.git import GIT_RULE
from flower.walls.glance.jq import check_jq
from flower.walls.glance.options import Args, Refusal, Rule, Word, literal
from flower.walls.glance.paths import numeric_local
from flower.walls.glance.sed import check_sed, sed_script_ok

__all__ = [
    "COMMANDS", "MAX_WIDTH", "NUMERIC_HOSTS", "Args", "Refusal", "Rule", "Word", "awk_program_ok", "check_widths", "literal",
    "option_values", "reads_stdin", "sed_script_ok",
]


def _check_sed(args: Args) -> None:
    scripts = args.values("-e", "--expression")
    if not scripts:
        if not args.operands:
            raise Refusal("script", "sed")
        scripts = [literal(args.operands[0], "sed")]
    check_sed(scripts)


def _check_awk(args: Args) -> None:
    if not args.operands:
        raise Refusal("script", "awk")
    check_awk(literal(args.operands[0], "awk"))
    for value in args.values("-v", "--assign"):
        check_awk_assignment(value)
    for word in args.operands[1:]:
        if re.match(r"[A-Za-z_]\w*=", word.value):
            check_awk_assignment(word.value)  # `awk '{print}' NF=99999999999 f`


def _check_jq(args: Args) -> None:
    if args.operands:
        check_jq(literal(args.operands[0], "jq"))


# --- find: paths, then an expression of allowed tests and the printing actions -------------------

_FIND_NOARG = frozenset(
    "-depth -mount -xdev -follow -noleaf -ignore_readdir_race -noignore_readdir_race -daystart -warn"
    " -nowarn -empty -executable -readable -writable -false -true -nogroup -nouser -prune -print"
    " -print0 -ls -quit -not -and -a -or -o -help --help -version --version ( ) ! ,".split()
)
# No -files0-from: it reads the starting points from a file (or a pipe).
_FIND_ONEARG = frozenset(
    "-maxdepth -mindepth -amin -anewer -atime -cmin -cnewer -ctime -fstype -gid -group -ilname -iname"
    " -inum -ipath -iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm -regex"
    " -regextype -samefile -size -type -uid -used -user -wholename -xtype -printf -context".split()
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
            if token in ("-user", "-group"):
                _numeric_ids(name, token, values[i])
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


def _check_tac(args: Args) -> None:
    if not args.operands or any(w.value == "-" for w in args.operands):
        raise Refusal("endless", "tac of a pipe (it copies its input to a temp file)")


def _check_date(args: Args) -> None:
    if args.operands and not args.operands[0].value.startswith("+"):
        raise Refusal("operands", "date")  # `date MMDDhhmm` sets the clock


def _check_command(args: Args) -> None:
    if not args.has("-v", "-V"):
        raise Refusal("flag", "command (without -v/-V it runs its argument)")


def _check_printf(args: Args) -> None:
    if args.operands and literal(args.operands[0], "printf").startswith("-v"):
        raise Refusal("flag", "printf -v")


def _check_test(args: Args) -> None:
    # bash's test evaluates the subscript of `-v NAME[SUB]` (and `-R`), running any `$(...)` in it; a word
    # bash still expands could become `-v`. Integer comparisons use plain numbers in `test` (not `[[`).
    for word in args.operands:
        if literal(word, args.name) in ("-v", "-R"):
            raise Refusal("flag", f"{args.name} {word.value} (evaluates an array subscript)")


# Short options that take a value, and long options that take one in the next word, of the
# argument-blind readers: a value is never read as a file, an option or the end of options.
_BLIND_VALUES: dict[str, tuple[str, tuple[str, ...]]] = {
    "grep": ("ABCDdefmX", ("--after-context", "--before-context", "--context", "--devices", "--directories",
                           "--regexp", "--file", "--max-count", "--label", "--include", "--exclude",
                           "--exclude-from", "--exclude-dir", "--binary-files", "--group-separator")),
    "head": ("nc", ("--lines", "--bytes")),
    "cut": ("bcdf", ("--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter")),
    "nl": ("bdfhilnsvw", ("--body-numbering", "--section-delimiter", "--footer-numbering",
                          "--header-numbering", "--line-increment", "--join-blank-lines", "--number-format",
                          "--number-separator", "--starting-line-number", "--number-width")),
    "column": ("csoNRHWETlrip", ("--output-width", "--separator", "--output-separator", "--table-columns",
                                "--table-right", "--table-hide", "--table-wrap", "--table-noextreme",
                                "--table-truncate", "--table-name", "--table-order", "--tree",
                                "--tree-id", "--tree-parent")),
    "paste": ("d", ("--delimiters",)),
    "diff": ("CDFILSUWXx", ("--context", "--unified", "--ifdef", "--ignore-matching-lines", "--label",
                            "--starting-file", "--show-function-line", "--exclude", "--exclude-from",
                            "--horizon-lines", "--width", "--tabsize", "--from-file", "--to-file")),
    "cmp": ("iIn", ("--ignore-initial", "--bytes")),
    "du": ("BXdt", ("--exclude-from", "--files0-from", "--block-size", "--max-depth", "--threshold",
                    "--time-style", "--exclude")),
}
_BLIND_VALUES["egrep"] = _BLIND_VALUES["fgrep"] = _BLIND_VALUES["grep"]


def _blind_walk(name: str, words: tuple[Word, ...]) -> tuple[list[tuple[str, str]], list[Word]]:
    """Read an argument-blind reader's words as its getopt_long does (permuting): the (option, value)
    pairs of value-taking options, and the operands."""
    shorts, longs = _BLIND_VALUES.get(name, ("", ()))
    values: list[tuple[str, str]] = []
    operands: list[Word] = []
    i = 0
    while i < len(words):
        word, i = words[i], i + 1
        value = word.value
        if not word.literal or value == "-" or not value.startswith("-"):
            operands.append(word)
        elif value == "--":
            operands += words[i:]
            break
        elif value.startswith("--"):
            flag, eq, attached = value.partition("=")
            taken = [long for long in longs if long.startswith(flag)]
            if taken and not eq:
                values.append((taken[0], words[i].value if i < len(words) else ""))
                i += 1
            elif taken:
                values.append((taken[0], attached))
            else:
                values.append((flag, attached))
        else:
            for j in range(1, len(value)):
                if value[j] in shorts:
                    if j + 1 < len(value):
                        values.append(("-" + value[j], value[j + 1 :]))
                    else:
                        values.append(("-" + value[j], words[i].value if i < len(words) else ""))
                        i += 1
                    break
                values.append(("-" + value[j], ""))
    return values, operands


# The Bash tool's `grep` is ugrep (a function of the CLI's shell snapshot), a system's grep is GNU grep:
# every flag listed means a read-and-print option in both. Absent on purpose: -R/--dereference-recursive
# and ugrep's -S (follow every symlink met, a committed `d -> /` or `pm -> /proc/self/pagemap`), -D/--devices
# (opens FIFOs and devices), -d/--directories, ugrep's --filter (runs a program per file), --pager/--view,
# -Q/--query (an interactive screen), --save-config (writes a file), --config/`---` (reads options from a
# file), --index, --format (widths), and every abbreviation.
_GREP_FLAGS = (
    "-E --extended-regexp -F --fixed-strings -G --basic-regexp -P --perl-regexp -e= --regexp= -f= --file="
    " -i --ignore-case --no-ignore-case -y -v --invert-match -w --word-regexp -x --line-regexp -c --count"
    " -l --files-with-matches -L --files-without-match -o --only-matching -q --quiet --silent -s"
    " --no-messages -b --byte-offset -H --with-filename -h --no-filename -n --line-number -T --initial-tab"
    " -Z --null -z --null-data -a --text -I -U -r --recursive -m= --max-count= -A= --after-context= -B="
    " --before-context= -C= --context= --include= --exclude= --exclude-dir= --exclude-from= -g= --glob="
    " --color=? --colour=? --label= --line-buffered --binary-files= --group-separator="
    " --no-group-separator --version -V --help"
)


MAX_WIDTH = 1000
"""The widest field a glance may ask a formatter for: `printf '%999999999s'` prints a gigabyte."""

_FORMAT_WIDTH = re.compile(r"%[-+ #0'_^:]*(\*|[0-9]+)?(?:\.(\*|[0-9]+))?")
# git's pretty and ref formats take widths in parentheses: `%<(N)`, `%>|(N)`, `%w(N,I,J)`, `%(align:N)`,
# `%(align:width=N)`, `%(contents:lines=N)`.
_PAREN_FORMAT = re.compile(r"%(?:[<>]{1,2}\|?|w)?\(([^)]*)\)")
# Options whose value is a width, a tab stop or a column count a formatter pads to.
_WIDTH_OPTIONS = {
    "ls": ("-w", "--width", "-T", "--tabsize"),
    "nl": ("-w", "--number-width"),
    "column": ("-c", "--output-width"),
    "diff": ("-W", "--width", "--tabsize"),
    "git": ("--expand-tabs", "--stat", "--stat-width", "--stat-name-width", "--stat-graph-width", "--abbrev"),
}
_PROGRAMS = frozenset("awk gawk mawk nawk sed jq".split())
"""Commands whose first operand is a program (its own checker reads it): `NR % 100000` is no format."""


def check_widths(name: str, words: list[Word]) -> None:
    """One width rule, wherever a width or format reaches a formatter: refuse a field width, precision,
    git padding or column count over `MAX_WIDTH` (or taken from an argument, `%*s`), in any word of any
    command (a printf format, `date +FMT`, `du --time-style=+FMT`, `git log --date=format:FMT`,
    `--format=%<(N)`, `%(align:N)`, `ps -o pid:N`) and in the width options of `_WIDTH_OPTIONS`."""
    if name in ("awk", "gawk", "mawk", "nawk"):
        for word in words:  # a printf/sprintf format is a string literal of the program (the awk checker)
            for literal_text in re.findall(r'"((?:[^"\\]|\\.)*)"', word.value):
                check_widths("printf", [Word(literal_text, True)])
        return
    flags = _WIDTH_OPTIONS.get(name, ())
    for k, word in enumerate(words):
        value = word.value
        if word.params and ("%" in value or (k == 0 and name == "printf")):
            raise Refusal("expansion", f"{name} {value} (a format from a parameter)")
        if "%" in value and name not in _PROGRAMS:
            _check_format(name, value)
        if name == "ps" and any(int(n) > MAX_WIDTH for n in re.findall(r":([0-9]+)", value)):
            raise Refusal("endless", f"{name} {value} (a column over {MAX_WIDTH} wide)")
        for flag in flags:
            number = None
            if value == flag and k + 1 < len(words) and not flag.startswith("--"):
                number = words[k + 1].value
            elif value == flag and k + 1 < len(words) and flag in ("--width", "--tabsize", "--output-width"):
                number = words[k + 1].value
            elif value.startswith(flag + "=") or (len(flag) == 2 and value.startswith(flag) and value != flag):
                number = value[len(flag) :].lstrip("=")
            if number is not None and any(int(n) > MAX_WIDTH for n in re.findall(r"[0-9]+", number)):
                raise Refusal("endless", f"{name} {flag} {number} (over {MAX_WIDTH})")
            if number is not None and flag in ("-w", "--width", "-T", "--tabsize", "-c", "--output-width",
                                                "-W", "--number-width") and not number.isdigit():
                raise Refusal("endless", f"{name} {flag} {number} (over {MAX_WIDTH})")


def _check_format(name: str, value: str) -> None:
    for match in _FORMAT_WIDTH.finditer(value):
        for part in match.groups():
            if part == "*" or part and int(part) > MAX_WIDTH:
                raise Refusal("endless", f"{name} {value} (a field over {MAX_WIDTH} wide)")
    for match in _PAREN_FORMAT.finditer(value):
        if any(int(n) > MAX_WIDTH for n in re.findall(r"[0-9]+", match.group(1))):
            raise Refusal("endless", f"{name} {value} (a field over {MAX_WIDTH} wide)")


_STDIN_FILE_FLAGS = frozenset(("-f", "--file", "--exclude-from", "-X", "--from-file", "--to-file"))


def option_values(name: str, words: list[Word], readings: list[Args]) -> list[tuple[str, str]]:
    """Every (option, value) of a command line, read by its rule (or, for the argument-blind readers,
    by `_blind_walk`): the wall looks each value up on disk as a file the command may read."""
    if name in _BLIND_VALUES:
        return [(f, v) for f, v in _blind_walk(name, tuple(words))[0] if v]
    return [(f, v) for args in readings for f, v in args.flags if v and f != "-#"]


_DASH_IS_TEXT = frozenset("echo printf true false test [".split())


def reads_stdin(name: str, words: list[Word], readings: list[Args]) -> None:
    """Refuse a reader whose input would be stdin: no file operand, or a `-` (file or pattern file)."""
    what = f"{name} {' '.join(w.value for w in words)}".strip()
    if name not in _DASH_IS_TEXT and any(w.value == "-" or w.value.endswith("=-") for w in words):
        raise Refusal("stdin", what)  # `file -`, `date -f -`, `git diff --no-index - f`, `--contents=-`
    if name in _BLIND_VALUES and name != "du" or name in ("cat", "rev", "comm", "tr"):  # du's default is `.`
        values, operands = _blind_walk(name, tuple(words))
        if any(v == "-" for f, v in values if f in _STDIN_FILE_FLAGS) or any(w.value == "-" for w in operands):
            raise Refusal("stdin", what)
        count = len(operands)
        if name in ("grep", "egrep", "fgrep"):
            flags = {f for f, _ in values}
            if not flags & {"-e", "-f", "--regexp", "--file"}:
                count -= 1  # the first operand is the pattern
            if count <= 0 and flags & {"-r", "-R", "--recursive", "--dereference-recursive"}:
                return  # a recursive grep with no file searches `.`
        needed = {"tr": 99, "cmp": 2}.get(name, 1)  # tr reads only stdin; `cmp a` compares a with stdin
        if count < needed:
            raise Refusal("stdin", what)
        return
    rule = COMMANDS.get(name)
    if rule is None or not rule.reads or rule.flags is None:
        if name == "git":
            _git_stdin(words, what)
        return
    for args in readings:
        files = list(args.operands)
        if name in ("sed",) and not args.values("-e", "--expression"):
            files = files[1:]
        elif name in ("awk", "gawk", "mawk", "nawk"):
            program = files[0].value if files else ""
            files = [w for w in files[1:] if not re.match(r"[A-Za-z_]\w*=", w.value)]  # var=value operands
            if not files and re.fullmatch(r"\s*BEGIN\s*\{[^{}]*\}\s*", program) and "getline" not in program:
                continue  # a BEGIN-only program reads nothing
        elif name == "jq":
            files = files[1:]
            if args.has("-n", "--null-input") and not (files or re.search(r"\binputs?\b", program_of(args))):
                continue  # with -n only `input`/`inputs` read
        elif name == "rg":
            # Without a path rg searches the working directory: the Bash tool's stdin is not a file or pipe.
            continue
        if not files or any(w.value == "-" for w in files):
            raise Refusal("stdin", what)


def program_of(args: Args) -> str:
    return args.operands[0].value if args.operands else ""


def _git_stdin(words: list[Word], what: str) -> None:
    values = [w.value for w in words]
    for k, value in enumerate(values):
        if value in ("--contents", "-f", "-S", "--ignore-revs-file", "-O") and values[k + 1 : k + 2] == ["-"]:
            raise Refusal("stdin", what)
        if value in ("--contents=-", "-f-", "-S-", "--ignore-revs-file=-", "-O-"):
            raise Refusal("stdin", what)


_PING_LIMITS = {"-c": 10, "-w": 30}


def _check_ping(args: Args) -> None:
    bounded = [f for f, v in args.flags if f in _PING_LIMITS and v and v.isdigit() and 0 < int(v) <= _PING_LIMITS[f]]
    if not bounded:
        raise Refusal("flag", "ping (needs -c N up to 10 or -w SECONDS up to 30)")
    if any(not v.isdigit() or int(v) > 10 for v in args.values("-W")):
        raise Refusal("endless", "ping -W (a wait over 10 seconds)")
    if not args.operands or not numeric_local(literal(args.operands[0], "ping")):
        raise Refusal("network", "ping (only a numeric loopback or private address)")


_LSOF_ADDRESS = re.compile(r"[46]?(?:tcp|udp|TCP|UDP)?(?:@(?P<host>\[[0-9a-fA-F:.]+\]|[^:]+))?(?::[\w,-]+)?")


def _check_lsof(args: Args) -> None:
    if any(value and (not value.isdigit() or int(value) > 30) for value in args.values("-S")):
        raise Refusal("endless", "lsof -S (a wait over 30 seconds)")
    for value in args.values("-i"):
        match = _LSOF_ADDRESS.fullmatch(value)
        if not match or (match.group("host") is not None and not numeric_local(match.group("host"))):
            raise Refusal("network", f"lsof -i {value} (only numeric local addresses)")


_SS_WORDS = frozenset(
    "state exclude dst src dport sport and or not ! ( ) eq ne gt lt ge le == != > < >= <= = all connected"
    " synchronized bucket big established syn-sent syn-recv fin-wait-1 fin-wait-2 time-wait closed"
    " close-wait last-ack listening closing autobound dev".split()
)
_SS_PORT = re.compile(r"\*?:(?:[0-9]+|\*|[a-z][a-z0-9-]*)")
_SS_ADDRESS = re.compile(r"(?P<host>\[[0-9a-fA-F:.]+\]|[0-9.]+)(?:/[0-9]+)?(?::(?:[0-9]+|\*|[a-z][a-z0-9-]*))?")


def _check_ss(args: Args) -> None:
    # An ss filter names hosts that ss resolves; only numeric local addresses, ports and keywords pass.
    # ss joins its operands and splits the filter on blanks, so one quoted word may hold several tokens.
    for word in args.operands:
        for value in literal(word, "ss").split():
            if value in _SS_WORDS or _SS_PORT.fullmatch(value):
                continue
            match = _SS_ADDRESS.fullmatch(value)
            if match and numeric_local(match.group("host").split("/")[0]):
                continue
            raise Refusal("network", f"ss {value} (only numeric local addresses)")


def _numeric_ids(name: str, flag: str, value: str) -> None:
    """A user or group list must be ids: a name is asked of the user database (NSS: LDAP, SSSD ...)."""
    if not all(part.isdigit() for part in value.split(",")):
        raise Refusal("network", f"{name} {flag} {value} (numeric ids only: a name is looked up)")


_PS_IDS = ("-u", "-U", "-g", "-G", "--user", "--User", "--group", "--Group", "U")


def _check_ps(args: Args) -> None:
    words = [literal(w, "ps") if w.literal else w.value for w in args.operands]
    for k, value in enumerate(words):
        flag, eq, attached = value.partition("=")
        if value in _PS_IDS and k + 1 < len(words):
            _numeric_ids("ps", value, words[k + 1])
        elif eq and flag in _PS_IDS:
            _numeric_ids("ps", flag, attached)
        elif value[:2] in ("-u", "-U", "-g", "-G") and len(value) > 2 and value[1] != "-":
            _numeric_ids("ps", value[:2], value[2:])


def _check_pgrep(args: Args) -> None:
    for flag in ("-u", "--euid", "-U", "--uid", "-G", "--group"):
        for value in args.values(flag):
            _numeric_ids("pgrep", flag, value)


def _check_date_value(args: Args) -> None:
    _check_date(args)
    for value in args.values("-d", "--date"):
        if "TZ=" in value:
            raise Refusal("device", f"date -d {value} (TZ= names a file date opens)")


def _check_version(args: Args) -> None:
    if not args.has("-V", "--version"):
        raise Refusal("flag", f"{args.name} (only --version)")


def _check_tar(args: Args) -> None:
    if not args.has("-t", "--list"):
        raise Refusal("flag", "tar without -t (only listing is a glance)")
    archives = args.values("-f", "--file")
    if not archives:
        raise Refusal("stdin", "tar without -f (it would read the tape device or stdin)")
    for archive in archives:
        if ":" in archive:
            raise Refusal("network", f"tar -f {archive} (a host: prefix runs rsh)")


def _check_diff(args: Args) -> None:
    flags = {flag for flag, _ in _blind_walk("diff", args.operands)[0]}
    recursive = "-r" in flags or any(f.startswith("--rec") for f in flags)
    if recursive and not any(f.startswith("--no-d") for f in flags):
        # diff -r follows the symlinks it meets (a committed `p -> /proc/self`): --no-dereference compares links.
        raise Refusal("flag", "diff -r without --no-dereference (it follows symlinks)")


# --- the table ------------------------------------------------------------------------------------
# Flag syntax: `-x` no value, `-x=` a required value, `-x=?` an optional attached value, `--x==` two words.

_SYSTEMCTL = (
    "--no-pager --user --system -l --full -a --all -q --quiet -n= --lines= -t= --type= --state= -o="
    " --plain --no-legend --legend=? -r --recursive -p= --property= --value --failed --show-types"
    " --with-dependencies --reverse --after --before -i --ignore-inhibitors=?"
)
_DOCKER_PS = Rule(
    "-a --all -q --quiet -s --size -n= --last= -l --latest --no-trunc --format= -f= --filter=", 0
)
_DOCKER_IMAGES = Rule("-a --all -q --quiet --digests --no-trunc --format= -f= --filter=", 1)
# No --kubeconfig: a kubeconfig can name an `exec` credential plugin, so choosing the file runs a program.
_KUBECTL = "-n= --namespace= --context= --cluster="

NUMERIC_HOSTS = {"lsof": "-n", "netstat": "-n"}
"""Commands that look up the host name of every address they print unless told not to: the wall runs them
with this flag inserted after the name (`harden_git`), so no listing sends a reverse DNS query."""

_BLIND = Rule(None)
_READS = Rule(None, reads=True)
_SUMS = Rule("-b --binary -t --text -z --zero --tag -l= --length=", reads=True)  # no -c: names come from a file
_GREP = Rule(_GREP_FLAGS, numeric=True, reads=True, globs=True)
_TABLE: dict[str, Rule] = {
    # Argument-blind: no option or operand of these writes, runs a program or never ends (devices are
    # refused everywhere by the judge; `reads` commands open their operands, so `$NAME` is refused there).
    **{name: _BLIND for name in (
        "ls stat du df pwd whoami uname arch nproc locale getconf uptime whereis printenv echo true"
        " false basename dirname realpath readlink sw_vers"
    ).split()},
    "ps": Rule(None, check=_check_ps),
    **{name: _READS for name in "cat head cmp comm cut column nl rev tr paste".split()},
    "diff": Rule(None, reads=True, check=_check_diff),
    **{name: _GREP for name in "grep egrep fgrep".split()},
    **{name: _SUMS for name in "md5sum sha1sum sha256sum sha512sum b2sum".split()},
    "cksum": Rule("--tag --raw --untagged -a= --algorithm= -l= --length= -z --zero --base64", reads=True),
    # Bash builtins read options up to the first operand; `test -v NAME[...]` evaluates the subscript.
    "test": Rule(None, check=_check_test),
    "[": Rule(None, check=_check_test),
    "printf": Rule(None, check=_check_printf),
    "env": Rule("-0 --null", 0, order="stop"),
    "command": Rule("-p -v -V", order="stop", check=_check_command),
    "type": Rule("-a -f -p -P -t", order="stop"),
    # Debian's which is a getopts script (stops); GNU which permutes: both readings must pass.
    "which": Rule("-a -s"),
    "wc": Rule("-c --bytes -m --chars -l --lines -L --max-line-length -w --words --total=", reads=True),
    # tac copies a pipe or stdin to a temp file before printing it backwards: files only.
    "tac": Rule("-b --before -r --regex -s= --separator=", reads=True, check=_check_tac),
    "jq": Rule(
        "-n --null-input -r --raw-output -j --join-output -a --ascii-output -s --slurp -c --compact-output -e"
        " --exit-status -S --sort-keys -C --color-output -M --monochrome-output --tab --indent= --arg=="
        " --argjson== --slurpfile== --rawfile== --raw-output0 --seq --stream -R --raw-input --unbuffered"
        " --args --jsonargs",
        order="permute", getopt=False, reads=True, check=_check_jq,
    ),
    # No -a, -A, -d, -f, -i, -y and their long names: each looks the name up (DNS, NIS).
    "hostname": Rule("-I --all-ip-addresses -s --short -V --version -h --help", 0),
    "id": Rule("-u --user -g --group -G --groups -n --name -r --real -z --zero -Z --context -a --help --version", 0),
    # Only the version: `python3` alone would import site (and its .pth files) and read stdin.
    **{name: Rule("-V --version", 0, check=_check_version) for name in ("python3", "python")},
    # Listing only: -t and an archive file that names no remote host (`host:file` runs rsh); no -I, -F,
    # --to-command or --checkpoint-action (they run programs), no -x.
    "tar": Rule(
        "-t --list -v --verbose -z --gzip --gunzip -j --bzip2 -J --xz --zstd -f= --file= --numeric-owner"
        " --utc --full-time -w",
        check=lambda args: _check_tar(args),
    ),
    "date": Rule(
        "-d= --date= -I=? --iso-8601=? -r= --reference= -R --rfc-email --rfc-3339= -u"
        " --utc --universal --debug --resolution",
        1, check=_check_date_value,
    ),
    "tail": Rule(
        "-n= --lines= -c= --bytes= -q --quiet --silent -v --verbose -z --zero-terminated",
        numeric=True, reads=True, check=_check_tail,
    ),
    "sort": Rule(
        "-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g --general-numeric-sort"
        " -h --human-numeric-sort -i --ignore-nonprinting -M --month-sort -n --numeric-sort -R"
        " --random-sort --random-source= -r --reverse -V --version-sort --sort= -c -C --check=? -k="
        " --key= -m --merge -s --stable -t= --field-separator= -u --unique -z"
        " --zero-terminated --parallel= --batch-size= --debug",
        reads=True,
    ),
    "uniq": Rule(
        "-c --count -d --repeated -D --all-repeated=? -f= --skip-fields= -i --ignore-case -s="
        " --skip-chars= -u --unique -w= --check-chars= -z --zero-terminated --group=?",
        1, numeric=True, reads=True,
    ),
    "sed": Rule(
        "-n --quiet --silent -e= --expression= -E -r --regexp-extended -s --separate -u --unbuffered -z"
        " --null-data -l= --line-length= --posix --debug --sandbox",
        reads=True, check=_check_sed,
    ),
    # awk's options end at the program (gawk's optstring starts with `+`).
    **{name: Rule("-F= --field-separator= -v= --assign=", order="stop", reads=True, check=_check_awk)
       for name in ("awk", "gawk", "mawk", "nawk")},
    "find": Rule(words=_find_words),
    "tree": Rule(
        "-a -d -f -x -L= -P= -I= --gitignore --gitfile= --ignore-case --matchdirs --metafirst --prune"
        " --info --infofile= --noreport --charset= --filelimit= --dirsfirst --filesfirst -q -N -Q -p -u"
        " -g -s -h --si --du -D --timefmt= -F --inodes --device -v -t -c -U -r --sort= -i -A -S -n -C -J"
        " -X --version --help",
        getopt=False, order="permute",
    ),
    "file": Rule(
        "-b --brief -c --checking-printout -E -e= --exclude= --exclude-quiet= -F= --separator= -f="
        " --files-from= -h --no-dereference -i --mime --mime-type --mime-encoding -k --keep-going -l"
        " --list -L --dereference -m= --magic-file= -N --no-pad -n --no-buffer -0 --print0"
        " -P= --parameter= -r --raw -z --uncompress -Z"
        " --uncompress-noreport --extension --apple -d -v --version --help"
    ),
    "rg": Rule(
        "-i --ignore-case -s --case-sensitive -S --smart-case -w --word-regexp -x --line-regexp -v"
        " --invert-match -n --line-number -N --no-line-number -l --files-with-matches"
        " --files-without-match -c --count --count-matches -C= --context= -A= --after-context= -B="
        " --before-context= -m= --max-count= -g= --glob= --iglob= -t= --type= -T= --type-not= -F"
        " --fixed-strings -e= --regexp= -f= --file= -u --unrestricted --hidden --no-ignore"
        " --no-ignore-vcs --files --json --heading --no-heading --color= --column -d="
        " --max-depth= --sort= --sortr= -o --only-matching -r= --replace= -P --pcre2 -U --multiline"
        " --multiline-dotall --stats -q --quiet --trim --vimgrep -0 --null -a --text --type-list"
        " --max-filesize= -p --pretty -H --with-filename -I --no-filename --no-messages --passthru -j="
        " --threads= -M= --max-columns= --max-columns-preview -E= --encoding= --ignore-file="
        " --no-config -b --byte-offset --engine=",
        order="permute", reads=True,
    ),
    "free": Rule(
        "-b -k -m -g --bytes --kilo --mega --giga --tera --peta --kibi --mebi --gibi --tebi --pebi -h"
        " --human --si -l --lohi -L --line -t --total -v --committed -w --wide -V --version --help", 0,
    ),
    "pgrep": Rule(
        "-l --list-name -a --list-full -f --full -x --exact -n --newest -o --oldest -c --count -d="
        " --delimiter= -i --ignore-case -v --inverse -w --lightweight -u= --euid= -U= --uid= -g="
        " --pgroup= -G= --group= -P= --parent= -s= --session= -t= --terminal= -r= --runstates= -A"
        " --ignore-ancestors -O= --older= --ns= --nslist= -F= --pidfile= --env= --cgroup=",
        check=_check_pgrep,
    ),
    "lsof": Rule(
        "-a -b -c= -d= -g=? -i=? -l -n -N -O -P -p= -R -s=? -t -u= -U -V -w -x=? -F=? -K=? -M -S=? -T=?"
        " -X -E -h -o=?",
        plus="+D= +d=", order="stop", optional_next=True, check=_check_lsof,
    ),
    "ss": Rule(
        "-a --all -l --listening -t --tcp -u --udp -x --unix -w --raw -n --numeric -p"
        " --processes -e --extended -m --memory -o --options -i --info -s --summary -4 --ipv4 -6 --ipv6"
        " -0 --packet -H --no-header -O --oneline -Z --context -z --contexts -b --bpf -M --mptcp -S"
        " --sctp --tipc -f= --family= -A= --query= --socket=",
        check=_check_ss,
    ),
    "netstat": Rule(
        "-a --all -t --tcp -u --udp -w --raw -x --unix -l --listening -n --numeric --numeric-hosts"
        " --numeric-ports --numeric-users -p --program -e --extend -o --timers -r --route -i"
        " --interfaces -s --statistics -g --groups -M --masquerade -W --wide -v --verbose -4 -6 -A="
        " --protocol= -N --symbolic -C -F -T --notrim", 0,
    ),
    "ping": Rule("-c= -w= -W= -n -q -4 -6", 1, check=_check_ping),
    "git": GIT_RULE,
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
