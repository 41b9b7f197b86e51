"""Git in a glance: the read-only subcommands, their flags, and the pins that keep git from running a
repository's programs (S-9, issue #16).

Concept. A glance may run git's read-only forms (status, diff, log, show, branch/tag listing, config
get, ...). Reading is not enough to be harmless: a repository's own configuration and attributes can
make plain `git status` or `git diff` run programs (`core.fsmonitor`, `diff.external`, a textconv or
clean/process filter, `gpg.program` through `log.showSignature` or a `%G` format). So:

- The tables below allow only read-only forms; `%G` placeholders (signature checks run gpg) are
  refused, and `git -C DIR` only names a directory below the working directory.
- `GIT_PINS` (global `-c` settings) and each subcommand's `harden` flags (`--no-ext-diff
  --no-textconv`, `--no-filters`) are inserted into every git command of a glance by the wall, through
  the PreToolUse hook's `updatedInput` (`flower.walls.guard`). `filter_pins(directory)` adds an empty
  clean/smudge/process command for each filter driver the repository's config defines (git has no
  switch that turns filters off as a whole; an empty command disables a driver).

Git's subcommands parse options anywhere (parse-options permutes and ignores POSIXLY_CORRECT), so
their rules use `order="permute"`; git's own options end at the subcommand.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import replace

from flower.walls.glance.options import Args, Refusal, Rule, literal
from flower.walls.glance.paths import special_file

__all__ = [
    "GIT", "GIT_PINS", "GIT_RULE", "PROGRAM_KEYS", "check_git_words", "filter_pins", "repo_pins", "split_key",
]

GIT_PINS = (
    "--no-pager --no-optional-locks -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.pager=cat"
    " -c diff.external= -c log.showSignature=false -c gpg.program= -c gpg.ssh.program= -c gpg.x509.program="
    " -c diff.ignoreSubmodules=all -c status.submoduleSummary=false -c protocol.allow=never"
    " -c blame.ignoreRevsFile= -c core.attributesFile=/dev/null -c diff.orderFile=/dev/null"
    " -c mailmap.file=/dev/null -c mailmap.blob= -c log.diffMerges=separate"
    + "".join(f" -c protocol.{name}.allow=never" for name in ("ext", "file", "ssh", "git", "http", "https", "ftp", "ftps"))
)
"""Global settings pinned on every glance git command: no fsmonitor hook, pager, external diff, hook
(an index refresh may fire post-index-change) or signature program runs, the index is not rewritten,
submodules (with configs of their own) are not entered, no transport is allowed (a partial clone would
fetch missing objects, naming them to the remote), no configured side file is read, and `-m` shows merges as
git's default does (`log.diffMerges=remerge` would re-run the merge, and with it a repository's merge driver)."""

_PINNED = "pinned off on every glance (GIT_PINS)"
_PER_REPO = "pinned off for each name the repository defines, as written (repo_pins)"
_HARDENED = "off in every subcommand that diffs (--no-ext-diff --no-textconv)"
_TRANSPORT = "runs only for a transport, and every protocol is pinned to never"
_NOT_RUN = "runs only from a subcommand no glance may run"
PROGRAM_KEYS: dict[str, str] = {
    "core.fsmonitor": _PINNED, "core.pager": _PINNED, "pager.<cmd>": "no pager runs (--no-pager)",
    "core.hookspath": _PINNED, "diff.external": _PINNED, "gpg.program": _PINNED, "gpg.<format>.program": _PINNED,
    "filter.<driver>.clean": _PER_REPO, "filter.<driver>.smudge": _PER_REPO, "filter.<driver>.process": _PER_REPO,
    "merge.<driver>.driver": _PER_REPO,
    "diff.<driver>.command": _HARDENED, "diff.<driver>.textconv": _HARDENED,
    "core.sshcommand": _TRANSPORT, "core.gitproxy": _TRANSPORT, "credential.helper": _TRANSPORT,
    "core.askpass": _TRANSPORT, "uploadpack.packobjectshook": _TRANSPORT, "core.alternaterefscommand": _TRANSPORT,
    "gpg.ssh.defaultkeycommand": "runs only to sign; signature checks are refused (%G) and log.showSignature pinned",
    "core.editor": _NOT_RUN, "sequence.editor": _NOT_RUN, "browser.<tool>.cmd": _NOT_RUN, "help.browser": _NOT_RUN,
    "web.browser": _NOT_RUN, "instaweb.browser": _NOT_RUN, "man.<tool>.cmd": _NOT_RUN, "difftool.<tool>.cmd": _NOT_RUN,
    "mergetool.<tool>.cmd": _NOT_RUN, "guitool.<name>.cmd": _NOT_RUN, "diff.tool": _NOT_RUN, "diff.guitool": _NOT_RUN,
    "merge.tool": _NOT_RUN, "merge.guitool": _NOT_RUN, "sendemail.cccmd": _NOT_RUN, "sendemail.tocmd": _NOT_RUN,
    "alias.*": "a glance runs only the subcommands above, and git never lets an alias shadow one",
}
"""Every key of git's documented configuration (`git help --config`) that names a program git may run, with why
no glance runs it. A test reads the installed git's list, so a git that documents a new one fails it until the key
is placed here."""

_NO_PROGRAMS = "--no-ext-diff --no-textconv --ignore-submodules=all"
"""Every subcommand that may diff gets these: no external diff or textconv program runs, and no
submodule is entered (a submodule's own config, which the pins never see, could run a filter)."""

_FILE_KEYS = re.compile(
    r"core\.excludesfile|core\.attributesfile|diff\.orderfile|mailmap\.file|blame\.ignorerevsfile"
    r"|include\.path|includeif\..*\.path|commit\.template|gpg\.ssh\.allowedsignersfile"
)
"""Configuration keys that name a file git reads: the repository may point them at a device, a FIFO
or a huge file (`blame.ignoreRevsFile` is read before any pin could clear the list)."""

_SCAN = r"^(filter|merge|protocol|remote|extensions|core|diff|mailmap|blame|include|includeif|commit|gpg)\."


def repo_pins(directory: str | os.PathLike[str]) -> str:
    """The `-c` pins for the repository at `directory` (`filter_pins` and every `protocol.NAME.allow`
    it defines); raises `Refusal` when no pin can make a glance there safe: a partial clone (reading a
    missing object fetches it, and the repository chooses the transport), a configured side file
    that is a device, FIFO, socket or huge file, or a configuration that cannot be read in time."""
    try:
        done = subprocess.run(
            ["git", "config", "--null", "--get-regexp", _SCAN],
            cwd=directory, capture_output=True, timeout=5, check=False, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        raise Refusal("repository", "git (its configuration cannot be read)") from None
    if done.returncode not in (0, 1):
        if b"not a git repository" in done.stderr or not done.stderr:
            return ""
        raise Refusal("repository", "git (its configuration cannot be read)")
    try:  # a pin must name a subsection byte for byte, and the command reaches the CLI as text
        listing = done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("repository", "git (its configuration holds names that are not UTF-8)") from None
    entries = [item.partition("\n") for item in listing.split("\0") if item]
    pins: list[str] = []
    filters: set[str] = set()
    drivers: set[str] = set()
    for written, _, value in entries:
        section, name, variable = split_key(written)
        key = written.lower()
        if name is not None and "=" in name and section in ("filter", "merge", "protocol"):
            # `-c filter.A=B.clean=` sets `filter.A` to `B.clean=`: no pin can reach such a subsection
            raise Refusal("repository", f"git ({section} {name!r}: a name with '=' cannot be pinned)")
        if key == "extensions.partialclone" or section == "remote" and variable == "promisor" and (
            value.lower() in ("true", "yes", "on", "1", "")
        ):
            raise Refusal("repository", "git in a partial clone (reading a missing object fetches it)")
        if section == "filter" and name is not None:
            filters.add(name)
        elif section == "merge" and name is not None and variable == "driver":
            drivers.add(name)
        elif section == "protocol" and variable == "allow":
            pins.append("-c " + shlex.quote(f"{written}=never"))
        elif _FILE_KEYS.fullmatch(key) and value:
            path = os.path.join(directory, os.path.expanduser(value))
            if special_file(path, directory) or _size(path) > 2 << 30:
                raise Refusal("repository", f"git ({key} names a device, pipe or huge file)")
    for name in sorted(filters):
        # A subsection may hold any character but newline: quote each setting for the shell.
        pins += ["-c " + shlex.quote(f"filter.{name}.{key}=") for key in ("clean", "smudge", "process")]
        pins.append("-c " + shlex.quote(f"filter.{name}.required=false"))
    for name in sorted(drivers):  # a remerge diff would run it; `true` keeps the file as it is
        pins.append("-c " + shlex.quote(f"merge.{name}.driver=true"))
    return " ".join(pins)


def split_key(key: str) -> tuple[str, str | None, str]:
    """A configuration key as git reads it: (section, subsection, variable). Section and variable are
    case-insensitive (lowered here); a subsection is case-sensitive, so it is kept exactly as written: a pin for
    `filter.evil` leaves `[filter "Evil"]` running."""
    section, _, rest = key.partition(".")
    subsection, dot, variable = rest.rpartition(".")
    return section.lower(), (subsection if dot else None), variable.lower()


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size if os.path.isfile(path) else 0
    except OSError:
        return 0


def filter_pins(directory: str | os.PathLike[str]) -> str:
    """`-c filter.NAME.clean= ...` for every filter driver the repository at `directory` configures
    (and its `protocol.NAME.allow` pins); raises `Refusal` as `repo_pins` does."""
    return repo_pins(directory)


def check_git_words(name: str, values: list[str]) -> None:
    """Refuse `%G` and `%(signature...)` placeholders in any git word: a signature check runs gpg.program."""
    for value in values:
        if "%G" in value or "%(signature" in value:
            raise Refusal("word", f"{name} %G (signature checks run gpg)")


def _check_dir(args: Args) -> None:
    for value in args.values("-C"):
        parts = value.split("/")
        if value.startswith(("/", "~", "$")) or ".." in parts or not value:
            raise Refusal("outside", f"git -C {value}")


# The flags that put git branch in list mode (builtin/branch.c); -v/-a/-r do not: `git branch -v x` creates x.
_BRANCH_LISTS = ("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at")


def _check_git_branch(args: Args) -> None:
    # An operand names a branch to create, unless a list-mode flag makes it a pattern or commit.
    if args.operands and (not args.has(*_BRANCH_LISTS) or args.has("--show-current")):
        raise Refusal("subcommand", "git branch NAME")


# The flags that put git tag in list mode (builtin/tag.c): without one an operand names a tag to create.
_TAG_LISTS = ("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "-n")


def _check_git_tag(args: Args) -> None:
    if args.operands and not args.has(*_TAG_LISTS):
        raise Refusal("subcommand", "git tag NAME")


_CONFIG_MODES = {"--get": 2, "--get-all": 2, "--get-regexp": 2, "--get-urlmatch": 2, "--list": 0, "-l": 0}


def _check_git_config(args: Args) -> None:
    modes = [f for f, _ in args.flags if f in _CONFIG_MODES]
    ops = [literal(w, "git config") for w in args.operands]
    if len(modes) == 1 and len(ops) <= _CONFIG_MODES[modes[0]] and (ops or modes[0] in ("--list", "-l")):
        return
    if not modes and (len(ops) == 1 and ops != ["list"] or ops[:1] == ["get"] and len(ops) == 2 or ops == ["list"]):
        return  # `git config KEY` gets; `get KEY` and `list` are git 2.46's spelling
    raise Refusal("subcommand", "git config (only KEY, --get, --get-all, --get-regexp, --list, get, list)")


_REV_FLAGS = ("--all", "--branches", "--tags", "--remotes", "--glob", "--reflog")


_DIFF_MERGES = frozenset("off none on first-parent 1 separate m combined c dense-combined cc".split())
"""The `--diff-merges` formats that only read: `remerge` (`r`) re-runs each merge, and a merge driver with it."""


def _check_revs(args: Args) -> None:
    for value in args.values("--diff-merges"):
        if value not in _DIFF_MERGES:
            raise Refusal("flag", f"git --diff-merges={value}")


def _check_git_shortlog(args: Args) -> None:
    _check_revs(args)
    revisions = args.operands if args.before_dashdash < 0 else args.operands[: args.before_dashdash]
    if not revisions and not args.has(*_REV_FLAGS):  # `git shortlog -- x` has paths, no revision
        raise Refusal("revision", "git shortlog")


_GIT_DIFF = (
    "-p -u -s --patch --no-patch --raw --patch-with-raw --patch-with-stat --numstat --shortstat"
    " --summary --name-only --name-status --compact-summary --full-index --binary --check --no-renames"
    " --color=? --no-color --color-words=? --word-diff=? --word-diff-regex= --color-moved=?"
    " --no-color-moved -b --ignore-space-change -w --ignore-all-space --ignore-space-at-eol"
    " --ignore-blank-lines --ignore-cr-at-eol -I= --ignore-matching-lines= --minimal --patience"
    " --histogram --diff-algorithm= --indent-heuristic --no-indent-heuristic -R -a --text --exit-code"
    " --quiet --no-ext-diff --no-textconv -W --function-context --stat=? --stat-width= --stat-name-width="
    " --stat-graph-width= --stat-count= --dirstat=? -X=? --cumulative --relative=? --no-relative -U=?"
    " --unified= --inter-hunk-context= -M=? --find-renames=? -C=? --find-copies=? --find-copies-harder"
    " -B=? --break-rewrites=? -D --irreversible-delete -l= --diff-filter= -S= -G= --pickaxe-all"
    " --pickaxe-regex --find-object= -O= --src-prefix= --dst-prefix= --no-prefix --default-prefix"
    " --line-prefix= --abbrev=? --no-abbrev -z"
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
_GIT_REVIEW = Rule(_GIT_LOG, numeric=True, order="permute", check=_check_revs, extra={"harden": _NO_PROGRAMS})

GIT: dict[str, Rule] = {
    "status": Rule(
        # No -v (it prints the staged diff, through textconv) and no --ignore-submodules (pinned to all).
        "-s --short -b --branch --show-stash --porcelain=? --long -u=? --untracked-files=?"
        " --ignored=? -z --column=? --no-column --ahead-behind --no-ahead-behind"
        " --renames --no-renames --find-renames=?",
        extra={"harden": "--ignore-submodules=all"},
    ),
    "diff": Rule(_GIT_DIFF + " --cached --staged --merge-base --no-index", order="permute",
                 extra={"harden": _NO_PROGRAMS}),
    "log": _GIT_REVIEW,
    "show": _GIT_REVIEW,
    "rev-list": Rule(_GIT_LOG + " --count --objects --no-object-names --timestamp", numeric=True, order="permute",
                     check=_check_revs),
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
            "show": Rule(_GIT_DIFF + " --include-untracked --only-untracked", max_operands=1, order="permute",
                         extra={"harden": _NO_PROGRAMS}),
        },
    ),
    "worktree": Rule(bare=False, subcommands={"list": Rule("--porcelain -v --verbose -z --expire=", 0)}),
    "remote": Rule("-v --verbose", subcommands={"get-url": Rule("--push --all", 1)}),
    # `git reflog [show] [REF]`: an operand that names no verb is a ref, read as `show`.
    "reflog": Rule(subcommands={"show": _GIT_REVIEW, "exists": Rule("", 1, order="permute")},
                   fallback="show", verbs=frozenset("show expire delete exists drop list write".split())),
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
        "--tags --all --long --abbrev=? --always --match= --exclude="
        " --first-parent --contains --exact-match --candidates= --debug"
    ),
    "ls-files": Rule(
        "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -u --unmerged -k"
        " --killed -z -t -v -f --full-name --abbrev=? --error-unmatch --exclude="
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
        " --show-number -s -w --abbrev=? --first-parent --minimal --score-debug --no-textconv",
        order="permute", extra={"harden": "--no-textconv"},
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
        " --max-depth= -r --recursive --no-recursive -a --text --threads= -m="
        " --max-count= --no-textconv",
        numeric=True, order="permute", extra={"harden": "--no-textconv"},
    ),
    "count-objects": Rule("-v --verbose -H --human-readable", 0),
    "check-ignore": Rule("-q --quiet -v --verbose -n --non-matching --no-index"),
    # no -w (writes), no --stdin; clean filters are pinned off
    "hash-object": Rule("-t= --path= --no-filters --literally", order="permute", extra={"harden": "--no-filters"}),
    "tag": Rule(
        "-l --list -n=? --sort= --format= --color=? --column=? --no-column --contains=? --no-contains=?"
        " --merged=? --no-merged=? --points-at= -i --ignore-case --omit-empty",
        order="permute", check=_check_git_tag,
    ),
    "symbolic-ref": Rule("-q --quiet --short --no-recurse", 1),  # two operands would set the ref
    "cherry": Rule("-v --abbrev=?", 3),
    "var": Rule("-l", 1),
    "version": Rule("--build-options", 0),
}



_GIT_OPTIONS = (
    "-C= --no-pager -P --no-optional-locks --literal-pathspecs --glob-pathspecs --noglob-pathspecs"
    " --icase-pathspecs --no-replace-objects --version"
)


def _permuting(rule: Rule) -> Rule:
    subs = {name: _permuting(sub) for name, sub in (rule.subcommands or {}).items()} or None
    return replace(rule, order="permute", subcommands=subs)


GIT = {name: _permuting(rule) for name, rule in GIT.items()}

GIT_RULE = Rule(_GIT_OPTIONS, subcommands=GIT, check=_check_dir, order="stop")
"""git itself: its own options end at the subcommand."""
