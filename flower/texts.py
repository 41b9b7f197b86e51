"""Every model-facing text flower writes, in one place, in our own words.

These strings are permanent context cost: the coordinator rules ride in every main-thread request,
a denial reason in every denied call's result, an expiry note in every expired result. Keep them short,
read them together, and measure them (`python -m bench` prints their lengths).
"""

from __future__ import annotations

# --- layer one: roles and walls ---------------------------------------------------------------
# S-4: appended to the coordinator's system prompt; rides in every main-thread request.
COORDINATOR_RULES = """\
## How you work: you coordinate, subagents do the work
Your context is the only thing that lasts through this run. Keep it a log of decisions, not of work.
- You cannot write files, edit code or run builds and tests: dispatch one of your workers with the
  Agent tool, naming it in subagent_type. Their trial and error stays in their own transcripts.
- A brief you write stays in your context for good. Put in it only what is specific to this task: the
  goal, the acceptance criteria, the inputs. Do not restate how subagents should report or behave;
  they already know. Dispatch independent tasks in parallel.
- flower adds the workbench's location to every brief (long outputs go to its artifacts folder, the
  reply is the path plus the conclusion): do not repeat it.
- Your Bash runs read-only glance commands only (git status, ls, grep, ...). Their results go stale:
  re-run a glance rather than trust an old one.
- Read a file or an artifact only when a decision needs it. Record each decision and its reason in the
  workbench notes folder via a subagent, one file each. Keep your own messages short."""

# S-1: appended to every worker's prompt.
WORKER_RULES = """\
## How you report
Your process stays in your own transcript; only your final reply goes back, and it must stand alone.
Reply in at most 30 lines: the conclusion; the evidence (key numbers, file:line); the files you wrote;
what you could not verify. Never paste file contents, logs, command output or diffs: write them to a
file and give its path. Do not recount your trial and error. Before you start, look for a reusable
script in the workbench scripts folder; put scripts worth re-running there, first line `# desc: ...`.
The CLI refuses your .md files named report*, summary*, findings* or analysis*: name them by topic
(`parser-findings.md`)."""

# S-3: the reason a main-thread hands-on call is denied with. {where} names the artifacts folder.
DELEGATE_DENIAL = (
    "The coordinator does not do hands-on work. Dispatch a subagent with the Agent tool: state the goal "
    "and the acceptance criteria, and ask it to write long outputs to {where} and reply with the path "
    "and its conclusion."
)
DELEGATE_DENIAL_WHERE = "the workbench artifacts folder"
# Added to the denial of a Bash command that is not a read-only glance.
GLANCE_REFUSAL = " Your Bash only runs read-only glance commands; this one is not one ({why})."
# The {why} of GLANCE_REFUSAL, by cause (flower.walls.glance.judge.describe_refusal); {what} names the culprit.
GLANCE_WHY = {
    "empty": "it is empty",
    "long": "it is too long to check",
    "parse": "the shell parser cannot account for all of it",
    "construct": "it uses {what}",
    "redirect": "`{what}` may write a file; only 2>&1, >/dev/null and < FILE are allowed",
    "command": "`{what}` is not a read-only query",
    "subcommand": "`{what}` is not a read-only query",
    "flag": "`{what}` is not an allowed flag",
    "operands": "`{what}` has too many operands",
    "expansion": "`{what}` would be expanded by the shell, so it cannot be checked",
    "script": "the {what} program could write files or run commands",
    "word": "`{what}` is refused in any glance",
    "device": "`{what}` names a device, pipe or socket that may never end",
    "network": "`{what}` could reach the network",
    "loop": "the {what} program could run without end or eat memory",
    "endless": "`{what}` could run without end or eat memory",
    "revision": "`{what}` needs a revision (without one it reads stdin)",
    "outside": "`{what}` leaves the workspace",
    "background": "a glance may not run in the background (it would outlive the Bash timeout)",
    "repository": "{what} cannot be made safe in this repository",
    "stdin": "`{what}` would read stdin (name a file)",
    "nocwd": "the call has no working directory to check its words against",
    "unconfined": "this machine has no sandbox for glances (install bubblewrap), so `{what}` may not run here",
}

# S-7: a non-delegating spec's hands-on tool that its allowed_tools do not grant.
WHITELIST_DENIAL = (
    "{tool} is not among the tools this agent ({name}) may use; the restriction is deliberate. "
    "Do not look for a way around it: put what you found in your reply."
)

