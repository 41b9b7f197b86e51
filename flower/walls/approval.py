"""Approval rules: a matching tool call waits for a human's yes or no (L-15).

`AgentSpec(approve=...)`, `coordinator(..., approve=...)` and `worker(..., approve=...)` take rules; a call that
one of them matches becomes a question on the run's human channel (`flower asks`, `flower answer RUN QID
yes|no [reason]`), and the call runs only after a yes. A rule is

- a tool name (`"Write"`, `"mcp__github__create_pr"`, `"mcp__github"` for every tool of a server),
- a scoped rule in the Claude Code CLI's permission syntax: `"Bash(git push:*)"` (a command that starts with
  those words), `"Bash(npm test)"` (exactly that command), `"Bash(git * --force)"` (a glob over the command),
  `"Edit(src/**)"`, `"Write(/etc/*)"` (a path glob; no `/` matches the file name anywhere), `"WebFetch(domain:
  example.com)"`,
- or a predicate `f(tool_name, tool_input) -> bool`.

Invariants:
- `parse_rule` is the one reader of the rule syntax; a rule it cannot read is a ConfigError naming it.
- Bash commands are matched by parsing them (bashlex, as the glance does), never by splitting strings: every
  simple command of a list, pipeline, subshell, function body, loop, `$(...)`, backticks and `<(...)` is
  looked at, and `bash -c` / `sh -c` / `eval` strings are parsed in turn. A compound command needs approval
  when any part matches (`true && git push` matches `Bash(git push:*)`).
- Matching errs towards asking: a program word that is computed (`$G push`, `"$(which git)" push`), a word
  where the rule expects one that is computed (`git $CMD`), a command the parser cannot read, a predicate
  that raises, the rule's program named in an argument (`alias g=git`, `ln -s /usr/bin/git g`, `sudo git`),
  and a string argument that reads as a matching command (`ssh host 'git push'`, `env -S 'git push'`, and
  so also `echo 'git push'`), all count as a match. Options and what may be their arguments are skipped between the rule's
  words (`git -C repo push`, `git push --force origin`), and the program is found behind wrappers and
  assignments (`FOO=1 env sudo /usr/bin/git push`).
- What a program does by itself is not seen: a git alias or a script that pushes. A rule reads the command line.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher

from flower import texts
from flower.errors import ConfigError
from flower.walls.glance.options import Refusal
from flower.walls.glance.words import word as shell_word

__all__ = [
    "APPROVE_MARK",
    "Approver",
    "Call",
    "Decision",
    "Predicate",
    "Rule",
    "approval_guard",
    "approval_key",
    "bash_matches",
    "check_rules",
    "mark_approve",
    "matching_rule",
    "parse_rule",
    "parse_verdict",
    "worker_rules",
]

Predicate = Callable[[str, Mapping[str, Any]], bool]
APPROVE_MARK = "_flower_approve"  # an instance attribute, not a dataclass field: the SDK never sends it to the CLI
PATH_TOOLS = {"Read": "file_path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
              "NotebookEdit": "notebook_path", "NotebookRead": "notebook_path", "Glob": "path", "Grep": "path"}
"""The tools whose scoped rule is a path glob, and the input field holding the path."""
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
_TOOL = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
YES = frozenset({"yes", "y", "approve", "approved", "allow", "ok"})
NO = frozenset({"no", "n", "deny", "denied", "reject"})


@dataclass(frozen=True)
class Rule:
    """One approval rule: a tool, and what of its input it covers (None: every call)."""

    text: str
    """The rule as written (a predicate's name), shown in the question."""
    tool: str = ""
    content: str | None = None
    predicate: Predicate | None = None


def parse_rule(rule: str | Predicate | Rule) -> Rule:
    """A rule from its text (`Tool`, `Tool(content)`) or a predicate; ConfigError naming what is wrong."""
    if isinstance(rule, Rule):
        return rule
    if callable(rule):
        return Rule(getattr(rule, "__name__", None) or repr(rule)[:60], predicate=rule)
    if not isinstance(rule, str) or not rule.strip():
        raise ConfigError(f"approval rule {rule!r} must be a tool name, a rule like 'Bash(git push:*)' or a "
                          "predicate f(tool_name, tool_input) -> bool")
    text = rule.strip()
    match = re.fullmatch(r"([^()\s]+)\s*(?:\((.*)\))?", text, re.S)
    if match is None:
        raise ConfigError(f"approval rule {text!r} is not Tool or Tool(content), as in 'Bash(git push:*)'")
    tool, content = match.group(1), match.group(2)
    if not _TOOL.fullmatch(tool.removesuffix("__*")):
        raise ConfigError(f"approval rule {text!r}: {tool!r} is not a tool name")
    if content is None:
        return Rule(text, tool.removesuffix("__*") if tool.startswith("mcp__") else tool)
    content = content.strip()
    if not content:
        raise ConfigError(f"approval rule {text!r} has empty parentheses; write {tool!r} for every call")
    if tool == "Bash":
        words = _rule_words(content, text)
        if not words:
            raise ConfigError(f"approval rule {text!r} names no command")
    elif tool == "WebFetch":
        if not content.startswith("domain:") or not content[7:].strip():
            raise ConfigError(f"approval rule {text!r}: WebFetch takes 'domain:HOST', as in WebFetch(domain:x.com)")
    elif tool not in PATH_TOOLS:
        raise ConfigError(f"approval rule {text!r}: a scoped rule is understood for Bash, WebFetch and the file "
                          f"tools ({', '.join(sorted(PATH_TOOLS))}); write {tool!r} for every call")
    return Rule(text, tool, content)


def check_rules(owner: str, value: Any) -> tuple[Rule, ...]:
    """`value` (a list of rules) as parsed rules, or a ConfigError naming `owner`."""
    if value is None:
        return ()
    if isinstance(value, str) or callable(value) or not isinstance(value, (list, tuple, set, frozenset)):
        shown = f"the string {value!r} (write [{value!r}])" if isinstance(value, str) else type(value).__name__
        raise ConfigError(f"{owner}: approve must be a list of rules, not {shown}")
    try:
        return tuple(parse_rule(item) for item in value)
    except ConfigError as exc:
        raise ConfigError(f"{owner}: {exc}") from None


def mark_approve(definition: Any, rules: tuple[Rule, ...]) -> Any:
    """Attach a worker's approval rules to its definition (an AgentDefinition)."""
    object.__setattr__(definition, APPROVE_MARK, rules)
    return definition


def worker_rules(definition: Any) -> tuple[Rule, ...]:
    rules = getattr(definition, APPROVE_MARK, ())
    return rules if isinstance(rules, tuple) else ()


# --- matching ------------------------------------------------------------------------------------


def matching_rule(rules: Sequence[Rule], tool: str, tool_input: Mapping[str, Any], cwd: str = "") -> Rule | None:
    """The first of `rules` that the call matches, or None."""
    for rule in rules:
        if _matches(rule, tool, tool_input, cwd):
            return rule
    return None


def _matches(rule: Rule, tool: str, tool_input: Mapping[str, Any], cwd: str) -> bool:
    if rule.predicate is not None:
        try:
            return bool(rule.predicate(tool, tool_input))
        except Exception:  # a predicate that cannot decide asks: the human decides instead
            return True
    if not _same_tool(rule.tool, tool):
        return False
    if rule.content is None:
        return True
    if tool == "Bash":
        return bash_matches(rule.content, str(tool_input.get("command") or ""))
    if tool == "WebFetch":
        host = (urlsplit(str(tool_input.get("url") or "")).hostname or "").lower()
        want = rule.content[7:].strip().lower()
        return not host or host == want or host.endswith("." + want)
    return _path_matches(rule.content, str(tool_input.get(PATH_TOOLS[tool]) or ""), cwd)


def _same_tool(wanted: str, tool: str) -> bool:
    if wanted == tool or {wanted, tool} == {"Agent", "Task"}:  # the CLI's two names of one tool
        return True
    return wanted.startswith("mcp__") and wanted.count("__") == 1 and tool.startswith(wanted + "__")


def _path_matches(pattern: str, path: str, cwd: str) -> bool:
    if not path:
        return pattern in ("**", "*")
    if pattern.startswith("~/"):
        pattern = os.path.expanduser(pattern)
    full = posixpath.normpath(path if posixpath.isabs(path) else posixpath.join(cwd or "/", path))
    regex = _glob_regex(pattern.removeprefix("./"))
    if "/" not in pattern.rstrip("/"):
        return any(regex.fullmatch(part) for part in full.split("/") if part)
    if pattern.startswith("/"):
        return bool(regex.fullmatch(full))
    base = posixpath.normpath(cwd or "/")
    relative = posixpath.relpath(full, base) if full.startswith(base.rstrip("/") + "/") else full
    return bool(regex.fullmatch(relative) or regex.fullmatch(full))


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out), re.S)


