"""What `--model` and `--budget` of `flower run` do to its target, an AgentSpec or a Workflow.

- `--model M` on an AgentSpec replaces the spec's model: the one agent named on the command line runs on
  the model named there. On a Workflow it is the model of every step whose spec names none; a step whose
  spec names a model keeps it, because a workflow that picks a model per step (a cheap judge, a strong
  planner) made that choice on purpose, and `FLOWER_MODEL` or the config file must not undo it silently.
- `--budget USD` is a cap: no query of the run may spend more than USD. It becomes the `max_budget_usd`
  of the AgentSpec, or of every step of the Workflow; a spec whose own cap is lower keeps its own.

The target itself is never changed: a changed copy of each spec and step is returned.
"""

from __future__ import annotations

import dataclasses

from flower.agent.spec import AgentSpec
from flower.flow.step import Parallel, Step
from flower.flow.workflow import Workflow

__all__ = ["spec_with_flags", "target_with_flags", "workflow_with_flags"]


def _cap(own: float | None, budget: float | None) -> float | None:
    if budget is None:
        return own
    return budget if own is None else min(own, budget)


def spec_with_flags(spec: AgentSpec, *, model: str | None, budget: float | None,
                    keep_model: bool = False) -> AgentSpec:
    """`spec` under the flags; `keep_model`: a model the spec names wins over `model` (a workflow step)."""
    changes: dict[str, object] = {}
    if model is not None and not (keep_model and spec.model is not None):
        changes["model"] = model
    cap = _cap(spec.max_budget_usd, budget)
    if cap != spec.max_budget_usd:
        changes["max_budget_usd"] = cap
    return dataclasses.replace(spec, **changes) if changes else spec  # type: ignore[arg-type]


def _step(step: Step, model: str | None, budget: float | None) -> Step:
    spec = spec_with_flags(step.spec, model=model, budget=budget, keep_model=True)
    return step if spec is step.spec else dataclasses.replace(step, spec=spec)


def workflow_with_flags(workflow: Workflow, *, model: str | None, budget: float | None) -> Workflow:
    """`workflow` with every step (parallel members and fan-out steps included) under the flags."""
    if model is None and budget is None:
        return workflow
    steps: list[Step | Parallel] = []
    for item in workflow.steps:
        if isinstance(item, Parallel):
            steps.append(dataclasses.replace(item, steps=tuple(_step(s, model, budget) for s in item.steps)))
        else:
            steps.append(_step(item, model, budget))
    return dataclasses.replace(workflow, steps=steps)


def target_with_flags(value: AgentSpec | Workflow, *, model: str | None, budget: float | None) -> AgentSpec | Workflow:
    """An AgentSpec or a Workflow under the flags, each with its own meaning of `--model`."""
    if isinstance(value, AgentSpec):
        return spec_with_flags(value, model=model, budget=budget)
    return workflow_with_flags(value, model=model, budget=budget)