# --- layer two: workbench ---------------------------------------------------------------------
# The stable part of the workbench block (B-3): location and the three rules of S-12. It rides in the
# system prompt of every step, so it must never carry anything that changes while the run goes on.
WORKBENCH_RULES = (
    "## Workbench\n"
    "{root} is this run's workbench. It outlives the session; its INDEX.md says what it holds. "
    "Reuse what is there before writing anew.{external}\n"
    "- Re-runnable checks and reproductions: scripts/, first line `# desc: <one sentence>`.\n"
    "- Any output over 2000 chars (log, data, report, diff): artifacts/; in chat give only its path "
    "and the conclusion.\n"
    "- One decision and its reason per file: notes/."
)
WORKBENCH_EXTERNAL = " It lies outside the repository on purpose: always use its absolute path."

# The changing part (the listing). Cache-stable delivery puts it in the step's first user message.
WORKBENCH_LISTING_HEAD = "## Workbench contents ({root})"
WORKBENCH_LISTING_SECTION = "{name}/ ({count}):"
WORKBENCH_LISTING_ENTRY = "- {path} \N{EM DASH} {desc} ({size})"
WORKBENCH_LISTING_ENTRY_NODESC = "- {path} ({size})"
WORKBENCH_LISTING_EMPTY = "- (empty)"
# Shown in the listing and in INDEX.md alike (both capped, S-11), so it points at the folder itself.
WORKBENCH_LISTING_MORE = "- and {count} more, not listed: see the {name}/ folder itself"

# INDEX.md itself: a file agents read, so its header is model-facing too.
WORKBENCH_INDEX_HEAD = (
    "# Workbench index\n"
    "Regenerated by flower whenever the workbench changes; edits here are lost. "
    "Descriptions come from a `# desc:` line near the top of each file."
)

# B-4: appended by a PreToolUse hook to every Agent prompt, because subagents never see the
# coordinator's system prompt. One line; its length is paid once per dispatch.
WORKBENCH_RELAY = (
    "[Workbench {root}: outputs over 2000 chars go to artifacts/, reply with path + conclusion; "
    "reusable scripts are in scripts/.]"
)

# --- layer three: spill -----------------------------------------------------------------------
# S-15: what replaces a tool output field longer than the spill threshold. The pointer line is
# followed by a newline and the field's first characters.
SPILL_POINTER = "[{chars} chars saved to {path}; Read it with offset/limit or Grep it. It begins:]"

# --- layer four: rewrites on resume -----------------------------------------------------------
# Every note below replaces a tool_result body in the copy a resume feeds back (S-19); the stored
# history keeps the original. All start with FLOWER_NOTE_PREFIX, which is how a second rewrite knows
# a body is already ours and leaves it alone.
FLOWER_NOTE_PREFIX = "[flower: "
# 1. ephemeral expiry. {command}: the call's first line, shortened; {age}: e.g. "12 rounds".
EXPIRED_RESULT = (
    "[flower: expired output of `{command}`, run {age} ago. What it showed may have changed since; "
    "run it again if you need it.]"
)
# 1b. a group of expired calls removed with their results: the last one of the group stays with this note.
# {command}, {age}: of that last call; {removed}: "1 earlier expired call" or "N earlier expired calls";
# {commands}: the first few of them.
EXPIRED_GROUP = (
    "[flower: expired output of `{command}`, run {age} ago; {removed} before it went with their outputs "
    "({commands}). What they showed may have changed since; run again what you need.]"
)
# 2. trim. {path}: absolute path of the spill file inside the workspace.
TRIMMED_RESULT = "[flower: this result ({chars} chars) was moved out of context to {path}; Read or Grep it there if needed.]"
# 4. disconnect residue: replaces the CLI's "STOP what you are doing and wait" text of an interrupted call.
INTERRUPTED_RESULT = (
    "[flower: this call was interrupted before it finished. It may have run in part; that is not a fault. "
    "Check the current state before running it again.]"
)
# 4. disconnect residue: the result of a call that never got one (the session stopped mid-call).
ORPHAN_RESULT = (
    "[flower: no result was recorded for this call; the session stopped before it finished. It may have "
    "run in part or not at all: check the current state before running it again.]"
)


