"""Layers behind one seam: the fold keeps each event's hooks in layer order and the dispatch guard first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from claude_agent_sdk import HookMatcher

from flower.agent.compact import CompactPolicy
from flower.agent.spec import AgentSpec
from flower.runtime.layers import Generations, Layer, Part, Spill, TurnStop, Walls, WorkbenchLayer, fold
from flower.workbench.bench import Workbench


async def _stop(input_data, tool_use_id, context):  # type: ignore[no-untyped-def]
    return {}


def _names(part: Part) -> dict[str, list[str]]:
    return {event: [hook.__qualname__.split(".")[0] for m in matchers for hook in m.hooks]
            for event, matchers in (part.hooks or {}).items()}


def test_the_fold_orders_hooks_by_layer_with_one_dispatch_guard_first(tmp_path: Path) -> None:
    wb = Workbench(tmp_path)
    wb.ensure()
    layers: list[Layer] = [WorkbenchLayer(wb), Spill(wb, 4000), Generations(),
                           TurnStop(HookMatcher(matcher=None, hooks=[_stop])), Walls()]
    part = fold(layers, AgentSpec(name="a", instructions="x"))
    assert _names(part) == {
        "PreToolUse": ["dispatch_guard", "approve_subagents"],
        "PostToolUse": ["index_guard", "spill_callback", "_stop"],
        "PostToolUseFailure": ["redispatch_hook"],
    }
    assert part.system == wb.system_append("user") and part.artifacts == wb.artifacts
    assert part.env == CompactPolicy("no_summary").env() != {}
    assert len(part.rewrites) == 1  # the relay line


def test_a_spec_without_workbench_gets_no_workbench_parts(tmp_path: Path) -> None:
    wb = Workbench(tmp_path)
    wb.ensure()
    part = fold([WorkbenchLayer(wb), Spill(wb, 4000), Walls()], AgentSpec(name="a", instructions="x",
                                                                         workbench=False))
    assert _names(part) == {"PreToolUse": ["approve_subagents"], "PostToolUseFailure": ["redispatch_hook"]}
    assert part.system == "" and part.rewrites == () and part.artifacts is None


def test_a_new_layer_is_one_class() -> None:
    @dataclass(frozen=True)
    class Audit(Layer):
        def part(self, spec: AgentSpec) -> Part:
            return Part(system="Audit rules.", env={"AUDIT": "1"})

        def first_message(self, prompt: str) -> str:
            return f"[audit]\n{prompt}"

    part = fold([Audit(), Generations()], AgentSpec(name="a", instructions="x", compact=None))
    assert part.system == "Audit rules." and part.env["AUDIT"] == "1" and len(part.env) > 1
    assert Audit().first_message("go") == "[audit]\ngo" and Generations().first_message("go") == "go"


def test_the_approval_hook_joins_the_walls_only_when_a_spec_or_a_worker_has_rules() -> None:
    from flower.agent.roles import coordinator, worker
    from flower.human.channel import HumanChannel

    plain = fold([Walls()], coordinator("lead", "goal", {"w": worker("works", "You work.")}))
    assert _names(plain)["PreToolUse"] == ["approve_subagents"]  # no rules: exactly as before
    for spec in (coordinator("lead", "goal", {"w": worker("works", "You work.", approve=["Bash"])},
                             channel=HumanChannel()),
                 AgentSpec(name="solo", instructions="x", channel=HumanChannel(), approve=("Write",))):
        part = fold([Walls()], spec)
        assert _names(part)["PreToolUse"] == ["approve_subagents", "approval_guard"]
        (asking,) = [m for m in (part.hooks or {})["PreToolUse"] if m.on_failure == "block"]
        assert asking.timeout == 1800 + 120  # outlasts the channel's wait: the CLI never cuts it short
