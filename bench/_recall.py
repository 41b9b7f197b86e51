"""The recall probe: decisions planted early in a long run that its end needs (issue #27).

Concept. A handoff or a compaction replaces the context with a document the model writes; what it leaves
out, the next generation does not know. The probe plants `DECISIONS` decision notes that the agent reads
in its first turns (`plant`), and the run's last turn needs them: the final answer names the decisions it
applies. `recalled` counts the decisions an answer names. The endurance bench runs it on the scripted
model (`bench.endurance`): there the model is a script that carries into each handoff document and each
compaction summary every decision its context holds (`carried`) and names in its final answer every
decision its context holds; so the probe measures whether the way the context is replaced lets the
decisions through (a handoff chain, the rewriting store, a compaction), not how well a model summarises.

Against a real model (outside CI, only with `ANTHROPIC_API_KEY` set) the same plant and count run
unchanged: `python -m bench._recall --real [--turns N]` has a coordinator and a plain auto-compacting agent
read the decision notes and then `N` filler notes each on a small window, so that each hands over or
compacts, and ask both for the decisions at the end. Without a key it says so and exits 0.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

DECISIONS: dict[str, str] = {
    f"DECISION-{k:02d}": text for k, text in enumerate((
        "quoted fields keep their embedded newlines (csv.QUOTE_ALL on write)",
        "the importer rejects rows wider than 64 columns instead of truncating",
        "dates are stored as UTC ISO-8601, never local time",
        "the retry budget of the uploader is 5 attempts with jittered backoff",
        "failed generator runs are recorded, not retried",
        "row ids are zero-padded to six digits",
        "the legacy `;` delimiter is accepted on read, never written",
        "empty trailing fields are kept (they are significant to the billing export)",
    ))
}
"""Decision id -> what was decided."""
_ID = re.compile(r"DECISION-\d\d")
ASK = ("Now finish: list every decision recorded in the decision notes (their DECISION-NN ids and what they "
       "say) that the remaining work must apply.")


def decision_note(ident: str) -> str:
    return f"notes/decision-{ident[-2:]}.md"


def plant(workspace: Path) -> list[str]:
    """Write the decision notes into `workspace/notes`; their paths, in the order they are to be read."""
    (workspace / "notes").mkdir(parents=True, exist_ok=True)
    for ident, text in DECISIONS.items():
        (workspace / decision_note(ident)).write_text(f"# {ident}\nDecided: {ident}: {text}.\n")
    return [decision_note(ident) for ident in DECISIONS]


def seen(text: str) -> list[str]:
    """The decision ids `text` holds, in order, once each."""
    return [ident for ident in dict.fromkeys(_ID.findall(text)) if ident in DECISIONS]


def carried(text: str) -> str:
    """The lines a model that keeps every decision it can see writes into its handoff or summary."""
    return "\n".join(f"- {ident}: {DECISIONS[ident]}" for ident in seen(text))


def recalled(answer: str) -> int:
    """How many planted decisions an answer names."""
    return len(seen(answer))


# --- against a real model (outside CI) ---------------------------------------------------------------


def _filler(workspace: Path, count: int) -> list[str]:
    body = "Backlog item: check the importer's handling of quoted fields and report anything odd. " * 60
    paths = []
    for k in range(count):
        path = f"notes/filler-{k:03d}.md"
        (workspace / path).write_text(f"# filler {k}\n{body}\n")
        paths.append(path)
    return paths


def _prompt(notes: Iterable[str]) -> str:
    order = "\n".join(f"- {path}" for path in notes)
    return (f"Read each of these notes with the Read tool, one per turn, in this order, and say nothing about "
            f"them until all are read:\n{order}\nThen: {ASK}")


def real(turns: int) -> dict[str, int]:
    """Both agents on the real API: decisions named in the final answer, flower's coordinator and a plain
    agent that auto-compacts (a 100k window, the CLI's smallest for compaction)."""
    import anyio
    from claude_agent_sdk import ClaudeAgentOptions

    from flower.agent.roles import coordinator, worker
    from flower.runtime.handoff import HandoffPolicy
    from flower.runtime.runtime import Runtime
    from flower.testing import collect

    window = 100_000
    with tempfile.TemporaryDirectory(prefix="flower-bench-recall-") as tmp:
        got: dict[str, int] = {}
        for label in ("flower", "plain"):
            ws = Path(tmp) / label
            prompt = _prompt([*plant(ws), *_filler(ws, turns)])
            if label == "flower":
                lead = coordinator("lead", "Goal: read the notes, then answer.",
                                   {"runner": worker("Runs commands.", "You run commands.", tools=["Bash", "Read"])})
                runtime = Runtime(ws, run_dir=ws / "runs", handoff=HandoffPolicy(window=window))
                result = runtime.run_sync(lead, prompt, step_name="recall")
                got[label] = recalled(result.text)
            else:
                options = ClaudeAgentOptions(system_prompt={"type": "preset", "preset": "claude_code"},
                                             allowed_tools=["Read"], cwd=str(ws), setting_sources=[],
                                             env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(window)})
                done = anyio.run(collect, prompt, options)
                got[label] = recalled(done.result.result or "" if done.result else "")
        return got


if __name__ == "__main__":
    if "--real" not in sys.argv:
        raise SystemExit("usage: python -m bench._recall --real [--turns N]  (the scripted probe runs in "
                         "python -m bench.endurance)")
    if not os.environ.get("ANTHROPIC_API_KEY"):
        print("recall probe against a real model: skipped (no ANTHROPIC_API_KEY)")
        raise SystemExit(0)
    count = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--turns=")), 120)
    found = real(count)
    for label, n in found.items():
        print(f"{label}: {n} of {len(DECISIONS)} planted decisions named in the final answer")