# --- generations and interrupts ---------------------------------------------------------------
# S-22: asked of the same session when its context nears the window. The reply is saved verbatim.
HANDOFF_FOCUS = "\nA person asked for this handoff now. Write the document for this focus of the next session: {goal}\n"
"""Appended to HANDOFF_REQUEST when `Runtime.handoff(goal)` gave a focus."""
HANDOFF_REQUEST = """\
Your context is nearly full. A fresh session will take over this work from a handoff document that you
write now. It sees nothing of this conversation, only the document and the workbench. Do not call tools.
Reply with the document only, in these sections:
## Doing
The goal and where the work stands.
## Decided
Each decision that holds, with why.
## Dead ends
What was tried and failed, so it is not tried again.
## Next
The concrete next steps, in order.
## Scene
Paths, commands, workbench files and ids the next session needs."""
HANDOFF_RETRY = "The document needs non-empty `## Doing` and `## Next` sections. Write it again, complete."

# The first message of a new generation (after the workbench listing, with the cache-stable placement).
HANDOFF_CONTINUE = """\
You are continuing a long-running task in a fresh session (generation {generation}). The previous session
wrote this handoff (also saved at {path}):

{handoff}

Continue from "Next". The workbench still holds every script, artifact and note."""

# Written by the runtime when the session could not write its own handoff (its context overflowed).
HANDOFF_DEGRADED = """\
## Doing
The previous session stopped before it could write a handoff ({reason}). The task was:
{prompt}
## Next
Rebuild the state from the workbench (INDEX.md, notes/, artifacts/) and glance commands, then continue.
## Scene
The previous session's last words: {last}"""

# L-4: the prompt that resumes a session after a transient failure.
RESUME_AFTER_ERROR = (
    "The connection to the model failed and has been restored. Continue the task where you left off; "
    "check the state of any call whose result you did not see before repeating it."
)

# Resumes a session after the runtime waited for a subscription's usage limit to reset (issue #26 item 10).
RESUME_AFTER_LIMIT = (
    "The usage limit that stopped the last request has reset. Continue the task where you left off; "
    "check the state of any call whose result you did not see before repeating it."
)

# L-5: resumes a session after a cooperative interrupt. {message} is the user's, possibly empty.
RESUME_AFTER_INTERRUPT = (
    "The run was interrupted on purpose. A call that was cancelled by the interruption is not a fault: "
    "it may have run in part, so check its effect before repeating it, then continue.{message}"
)

# A refresh (flower.runtime.refresh): the same session resumed, its stale results now one line each.
REFRESH_CONTINUE = (
    "flower resumed this session to drop what went stale: older glance and Read results are one line each "
    "now (run or read them again if you need them). Continue where you left off."
)

# The reason a coordinator's `subagent_type: "fork"` is denied with (flower.walls.guard.fork_guard).
FORK_DENIAL = (
    "The coordinator does not fork itself: a fork would do hands-on work outside every worker's rules. "
    "Dispatch one of your workers by its subagent_type."
)
AGENT_TYPE_DENIAL = "`{kind}` is not one of your workers; dispatch one of them by its subagent_type: {names}."

# S-8, issue #16: an MCP tool the coordinator's spec does not declare read-only (`glance_tools`).
MCP_DENIAL = (
    "{tool} is not available on the coordinator's main thread: only MCP tools its spec declares "
    "read-only run here. Dispatch a subagent with the Agent tool to use it."
)

# --- the human channel (L-8) ------------------------------------------------------------------
# Tool descriptions: they ride in the tool listing of every main-thread request that offers them.
ASK_TOOL = (
    "Ask the human a question and wait for the answer. Only for a decision you cannot make yourself and "
    "that changes the work; give options when there are a few clear choices. The answer may not come: "
    "then decide yourself and record the assumption."
)
INBOX_TOOL = (
    "Read messages the human sent during the run (corrections, new requirements). Returns at once; "
    "call it between pieces of work."
)
# What the model sees as the ask tool's result, by state. {answer}: the human's words.
ASK_ANSWERED = "The human answered: {answer}"
ASK_OVER_BUDGET = (
    "[flower: no more questions in this run. Decide yourself, write the open points and the assumptions "
    "you adopt under Unknowns and assumptions, and continue.]"
)
ASK_TIMEOUT = (
    "[flower: nobody answered in time. Continue on your own judgment; record the question and the "
    "assumption you adopt under Unknowns and assumptions. Do not ask it again and do not wait.]"
)
ASK_DECLINED = (
    "[flower: the human skipped this question.{reason} Decide yourself and record the assumption you "
    "adopt.]"
)
ASK_INVALID = "[flower: the question was empty. Write the question out in full, or decide yourself.]"
# The inbox tool's result.
INBOX_EMPTY = "[flower: the inbox is empty; keep working.]"
INBOX_HEAD = "The human sent {count} message(s) during the run:"
INBOX_SAVED = "They were appended to the brief at {path}; it stays the reference for this requirement."
INBOX_NOT_SAVED = (
    "[flower: these messages are NOT saved anywhere: they live only in this conversation and are lost at "
    "the next step. Write what matters to a note now.]"
)

