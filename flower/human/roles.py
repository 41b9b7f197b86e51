"""The read-only roles of the human layer: the clarifier and the judge (L-9, L-10).

Both are walled, not asked: they are non-delegating specs whose `allowed_tools` leave out Write, Edit and
NotebookEdit (and Bash unless they may run commands), so `whitelist_guard` denies those on the main thread by
hook (S-7). The clarifier gets the human channel's tools; the judge never asks (the framework does, when its
verdict calls for a human).
"""

from __future__ import annotations

from flower import texts
from flower.agent.spec import AgentSpec
from flower.human.channel import HumanChannel

__all__ = ["READ_TOOLS", "clarifier", "goal_setter", "judge"]

READ_TOOLS = ("Read", "Glob", "Grep")


def _readonly(name: str, rules: str, instructions: str, *, channel: HumanChannel | None, can_run: bool,
              model: str | None) -> AgentSpec:
    allowed = list(READ_TOOLS) + (["Bash"] if can_run else [])
    servers: dict[str, object] = {}
    env: dict[str, str] = {}
    if channel is not None:
        allowed += list(channel.tool_names)
        servers.update(channel.mcp_servers())
        env.update(channel.tool_env())
    body = rules + ("\n\n" + instructions.strip() if instructions.strip() else "")
    return AgentSpec(name=name, instructions=body, allowed_tools=allowed, model=model, mcp_servers=servers,
                     env=env, permission_mode="default", channel=channel)


def clarifier(channel: HumanChannel | None, *, name: str = "clarify", instructions: str = "",
              model: str | None = None) -> AgentSpec:
    """Reads the workspace, asks through `channel`, replies with a four-section brief; cannot write."""
    return _readonly(name, texts.CLARIFY_RULES, instructions, channel=channel, can_run=False, model=model)


def goal_setter(*, name: str = "goal", instructions: str = "", can_run: bool = False,
                model: str | None = None) -> AgentSpec:
    """Turns a brief into a checkable goal; cannot write."""
    rules = texts.GOAL_RULES.format(can_run=texts.GOAL_CAN_RUN if can_run else "")
    return _readonly(name, rules, instructions, channel=None, can_run=False, model=model)


def judge(*, name: str = "judge", instructions: str = "", can_run: bool = False,
          model: str | None = None) -> AgentSpec:
    """An independent judge of one round: looks at the workspace itself; may run commands with `can_run`."""
    rules = texts.JUDGE_RULES.format(can_run=texts.JUDGE_CAN_RUN if can_run else "")
    return _readonly(name, rules, instructions, channel=None, can_run=can_run, model=model)