# --- Bash ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pattern:
    words: tuple[str, ...]
    kind: str  # "prefix", "exact" or "glob"


def _rule_words(content: str, text: str) -> list[str]:
    import shlex

    try:
        return shlex.split(content.removesuffix(":*"))
    except ValueError:
        raise ConfigError(f"approval rule {text!r}: the command has an unclosed quote") from None


def _pattern(content: str) -> _Pattern:
    if content.endswith(":*"):
        return _Pattern(tuple(_rule_words(content, content)), "prefix")
    words = _rule_words(content, content)
    if words and words[-1] == "*" and len(words) > 1:
        return _Pattern(tuple(words[:-1]), "prefix" if not any("*" in w for w in words[:-1]) else "glob")
    return _Pattern(tuple(words), "glob" if any("*" in w for w in words) else "exact")


_MAX_DEPTH = 4


def bash_matches(content: str, command: str) -> bool:
    """Whether the Bash `command` needs approval under the rule content `content` (`git push:*`, `npm test`,
    `git * --force`): any simple command in it matches, or it cannot be read."""
    return _command_text_matches(_pattern(content), command, 0)


def _command_text_matches(pattern: _Pattern, command: str, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return True
    try:
        commands = _simple_commands(command, 0)
    except _Unreadable:
        return _textual(pattern, command)
    program = pattern.words[0] if pattern.words else ""
    for words in commands:
        if _command_matches(pattern, words):
            return True
        for value in words[1:]:
            if value is None:
                continue
            if _names_program(value, program):
                return True  # the program named where a command may take it: alias g=git, ln -s /usr/bin/git g
            if any(ch.isspace() for ch in value) and _command_text_matches(pattern, value, depth + 1):
                return True  # a string a program may run: ssh host 'git push', env -S, watch, su -c
    return False


def _names_program(value: str, program: str) -> bool:
    if not program or "*" in program:
        return False
    name = posixpath.basename(program)
    return any(posixpath.basename(part) == name for part in re.split(r"[=:,]", value))


class _Unreadable(Exception):
    """The command (or a string it runs) cannot be parsed: decide on its text."""


Words = list["str | None"]
"""A simple command's words; None for a word whose value is computed when it runs."""


def _simple_commands(command: str, depth: int) -> list[Words]:
    from flower.walls.glance.judge import parse_shell  # its tables are built on first use (~150 ms)

    if depth > _MAX_DEPTH:
        raise _Unreadable
    if not command.strip():
        return []
    try:
        trees = parse_shell(command)
    except Exception:
        raise _Unreadable from None
    found: list[Words] = []
    for tree in trees:
        _walk(tree, command, found, depth)
    return found


def _walk(node: Any, src: str, found: list[Words], depth: int) -> None:
    kind = getattr(node, "kind", "")
    if kind == "command":
        words: Words = []
        for part in node.parts:
            if part.kind == "word":
                words.append(_value(part, src))
        if words:
            found.append(words)
            found.extend(_inner(words, depth))
    for name in ("parts", "list"):
        for child in getattr(node, name, None) or ():
            _walk(child, src, found, depth)
    for name in ("command", "output"):
        child = getattr(node, name, None)
        if child is not None and hasattr(child, "kind"):
            _walk(child, src, found, depth)


def _value(node: Any, src: str) -> str | None:
    try:
        scanned = shell_word(node, src)
    except Refusal:
        return None
    except Exception:
        return None
    return scanned.value if scanned.literal else None


def _inner(words: Words, depth: int) -> list[Words]:
    """The commands of the strings a simple command runs: `bash -c STRING`, `eval WORDS`."""
    found: list[Words] = []
    for i, value in enumerate(words):
        name = posixpath.basename(value) if value is not None else None
        if name == "eval":
            rest = words[i + 1:]
            if any(w is None for w in rest):
                found.append([None])
            else:
                found.extend(_simple_commands(" ".join(w for w in rest if w is not None), depth + 1))
        elif name in SHELLS:
            for j in range(i + 1, len(words)):
                flag = words[j]
                if flag is None or (flag.startswith("-") and not flag.startswith("--") and "c" in flag[1:]):
                    script = words[j + 1] if j + 1 < len(words) else ""
                    if flag is None or script is None:
                        found.append([None])
                    else:
                        found.extend(_simple_commands(script, depth + 1))
                    break
                if not flag.startswith("-"):
                    break
    return found


def _command_matches(pattern: _Pattern, words: Words) -> bool:
    if words and words[0] is None:
        return True  # the program is computed: it could be any
    program = pattern.words[0] if pattern.words else ""
    for i, value in enumerate(words):
        if value is None or not _same_program(value, program):
            continue
        if _rest_matches(pattern, words[i:]) or _defines_alias(words[i:]):
            return True
    return False


_ALIAS = re.compile(r"alias\.", re.IGNORECASE)  # anywhere: erring towards asking


def _defines_alias(words: Words) -> bool:
    """A git command line that defines an alias (`git -c alias.p=push p`, `--config-env=alias.p=V`): its
    subcommand word may stand for any command, so it could be the rule's."""
    return posixpath.basename(words[0] or "") == "git" and any(w is not None and _ALIAS.search(w) for w in words[1:])


def _same_program(value: str, program: str) -> bool:
    if "*" in program:
        return fnmatch.fnmatchcase(posixpath.basename(value), posixpath.basename(program))
    return value == program if "/" in program else posixpath.basename(value) == program


def _rest_matches(pattern: _Pattern, words: Words) -> bool:
    if pattern.kind == "glob":
        if any(w is None for w in words):
            return True
        shown = [posixpath.basename(words[0] or "")] + [w or "" for w in words[1:]]
        return fnmatch.fnmatchcase(" ".join(shown), " ".join(pattern.words)) or \
            fnmatch.fnmatchcase(" ".join(shown), " ".join(pattern.words) + " *")
    rest = words[1:]
    wanted = list(pattern.words[1:])
    if pattern.kind == "exact":
        return len(rest) == len(wanted) and all(w is None or w == x for w, x in zip(rest, wanted))
    return _prefix(wanted, rest)


def _prefix(wanted: list[str], rest: Words) -> bool:
    """The rule's words after the program are found in order among the command's, skipping options and
    what may be their arguments (a word right after a bare option), never an operand that could not be one."""
    options = [w for w in wanted if w.startswith("-")]
    operands = [w for w in wanted if not w.startswith("-")]
    given: list[str] = []
    j, after_option, ended = 0, False, False
    for value in rest:
        if value is None:
            if j < len(operands) or options:
                return True  # a computed word where the rule expects one: it could be it
            continue
        if not ended and value == "--":
            ended, after_option = True, False
            continue
        if not ended and value.startswith("-") and value != "-":
            given.append(value)
            after_option = "=" not in value
            continue
        if j == len(operands):
            continue  # the operands the rule names are found; options may still follow
        if value == operands[j]:
            j += 1
            after_option = False
            continue
        if after_option:
            after_option = False  # perhaps the option's argument
            continue
        return False
    if j < len(operands):
        return False
    return all(_has_option(option, given) for option in options)


def _has_option(option: str, given: list[str]) -> bool:
    if option.startswith("--"):
        return any(g == option or g.startswith(option + "=") for g in given)
    letters = set(option[1:])
    short = {ch for g in given if not g.startswith("--") for ch in g[1:]}
    return letters <= short


def _textual(pattern: _Pattern, command: str) -> bool:
    """A command the parser cannot read: a match when the rule's program appears in its text, quotes and
    backslashes removed, or when the text computes words (`$`, backticks)."""
    plain = re.sub(r"[\\'\"]", "", command)
    program = posixpath.basename(pattern.words[0]) if pattern.words else ""
    if "$" in command or "`" in command:
        return True
    return bool(program) and re.search(r"(?<![\w.-])" + re.escape(program).replace(r"\*", r"\S*") + r"(?![\w.-])",
                                       plain) is not None


# --- the question and the hook --------------------------------------------------------------------


def approval_key(tool: str, tool_input: Mapping[str, Any]) -> str:
    """A stable id of a call's tool and input: a call the model issues again (after a resume) has the same one."""
    blob = json.dumps([tool, tool_input], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_verdict(answer: str) -> tuple[bool | None, str]:
    """An answer to an approval: (True, reason) for yes, (False, reason) for no, (None, text) for neither."""
    text = answer.strip()
    head = re.match(r"([A-Za-z]+)\b[\s,.:;!-]*", text)
    if head is not None and head.group(1).lower() in YES | NO:
        return head.group(1).lower() in YES, text[head.end():].strip()
    return None, text


@dataclass(frozen=True)
class Call:
    """A tool call that needs approval."""

    tool: str
    tool_input: Mapping[str, Any]
    rule: str
    agent: str = ""
    """The subagent type making the call; empty on the main thread."""
    tool_use_id: str = ""
    session: str = ""
    """The session making the call: a resumed session keeps its id, so a decision outlives the process."""


@dataclass(frozen=True)
class Decision:
    """How an approval ended."""

    allowed: bool
    state: str
    """answered, declined or timeout (the channel's states)."""
    reason: str = ""
    qid: str = ""


class Approver(Protocol):
    """Who decides (`flower.human.HumanChannel`): asks and waits, never raises but on cancellation."""

    timeout_s: float | None

    async def approve(self, call: Call) -> Decision: ...


def approval_guard(
    approver: Approver,
    session: Sequence[Rule] = (),
    workers: Mapping[str, Sequence[Rule]] | None = None,
) -> HookMatcher:
    """PreToolUse: a call that a rule matches waits for `approver`; a no or no answer denies it with the reason.

    `session` rules cover every call (the main thread's and every subagent's: a worker's calls go through
    the session's hooks, with its `agent_type`); `workers` rules only the calls of that agent type. A yes
    gives no opinion, so the spec's own permissions and walls still decide; a deny from any hook wins."""
    by_type = {name: tuple(rules) for name, rules in (workers or {}).items() if rules}
    every = tuple(session)

    async def ask(input_data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        tool = str(input_data.get("tool_name") or "")
        tool_input = input_data.get("tool_input")
        args: Mapping[str, Any] = tool_input if isinstance(tool_input, Mapping) else {}
        agent = str(input_data.get("agent_type") or "") if input_data.get("agent_id") else ""
        rules = every + by_type.get(agent, ())
        rule = matching_rule(rules, tool, args, str(input_data.get("cwd") or "")) if rules else None
        if rule is None:
            return {}
        decision = await approver.approve(Call(tool, dict(args), rule.text, agent, tool_use_id or "",
                                               str(input_data.get("session_id") or "")))
        if decision.allowed:
            return {}
        if decision.state == "timeout":
            why = texts.APPROVAL_TIMEOUT.format(rule=rule.text)
        else:
            reason = f" Reason: {decision.reason}." if decision.reason else ""
            why = texts.APPROVAL_DENIED.format(rule=rule.text, reason=reason)
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": why}}

    wait = approver.timeout_s
    seconds = 7 * 24 * 3600.0 if wait is None else max(0.0, float(wait))
    return HookMatcher(matcher=None, hooks=[ask], timeout=seconds + 120, on_failure="block")