# --- approvals (L-15) ----------------------------------------------------------------------------
# The question a matching call puts on the human channel. {tool}, {call}: the call; {rule}: the rule.
APPROVAL_QUESTION = "Approve {who}{tool}: {call}  (rule {rule})"
# What the model sees when the call does not run (the CLI prefixes "PreToolUse:<Tool> hook error: ").
APPROVAL_DENIED = (
    "[flower: the human denied this call (it needs approval under {rule}); it did not run.{reason} Do not "
    "try it another way; continue without it or report that it is needed.]"
)
ASK_CUT_SHORT = "the wait was cut short (the turn was interrupted or the step stopped)"
"""The reason a question ends with when its wait is cancelled before anyone answered (a Ctrl-C in `flower run`)."""

APPROVAL_TIMEOUT = (
    "[flower: this call needs a human's approval ({rule}) and nobody answered in time; it did not run. Do "
    "not try it another way; continue without it or report that it is needed.]"
)

# --- documents: brief, goal, verdict (L-9, L-10) ----------------------------------------------
# The note under a frozen brief's title; the brief is read by people and by the agents of later steps.
BRIEF_NOTE = (
    "> Frozen by flower's clarify step. Edit this file to change the requirement; delete it to clarify again."
)
GOAL_NOTE = "> Set by flower's goal step; the judge checks every item. Edit this file to change the goal."
# What an empty section shows in a written document (read back as empty).
NOT_FILLED = "(not filled)"
# A goal check the judge cannot verify in this environment starts with this marker.
UNVERIFIABLE_MARK = "[cannot verify here"
# Sent to the worker's resumed session when the judge says the goal is not achieved yet.
VERDICT_FEEDBACK = (
    "The last round did NOT achieve the goal. The judge's reason: {reason}\n"
    "Items that failed:\n{failed}\n"
    "Continue from where you are: close only these gaps; do not start over and do not widen the scope."
)
VERDICT_NO_REASON = "the judge gave no clear verdict, so the goal counts as not achieved"

# --- clarify (L-9) ---------------------------------------------------------------------------
# The clarifier's role, appended to its system prompt. It cannot write: the wall is a hook, this only explains.
CLARIFY_RULES = """\
## Your job: clarify the request before any work starts
Find out what is wanted; do not do the work. You can read the workspace, but you cannot write files or run
commands. Look things up yourself first; ask the human (the ask tool) only what you cannot find out, one clear
question at a time, with options when there are a few choices. Then reply with the brief and nothing else, in
these four sections:
## Goal
What should exist or be true at the end, in a few sentences.
## Acceptance criteria
How anyone can tell it is done: concrete, checkable items.
## Bounds
What is out of scope or must not change.
## Unknowns and assumptions
What stayed open, and the assumption adopted for each.
Paste no code and no file contents; name files by path."""
CLARIFY_PROMPT = "The request to clarify:\n\n{request}"
CLARIFY_MISSING = (
    "The brief is incomplete: {missing} missing or empty. Reply with the whole brief again, all four sections "
    "filled (write the assumption you adopt where something is unknown)."
)
CLARIFY_RESUME = (
    "Continue the clarification where it stopped; it is not a restart. Do not ask again what was answered "
    "above. Reply with the whole four-section brief."
)

