"""Approval rules (L-15): the rule syntax, and which Bash commands a scoped rule catches, dodges included."""

from __future__ import annotations

from typing import Any

import pytest

from flower.errors import ConfigError
from flower.walls.approval import (
    Rule,
    approval_key,
    bash_matches,
    check_rules,
    matching_rule,
    parse_rule,
    parse_verdict,
)


@pytest.mark.parametrize(("text", "tool", "content"), [
    ("Bash", "Bash", None),
    ("Bash(git push:*)", "Bash", "git push:*"),
    ("  Bash( npm test )  ", "Bash", "npm test"),
    ("Write", "Write", None),
    ("Edit(src/**)", "Edit", "src/**"),
    ("WebFetch(domain:example.com)", "WebFetch", "domain:example.com"),
    ("mcp__github__create_pr", "mcp__github__create_pr", None),
    ("mcp__github__*", "mcp__github", None),
])
def test_a_rule_is_read_into_its_tool_and_content(text: str, tool: str, content: str | None) -> None:
    rule = parse_rule(text)
    assert (rule.tool, rule.content, rule.text) == (tool, content, text.strip())


@pytest.mark.parametrize(("text", "said"), [
    ("", "must be a tool name"),
    ("Bash()", "empty parentheses"),
    ("Bash(git push", "not Tool or Tool(content)"),
    ("Bash('git push:*)", "unclosed quote"),
    ("TodoWrite(x)", "a scoped rule is understood for Bash, WebFetch and the file tools"),
    ("WebFetch(example.com)", "WebFetch takes 'domain:HOST'"),
    ("Bash git push", "not Tool or Tool(content)"),
])
def test_a_bad_rule_is_one_line_naming_it(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_rule(text)
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_rules_must_be_a_list_and_errors_name_the_owner() -> None:
    with pytest.raises(ConfigError, match=r"^worker 'x': approve must be a list of rules, not the string 'Bash'"):
        check_rules("worker 'x'", "Bash")
    with pytest.raises(ConfigError, match=r"^worker 'x': approval rule 'Bash\(\)' has empty parentheses"):
        check_rules("worker 'x'", ["Bash()"])
    assert check_rules("w", None) == ()


PUSH = "git push:*"


@pytest.mark.parametrize("command", [
    "git push",
    "git push origin main",
    "true && git push",
    "echo ok; git push --force",
    "make || git push",
    "git status | cat && git push",
    "FOO=1 git push",
    "/usr/bin/git push",
    "env GIT_TRACE=1 git push",
    "sudo -u me git push",
    "command git push",
    "\\git push",
    "g'i't p\"us\"h",
    "git -C ../repo push",
    "git -c push.default=current push",
    "git --git-dir=.git push",
    "(git push)",
    "{ git push; }",
    "if true; then git push; fi",
    "for r in a b; do git push $r; done",
    "f() { git push; }; f",
    "echo $(git push)",
    "echo `git push`",
    "cat <(git push)",
    "x=$(git push)",
    "bash -c 'git push'",
    "sh -lc \"cd x && git push\"",
    "eval git push",
    "eval 'git push origin'",
    "$GIT push",
    "\"$(which git)\" push",
    "git $SUB origin",
    "git push > /dev/null 2>&1 &",
    "nohup git push &",
    "timeout 60 git push",
    "xargs git push < remotes",
    "find . -maxdepth 0 -exec git push \\;",
    "true &&\n git push",
    "[[ -d .git ]] && git push",
    "alias g=git; g push",
    "ln -s /usr/bin/git ./g && ./g push",
    "hash -p /usr/bin/git g; g push",
    "ssh host 'git push'",
    "env -S 'git push origin'",
    "watch -n 60 \"git push\"",
    "g() { git \"$@\"; }; g push",
    "git $'\\x70ush'",
    "echo 'git push'",  # a string argument that reads as the command: some programs run theirs
    "git commit -m \"don't git push yet\"",  # one the parser cannot read: it names the program
])
def test_a_prefix_rule_catches_every_way_to_run_the_command(command: str) -> None:
    assert bash_matches(PUSH, command), command


@pytest.mark.parametrize("command", [
    "git status",
    "git log --grep push",
    "git commit -m 'ready to push'",
    "grep -rn 'push it' docs",
    "git pushx",
    "gitk push",
    "git fetch && git rebase",
    "legit push",
    "",
    "echo $HOME",
])
def test_a_prefix_rule_lets_other_commands_run(command: str) -> None:
    assert not bash_matches(PUSH, command), command


def test_exact_and_glob_rules() -> None:
    assert bash_matches("npm test", "npm test")
    assert bash_matches("npm test", "cd app && npm test")
    assert not bash_matches("npm test", "npm test --watch")
    assert not bash_matches("npm test", "npm install")
    assert bash_matches("git * --force", "git push --force")
    assert bash_matches("git * --force", "true; git push origin --force")
    assert not bash_matches("git * --force", "git push origin")
    assert bash_matches("git push *", "git push origin main")  # the CLI's newer spelling of a prefix


def test_options_in_a_rule_are_found_among_the_options_in_any_order_or_cluster() -> None:
    assert bash_matches("rm -rf:*", "rm -rf build")
    assert bash_matches("rm -rf:*", "rm -fr build")
    assert bash_matches("rm -rf:*", "rm -r -f build")
    assert bash_matches("rm -rf:*", "rm -v -r --one-file-system -f build")
    assert not bash_matches("rm -rf:*", "rm -r build")
    assert bash_matches("git push --force:*", "git push origin --force")
    assert bash_matches("git push --force:*", "git push --force=yes origin")
    assert not bash_matches("git push --force:*", "git push --force-with-lease")


def test_matching_rule_by_tool_path_domain_and_predicate() -> None:
    rules = check_rules("spec", ["Write(/etc/**)", "Edit(*.lock)", "WebFetch(domain:example.com)",
                                 "mcp__github", "Agent"])
    assert matching_rule(rules, "Write", {"file_path": "/etc/hosts"}) is rules[0]
    assert matching_rule(rules, "Write", {"file_path": "/tmp/hosts"}) is None
    assert matching_rule(rules, "Edit", {"file_path": "/ws/sub/poetry.lock"}) is rules[1]
    assert matching_rule(rules, "Edit", {"file_path": "/ws/sub/lock.py"}) is None
    assert matching_rule(rules, "WebFetch", {"url": "https://docs.example.com/a"}) is rules[2]
    assert matching_rule(rules, "WebFetch", {"url": "https://example.org/"}) is None
    assert matching_rule(rules, "mcp__github__create_pr", {}) is rules[3]
    assert matching_rule(rules, "mcp__githubx__create_pr", {}) is None
    assert matching_rule(rules, "Task", {}) is rules[4]  # the CLI's other name of the Agent tool
    relative = check_rules("spec", ["Edit(src/**)"])
    assert matching_rule(relative, "Edit", {"file_path": "/ws/src/a/b.py"}, cwd="/ws") is relative[0]
    assert matching_rule(relative, "Edit", {"file_path": "/ws/tests/b.py"}, cwd="/ws") is None

    def big_write(tool: str, tool_input: Any) -> bool:
        return tool == "Write" and len(tool_input.get("content", "")) > 10

    def broken(tool: str, tool_input: Any) -> bool:
        raise RuntimeError("oops")

    (rule,) = check_rules("spec", [big_write])
    assert rule.text == "big_write"
    assert matching_rule([rule], "Write", {"content": "x" * 11}) is rule
    assert matching_rule([rule], "Write", {"content": "x"}) is None
    (asks,) = check_rules("spec", [broken])
    assert matching_rule([asks], "Read", {}) is asks  # a predicate that cannot decide asks the human


def test_the_key_of_a_call_is_stable_and_tells_inputs_apart() -> None:
    assert approval_key("Bash", {"command": "git push", "timeout": 5}) == \
        approval_key("Bash", {"timeout": 5, "command": "git push"})
    assert approval_key("Bash", {"command": "git push"}) != approval_key("Bash", {"command": "git push -f"})
    assert len(approval_key("Bash", {})) == 16


@pytest.mark.parametrize(("answer", "verdict"), [
    ("yes", (True, "")),
    ("Yes, go ahead", (True, "go ahead")),
    ("y", (True, "")),
    ("no", (False, "")),
    ("no: the release is frozen", (False, "the release is frozen")),
    ("No - not on Friday", (False, "not on Friday")),
    ("maybe later", (None, "maybe later")),
    ("nope", (None, "nope")),
])
def test_an_answer_reads_as_yes_no_or_neither(answer: str, verdict: tuple[bool | None, str]) -> None:
    assert parse_verdict(answer) == verdict


def test_rule_is_plain_data() -> None:
    assert Rule("Bash", "Bash") == parse_rule("Bash")


@pytest.mark.parametrize("command", ["git -c alias.p=push p origin", "git -cAlias.p=push p",
                                     "git --config-env=alias.p=VAR p", "git -C . -c alias.x='!git push' x"])
def test_a_git_alias_defined_on_the_command_line_asks(command: str) -> None:
    assert bash_matches("git push:*", command)
