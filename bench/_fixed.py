"""The fixed part of a coordinator's first main-thread request, part by part (issue #19, S-25).

One coordinator like the endurance bench's (`coordinator("lead", ..., {"runner": worker(..., tools=["Bash",
"Read"])})`) runs one step through the real CLI against `ScriptedAPI`, in the bench's git repository,
twice in the same run: `lean=False` (every tool and switch the CLI offers: the "before") and the default
`lean=True` (the "after"). Its first main request is split into what it carries: each tool definition
(name + description + input_schema, as JSON), the system prompt's blocks (the CLI's preset by its `# `
sections, then flower's appended coordinator rules, instructions and workbench rules), the first user
message's blocks (the CLI's system-reminders, flower's workbench listing, the prompt) and the CLI's
role-system environment message by paragraph. Nothing is hard-coded: both sides are measured here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._repo import make_repo
from bench._task import PROMPT
from flower import texts
from flower.agent.roles import coordinator, worker
from flower.agent.spec import AgentSpec
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text

Parts = dict[str, int]


@dataclass
class FirstRequest:
    """The first main-thread request of one coordinator run, in characters."""

    tools: Parts = field(default_factory=dict)
    """Each tool definition (JSON of the whole entry), by name."""
    system: Parts = field(default_factory=dict)
    """The system prompt's parts: billing header, identity line, preset sections, flower's appended texts."""
    messages: Parts = field(default_factory=dict)
    """The first user message's blocks and the environment message's paragraphs."""
    body: int = 0
    """The whole request body (JSON)."""

    def total(self, part: str) -> int:
        return sum(getattr(self, part).values())


def lead_spec(lean: bool) -> AgentSpec:
    runner = worker("Runs the generators of one work item and reports.", "You run commands.", tools=["Bash", "Read"])
    spec = coordinator("lead", "Goal: work through the backlog.", {"runner": runner})
    spec.lean = lean
    return spec


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _preset_sections(preset: str) -> Parts:
    parts: Parts = {}
    for chunk in re.split(r"\n(?=# )", preset):
        head = chunk.strip().splitlines()[0] if chunk.strip() else ""
        label = "preset " + (head[2:] if head.startswith("# ") else "intro")
        parts[label] = parts.get(label, 0) + len(chunk) + 1
    return parts


def _system_parts(blocks: list[dict[str, Any]]) -> Parts:
    parts: Parts = {}
    texts_ = [str(b.get("text", "")) for b in blocks]
    for label, value in zip(("billing header", "identity line"), texts_[:2]):
        parts[label] = len(value)
    last = "\n".join(texts_[2:])
    start = last.find(texts.COORDINATOR_RULES[:40])
    preset, append = (last[:start], last[start:]) if start >= 0 else (last, "")
    parts.update(_preset_sections(preset))
    if append:
        bench_start = append.find("\n## Workbench\n")
        rules = len(texts.COORDINATOR_RULES)
        parts["flower coordinator rules"] = rules
        parts["flower instructions"] = (bench_start if bench_start >= 0 else len(append)) - rules
        parts["flower workbench rules"] = len(append) - bench_start if bench_start >= 0 else 0
    return parts


ENVIRONMENT = (
    ("# Environment", "CLI environment"), ("You are powered by", "CLI model line"),
    ("The following deferred tools", "CLI deferred-tool listing"), ("The following skills", "CLI skill listing"),
    ("Available agent types", "CLI agent listing"), ("When you launch multiple", "CLI agent listing"),
    ("Today's date", "CLI date line"),
)
"""Paragraph starts of the CLI's role-system message; a paragraph that matches none belongs to the one before."""


def _block_label(block: str) -> str:
    if block.startswith("<system-reminder>"):
        for marker, label in (("# gitStatus", "git status"), ("Attribution", "attribution")):
            if marker in block:
                return f"CLI reminder: {label}"
        return "CLI reminder"
    return "workbench listing" if block.startswith(texts.WORKBENCH_LISTING_HEAD[:20]) else "user text"


def _message_parts(messages: list[dict[str, Any]]) -> Parts:
    parts: Parts = {}
    for message in messages[:2]:
        content = message.get("content")
        blocks = [content] if isinstance(content, str) else [str(b.get("text", "")) for b in content or []]
        for block in blocks:
            if message.get("role") == "system":
                label = "CLI environment message"
                for para in block.split("\n\n"):
                    label = next((name for start, name in ENVIRONMENT if para.startswith(start)), label)
                    parts[label] = parts.get(label, 0) + len(para) + 2
                continue
            label = _block_label(block)
            if label == "workbench listing" and block.endswith(PROMPT):
                parts["prompt"] = len(PROMPT)
                block = block[: -len(PROMPT)]
            parts[label] = parts.get(label, 0) + len(block)
    return parts


def split(body: dict[str, Any]) -> FirstRequest:
    """`body` (a main-thread request) split into its parts."""
    return FirstRequest(
        tools={str(t.get("name")): _chars(t) for t in body.get("tools") or []},
        system=_system_parts(list(body.get("system") or [])),
        messages=_message_parts(list(body.get("messages") or [])),
        body=_chars(body),
    )


async def first_request(root: Path, lean: bool) -> FirstRequest:
    """Run the coordinator one step (one scripted reply) and split its first main request."""
    label = "lean" if lean else "full"
    repo = make_repo(root / label / "repo", tiny=True)
    with ScriptedAPI([text("done")]) as api:
        runtime = Runtime(repo, run_dir=root / label / "runs", env=api.cli_env(root / label / "home"),
                          run_id="fixed")
        result = await runtime.run(lead_spec(lean), PROMPT, step_name="fixed")
        if not result.ok:
            raise RuntimeError(f"the fixed-part run (lean={lean}) failed: {result.error}")
    return split(api.main_requests[0].body)


def listing(parts: Parts, other: Parts | None = None) -> str:
    """`name chars` for each part, largest first; with `other`, the parts only `other` has are marked cut."""
    shown = ", ".join(f"{name} {chars:,}" for name, chars in sorted(parts.items(), key=lambda kv: -kv[1]))
    if other is None:
        return shown
    cut = {name: chars for name, chars in other.items() if name not in parts}
    return shown + ("; left out: " + listing(cut) if cut else "")
