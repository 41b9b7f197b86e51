"""Specs and roles fail loudly on wrong argument types and unknown tool names (issue #17 item 13)."""

from __future__ import annotations

from typing import Any

import pytest

from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.errors import ConfigError


def test_a_bare_string_is_not_a_list_of_letters() -> None:
    with pytest.raises(ConfigError, match=r"worker 'Builds': tools must be a list of tool names, not the string 'Bash'"):
        worker("Builds", "You build.", tools="Bash")  # type: ignore[arg-type]


def test_tool_typos_are_errors_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"'Reed', which is not a tool .*did you mean 'Read'"):
        worker("Reads", "You read.", tools=["Reed"])
    with pytest.raises(ConfigError, match=r"AgentSpec 'solo': allowed_tools names 'Bsh'"):
        AgentSpec(name="solo", instructions="x", allowed_tools=["Bsh"])
    spec = AgentSpec(name="solo", instructions="x", allowed_tools=["Bash(git status:*)", "mcp__db__query", "Read"])
    assert spec.allowed_tools[0] == "Bash(git status:*)"


def test_coordinator_names_the_worker_and_what_was_expected() -> None:
    with pytest.raises(ConfigError, match=r"coordinator 'lead': worker 'w' is a str, expected worker\("):
        coordinator("lead", "goal", {"w": "a worker"})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"workers must be a mapping"):
        coordinator("lead", "goal", [worker("d", "p")])  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value", "words"), [
    ("max_turns", "5", "max_turns must be a positive int"),
    ("max_turns", 0, "max_turns must be at least 1"),
    ("effort", "huge", "effort must be one of"),
    ("permission_mode", "yolo", "permission_mode must be one of"),
    ("max_budget_usd", -1.0, "max_budget_usd must be positive"),
    ("env", {"A": 1}, "env must be a mapping of str -> str"),
    ("agents", {"w": {"description": "d"}}, "agent 'w' is a dict, not a worker"),
    ("leads", "w", "leads must be a list"),
    ("glance", "yes", "glance must be True or False"),
    ("model", 5, "model must be a model id"),
    ("fallback_model", ["m"], "fallback_model must be a model id"),
])
def test_spec_fields_are_checked_and_named(field: str, value: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=f"AgentSpec 'solo': {words}"):
        AgentSpec(name="solo", instructions="x", **{field: value})


def test_an_agents_tools_are_checked_too() -> None:
    from claude_agent_sdk import AgentDefinition

    with pytest.raises(ConfigError, match=r"agent 'w'.*tools names 'Grp'"):
        AgentSpec(name="solo", instructions="x", agents={"w": AgentDefinition("d", "p", tools=["Grp"])})


def test_approval_rules_are_read_when_the_spec_is_made_and_need_a_channel_that_asks() -> None:
    from flower.human.channel import HumanChannel
    from flower.walls.approval import Rule, worker_rules

    with pytest.raises(ConfigError, match=r"^worker 'ships': approve names 'Bsh\(git push:\*\)', which is not a tool"):
        worker("ships", "You ship.", approve=["Bsh(git push:*)"])
    with pytest.raises(ConfigError, match=r"^AgentSpec 'solo': approval rule 'Bash\(\)' has empty parentheses"):
        AgentSpec(name="solo", instructions="x", approve=["Bash()"], channel=HumanChannel())  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"^AgentSpec 'solo': it has approval rules, which ask a human: give it a "
                                          r"channel"):
        AgentSpec(name="solo", instructions="x", approve=("Bash(git push:*)",))
    ships = worker("ships", "You ship.", approve=["Bash(git push:*)"])
    assert worker_rules(ships) == (Rule("Bash(git push:*)", "Bash", "git push:*"),)
    assert worker_rules(worker("reads", "You read.")) == ()
    with pytest.raises(ConfigError, match=r"^AgentSpec 'lead': worker 'ships' has approval rules, which ask a human"):
        coordinator("lead", "goal", {"ships": ships})
    spec = coordinator("lead", "goal", {"ships": ships}, channel=HumanChannel(), approve=["Write"])
    assert spec.approve == (Rule("Write", "Write"),)