# --- goal and judge (L-10) -------------------------------------------------------------------
GOAL_RULES = """\
## Your job: turn the brief into a goal a judge can check
Reply with two sections and nothing else:
## Goal
One statement of what "done" means.
## Checks
One check per line, each decidable by looking at the workspace{can_run}. Start a check that cannot be
verified in this environment with "[cannot verify here: <why>]"."""
GOAL_CAN_RUN = " or by running a command there"
GOAL_PROMPT = "The brief:\n\n{brief}"
GOAL_MISSING = "The goal is incomplete: {missing} missing. Reply with both sections again."
GOAL_UNVERIFIABLE = (
    "{count} of {total} checks cannot be verified here; if the judge meets them it stops to ask you. "
    "Edit {path} now to change them."
)
JUDGE_RULES = """\
## Your job: judge whether the goal is achieved
You are an independent judge. Look at the workspace yourself{can_run}; do not trust the worker's reply. A check
without evidence you can see fails. Reply in three sections:
## Verdict
achieved, not yet, or unreachable (it cannot be achieved here, whatever the worker does).
## Reason
The evidence for your verdict, short.
## Failed
The checks that failed, one per line."""
JUDGE_CAN_RUN = " and run commands to check it"
JUDGE_PROMPT = "{goal}\n\n## The worker's reply (round {round})\n\n{reply}\n\nJudge this round, check by check."
# Asked of the human (a framework question, outside max_asks) when the judge finds the goal unreachable.
UNREACHABLE_QUESTION = "The judge says the goal cannot be reached: {reason} What now?"
UNREACHABLE_OPTIONS = ("accept the result as it is", "amend the goal", "the judge is wrong: continue")
AMEND_QUESTION = "What should be added to the goal? (It is appended; the current goal stays.)"
JUDGE_OVERRULED = "The human says the goal can be reached and the judge erred: {answer}"
JUDGE_AMENDED = "The goal was amended by the human: {extra}"
JUDGE_STOPPED = "stopped: the judge found the goal unreachable ({reason}) and nobody decided what to do"
JUDGE_ROUNDS_SPENT = "stopped: the goal was not achieved in {rounds} round(s); the judge's last reason: {reason}"
# The denial a subagent gets when it calls the human channel's ask tool: asking is a main-thread act.
ASK_NOT_FROM_SUBAGENT = (
    "Only the coordinator talks to the human. Decide yourself if you can; otherwise end your work and put "
    "the decision you need, with the options, in your reply: the coordinator will ask."
)

# L-7: resumes a workflow step whose process died mid-step (crash, kill, closed lid); same session.
RESUME_AFTER_CRASH = (
    "The process running this step stopped before the step ended and has been restarted. Continue the "
    "task where you were; what was done is above. Check the effect of your last call before repeating it."
)

RESUME_AFTER_FAILURE = (
    "An error stopped this step before it ended; the step is being tried again. Continue the task where you "
    "were; what was done is above. Check the effect of your last call before repeating it."
)


# --- flower go (L-11, L-14) -------------------------------------------------------------------------
GO_COORDINATOR = """\
You lead the work on the request below for a human who may be away. The brief is what was agreed with
them; the goal lists the checks an independent judge will apply after your round. Plan, dispatch the coder
for every change and every test run, and read what comes back. Ask the human only for a decision nobody
else can make; check your inbox between dispatches."""
GO_CODER_DESCRIPTION = "Changes code and runs the tests: one concrete task per dispatch, with its acceptance."
GO_CODER_PROMPT = """\
You are a careful software engineer working in this repository. Make the change you are given, run the
relevant tests, and report what you changed and what the tests say."""
GO_WORK = """\
{brief}

{goal}

Do the work now."""
BEQUEST_REQUEST = """\
The work is over. Write a short note for whoever opens this project next with Claude Code or another tool:
pointers, not contents; tens of lines at most (it is loaded into every later session). Do not create any
file yourself. Reply with these sections only:
## What this is
## Acceptance
Met and not met, the unmet ones first.
## Generated files
Which files are generated, and from what (edit the sources, not the outputs).
## Dead ends
## Workbench
Where the workbench is and what to read first."""
# Issue #16 item 16: added to the Agent tool's failed result when a worker was cut off by a transient API
# failure (the CLI's own retries exhausted). {error} is the CLI's one-line reason.
WORKER_REDISPATCH = (
    "[flower: this worker was cut off by a transient API failure, not by its task ({error}). Its work is NOT "
    "done and nothing it reported can be trusted. Dispatch it again with the same prompt; check first what "
    "it may have changed already.]"
)
