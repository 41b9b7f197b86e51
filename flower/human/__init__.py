"""A human who talks to a running agent, a request clarified up front and a result judged at the end
(L-8, L-9, L-10).

- `HumanChannel` (`channel`): the ask and inbox tools of a coordinator (`tools`); its questions and mail
  (`records`); answers and mail from Python, a terminal, or another process or machine through the run's
  mailbox (`mailbox`; `flower asks / answer / say`).
- `Brief`, `Goal`, `Verdict` (`documents`): what a model wrote, parsed by the shared section parser.
- `clarify_step` (`clarify`), `goal_step` and `with_goal` (`judge`): confirm the request, set a checkable goal,
  judge every round with a fresh read-only session. The read-only roles are in `roles`.

This module only re-exports.
"""

from __future__ import annotations

from flower.human.channel import Ask, AskState, HumanChannel, Mail
from flower.human.clarify import ClarifyOutcome, ClarifyStep, clarify_step
from flower.human.documents import Brief, Goal, Verdict, VerdictState
from flower.human.judge import GoalOutcome, GoalStep, Judged, WithGoal, Work, goal_step, with_goal
from flower.human.mailbox import Letter, Mailbox, PostgresMailbox, SqliteMailbox, open_mailbox
from flower.human.roles import clarifier, goal_setter, judge

__all__ = [
    "Ask",
    "AskState",
    "Brief",
    "ClarifyOutcome",
    "ClarifyStep",
    "Goal",
    "GoalOutcome",
    "GoalStep",
    "HumanChannel",
    "Judged",
    "Letter",
    "Mail",
    "Mailbox",
    "PostgresMailbox",
    "SqliteMailbox",
    "Verdict",
    "VerdictState",
    "WithGoal",
    "Work",
    "clarifier",
    "clarify_step",
    "goal_setter",
    "goal_step",
    "judge",
    "open_mailbox",
    "with_goal",
]
