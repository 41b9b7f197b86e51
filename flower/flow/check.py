"""`problems(value)`: what can be known about a spec or a workflow without running it (issue #28 item 8).

Each problem is one line naming where it is; an empty list means the target is ready to run. Nothing here
starts a session, spawns the Claude Code CLI or sends a request. Checked, for the spec and for every step's
spec of a workflow:
- every tool name (`tools`, `allowed_tools`, each worker's `tools` and `disallowedTools`) is a tool of the
  bundled CLI (`flower.agent.spec.CLI_TOOLS`, the one list; `mcp__` names and `Tool(rule)` forms by their
  tool part);
- a delegating spec names at least one worker, each worker by a non-empty name with a description and a
  prompt, and `leads` names only its workers;
- the settings a spec and a worker share (model, effort, max_turns, permission_mode) have valid values;
- a step's `output_type` is a pydantic model class or a valid JSON schema.

Building a spec or a step already refuses most of these at the first problem; checking the built objects
again reports every problem, including a field changed after it was built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

from claude_agent_sdk import AgentDefinition

from flower.agent.output import output_schema
from flower.agent.spec import AgentSpec, check_common, check_tools
from flower.errors import FlowerError
from flower.flow.step import Parallel, Step
from flower.flow.workflow import Workflow

__all__ = ["problems", "summary"]


def problems(value: AgentSpec | Workflow) -> list[str]:
    """Every problem of `value` (a spec, or a workflow and each of its steps' specs), one line each."""
    if isinstance(value, AgentSpec):
        return list(_spec(value, f"spec {value.name!r}"))
    found: list[str] = []
    checked: set[int] = set()
    for step in _steps(value):
        where = f"step {step.name!r}"
        if id(step.spec) not in checked:  # a spec shared by several steps is reported once
            checked.add(id(step.spec))
            found += _spec(step.spec, f"{where} (spec {step.spec.name!r})")
        if step.output_type is not None:
            found += _caught(partial(output_schema, step.output_type, f"{where}: output_type"))
    return found


def summary(value: AgentSpec | Workflow) -> str:
    """What was checked, in a few words: `workflow W: 2 steps (1 typed), 1 spec, 2 workers`."""
    if isinstance(value, AgentSpec):
        return f"spec {value.name}, {_count(len(value.agents or {}), 'worker')}"
    steps = list(_steps(value))
    specs = list({id(step.spec): step.spec for step in steps}.values())
    workers = sum(len(spec.agents or {}) for spec in specs)
    typed = sum(1 for step in steps if step.output_type is not None)
    return (f"workflow {value.name}: {_count(len(steps), 'step')} ({typed} typed), {_count(len(specs), 'spec')}, "
            f"{_count(workers, 'worker')}")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _steps(workflow: Workflow) -> Iterator[Step]:
    for item in workflow.steps:
        yield from item.steps if isinstance(item, Parallel) else (item,)


def _caught(check: Callable[[], Any]) -> list[str]:
    """[] when `check()` passes, else its error as one line."""
    try:
        check()
    except FlowerError as exc:
        return [str(exc)]
    return []


def _spec(spec: AgentSpec, where: str) -> Iterator[str]:
    yield from _caught(lambda: check_tools(where, "tools", spec.tools, optional=True))
    yield from _caught(lambda: check_tools(where, "allowed_tools", spec.allowed_tools))
    yield from _caught(lambda: check_common(where, model=spec.model, effort=spec.effort, max_turns=spec.max_turns,
                                            permission_mode=spec.permission_mode))
    agents = spec.agents or {}
    if not isinstance(agents, Mapping):
        yield f"{where}: agents must be a mapping of name -> worker(...), not {type(agents).__name__}"
        return
    if spec.delegate_only and not agents:
        yield f"{where} delegates but names no worker: it can dispatch nothing"
    for lead in spec.leads:
        if lead not in agents:
            yield f"{where}: leads names {lead!r}, which is not one of its workers ({', '.join(agents) or 'none'})"
    for name, agent in agents.items():
        yield from _worker(name, agent, where)


def _worker(name: Any, agent: Any, where: str) -> Iterator[str]:
    if not isinstance(name, str) or not name.strip():
        yield f"{where}: a worker's name must be a non-empty string, not {name!r}"
        return
    owner = f"{where}, worker {name!r}"
    if not isinstance(agent, AgentDefinition):
        yield f"{owner} is a {type(agent).__name__}, not a worker(...) (an AgentDefinition)"
        return
    for field_name in ("description", "prompt"):
        text = getattr(agent, field_name)
        if not isinstance(text, str) or not text.strip():
            yield f"{owner} has no {field_name}: the coordinator chooses by the description, the worker follows the prompt"
    yield from _caught(lambda: check_tools(owner, "tools", agent.tools, optional=True))
    yield from _caught(lambda: check_tools(owner, "disallowedTools", agent.disallowedTools, optional=True))
    effort = agent.effort if not isinstance(agent.effort, int) else None  # the SDK also takes a number
    yield from _caught(lambda: check_common(owner, model=agent.model, effort=effort, max_turns=agent.maxTurns,
                                            permission_mode=agent.permissionMode))

