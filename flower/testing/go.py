"""Scripting `flower go` offline: the main thread's replies in the order go's sessions ask for them (L-11).

`flower go` runs its sessions one after another on the main thread: the clarifier (its questions, then the
brief), the goal setter, the coordinator's first round of work, a fresh judge after each round, the next
round in the coordinator's own session after a verdict that is not *achieved*, and the bequest. `go_script`
returns those replies in that order; each coder dispatch (`go_dispatch`) names a marker that claims the
coder's own steps in `subagents`.

The replies are written as a model writes them, one `## Heading` per filled section, by the documents go
reads them with (`Brief.prompt_block()`, `Goal.prompt_block()`, the verdict's `VERDICT_SECTIONS`, the
bequest's `SECTIONS`), so a heading here is the heading flower parses: nothing is copied.

Invariant: a script that go cannot follow is a `ScriptError` naming the round when it is built (a judged run
whose round has no verdict, a verdict or a second round without a goal, a round after an achieved one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flower.errors import ScriptError
from flower.go.bequest import SECTIONS, Bequest
from flower.human.channel import HumanChannel
from flower.human.documents import VERDICT_SECTIONS, Brief, Goal, Verdict
from flower.testing.replies import Reply, Step, text, tool_use

__all__ = ["GoRound", "go_dispatch", "go_script"]


@dataclass(frozen=True)
class GoRound:
    """One round of the work step: the coordinator's replies, then the judge's verdict on them."""

    work: Sequence[Step]
    """The coordinator's replies in this round, in order: a `go_dispatch(...)` per coder dispatch, each
    answered by the CLI with the coder's result, then its closing text."""
    verdict: Verdict | None = None
    """The judge's verdict on the round (`Verdict("achieved")`, `Verdict("not_yet", reason, failed)`);
    None only with `--no-goal`, where nothing is judged."""


def go_dispatch(marker: str, task: str) -> Reply:
    """The coordinator dispatching go's coder with `task`; `marker` (put in front of the task) claims the
    coder's thread, so `subagents={marker: [...]}` scripts what the coder does."""
    from flower.go.flow import CODER  # the flow loads the workflow engine: only when a go script is built

    return tool_use("Agent", {"description": task, "prompt": f"{marker}: {task}", "subagent_type": CODER,
                              "run_in_background": False})


def go_script(
    *,
    brief: Brief | None,
    goal: Goal | None = None,
    rounds: Sequence[GoRound] = (),
    bequest: Bequest | None = None,
    asks: Sequence[tuple[str, Sequence[str]]] = (),
) -> list[Step]:
    """The main thread's replies of one `flower go`, in the order its sessions ask for them.

    `asks`: the clarifier's questions `(question, options)`, each answered before the next (on the terminal,
    `flower answer`, or at once with `--timeout 0`); `brief`: its reply (None when the run skips clarify: a
    complete brief on disk, a wake); `goal`: the goal setter's (None with `--no-goal`); `rounds`: the work,
    each judged when there is a goal; `bequest`: the finishing note (None with `--clarify-only`).
    """
    steps: list[Step] = [tool_use(HumanChannel().ask_tool, {"question": q, "options": list(o)}) for q, o in asks]
    if brief is not None:
        steps.append(text(brief.prompt_block()))
    if goal is not None:
        steps.append(text(goal.prompt_block()))
    for number, round_ in enumerate(rounds, 1):
        _check(number, round_, judged=goal is not None, last=number == len(rounds))
        steps.extend(round_.work)
        if round_.verdict is not None:
            steps.append(text(_verdict_note(round_.verdict)))
    if bequest is not None:
        steps.append(text(_bequest_note(bequest)))
    return steps


def _verdict_note(verdict: Verdict) -> str:
    """The judge's reply: its verdict, reason and failed checks under the headings go reads (an unreadable
    verdict, `Verdict()`, says none)."""
    head = {key: names[0] for key, names in VERDICT_SECTIONS.items()}
    parts = [f"## {head['state']}\n{verdict.state.replace('_', ' ')}"] if verdict.state else []
    parts += [f"## {head['reason']}\n{verdict.reason}"] if verdict.reason else []
    parts += [f"## {head['failed']}\n" + "\n".join(f"- {item}" for item in verdict.failed)] if verdict.failed else []
    return "\n\n".join(parts) or "(no verdict)"


def _bequest_note(bequest: Bequest) -> str:
    """The finishing session's note: its filled sections under the headings go reads."""
    filled = [(heading, getattr(bequest, key).strip()) for key, heading in SECTIONS]
    return "\n\n".join(f"## {heading}\n{body}" for heading, body in filled if body)


def _check(number: int, round_: GoRound, *, judged: bool, last: bool) -> None:
    if judged and round_.verdict is None:
        raise ScriptError(f"go round {number} has no verdict: with a goal, the judge answers after every round")
    if not judged and number > 1:
        raise ScriptError(f"go round {number} follows round 1, but without a goal (--no-goal) go works one round")
    if not judged and round_.verdict is not None:
        raise ScriptError(f"go round {number} has a verdict but the script has no goal: without one (--no-goal) "
                          "nothing is judged")
    if round_.verdict is not None and round_.verdict.achieved and not last:
        raise ScriptError(f"go round {number} is achieved, so go runs no round after it")
