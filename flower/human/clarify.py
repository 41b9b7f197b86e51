"""`clarify_step`: confirm what is wanted before any work starts, and freeze it as a brief (L-9).

The clarifier is a read-only role (`flower.human.roles.clarifier`): it reads, asks the human through the channel
and replies with a brief. It writes nothing itself; the framework parses the reply's four sections and freezes
a complete brief in the workbench notes. An incomplete reply is sent back once more (same session) with the
missing sections named.

Invariants:
- A complete brief on disk skips the step (no model call); delete the file to clarify again.
- Downstream steps get `Brief.prompt_block()`, never the clarifier's raw reply (a clarifier once pasted a whole
  codebase into it); the questions and answers stay in the clarifier's own session and the channel's log.
- An incomplete brief is never written, and what the human added to the brief file (mail through the channel)
  is carried into the brief that replaces it.

`ClarifyStep.run(runtime, request)` is the adapter that runs it over a `Runtime` directly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flower.core import texts
from flower.core.events import OnEvent
from flower.core.spec import AgentSpec
from flower.core.steps import StepResult
from flower.human.channel import HumanChannel
from flower.human.documents import Brief
from flower.human.roles import clarifier

__all__ = ["BRIEF_FILE", "ClarifyOutcome", "ClarifyStep", "clarify_step", "default_path"]

BRIEF_FILE = "brief.md"


def default_path(runtime: Any, filename: str) -> Path:
    """`filename` in the runtime's workbench notes (or its run dir without a workbench)."""
    workbench = getattr(runtime, "workbench", None)
    return Path(workbench.notes if workbench is not None else runtime.run_dir) / filename


@dataclass(frozen=True)
class ClarifyOutcome:
    """What the clarify step left: a brief (complete when ok), where it is, and the sessions' results."""

    brief: Brief
    path: Path
    skipped: bool
    """A complete brief was already on disk; no model was called."""
    results: tuple[StepResult, ...] = ()

    @property
    def ok(self) -> bool:
        return self.brief.complete

    @property
    def prompt_block(self) -> str:
        """What later steps get."""
        return self.brief.prompt_block()


@dataclass
class ClarifyStep:
    """A clarify step; `run(runtime, request)` runs it."""

    channel: HumanChannel | None
    brief_path: Path | None = None
    """Default: `brief.md` in the workbench notes."""
    name: str = "clarify"
    spec: AgentSpec | None = None
    always_ask: bool = False
    retries: int = 1
    """Times an incomplete brief is sent back with its missing sections named."""

    def path(self, runtime: Any) -> Path:
        return self.brief_path if self.brief_path is not None else default_path(runtime, BRIEF_FILE)

    async def run(self, runtime: Any, request: str, *, on_event: OnEvent | None = None) -> ClarifyOutcome:
        path = self.path(runtime)
        existing = Brief.load(path)
        if existing is not None and existing.complete and not self.always_ask:
            return ClarifyOutcome(existing, path, skipped=True)
        spec = self.spec if self.spec is not None else clarifier(self.channel, name=self.name)
        result = await runtime.run(spec, texts.CLARIFY_PROMPT.format(request=request.strip()),
                                   step_name=self.name, on_event=on_event)
        results = [result]
        brief = Brief.parse(result.text)
        for attempt in range(self.retries):
            if brief.complete or not result.session_id:
                break
            missing = ", ".join(brief.missing())
            result = await runtime.run(spec, texts.CLARIFY_MISSING.format(missing=missing), resume=result.session_id,
                                       step_name=f"{self.name}#retry{attempt + 2}", on_event=on_event)
            results.append(result)
            brief = Brief.parse(result.text)
        if brief.complete:
            if existing is not None and existing.additions:  # what the human added before stays in the brief
                brief = replace(brief, additions=existing.additions + brief.additions)
            brief.write(path)
            refresh = getattr(getattr(runtime, "workbench", None), "refresh", None)
            if callable(refresh):
                refresh()
        return ClarifyOutcome(brief, path, skipped=False, results=tuple(results))


def clarify_step(
    channel: HumanChannel | None,
    *,
    brief_path: str | Path | None = None,
    name: str = "clarify",
    spec: AgentSpec | None = None,
    instructions: str = "",
    always_ask: bool = False,
    retries: int = 1,
) -> ClarifyStep:
    """A step that clarifies the request through `channel` and freezes the brief at `brief_path`."""
    if spec is None and instructions:
        spec = clarifier(channel, name=name, instructions=instructions)
    return ClarifyStep(channel, Path(brief_path) if brief_path is not None else None, name, spec, always_ask,
                       retries)
