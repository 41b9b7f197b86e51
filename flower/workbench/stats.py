"""Workbench statistics: how a run used its workbench, from transcripts and the disk (S-14).

The report (L-12) shows these numbers; the point is reuse: a script written once and run again later is
what the workbench exists for.

Invariants:
- Tool calls are counted once per `tool_use` id, however often one API message was stored.
- A script "runs" only when a Bash command executes it (its path, or its path or name handed to an
  interpreter); naming it (`cat`, `chmod`, a redirection target) is not a run.
- Paths are compared after resolution (`workbench.inside`), so `cd` relative forms and symlinks count
  as the script they lead to.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flower.workbench.bench import SECTIONS, Workbench, escape, inside

__all__ = ["ScriptUse", "WorkbenchStats", "simple_commands", "workbench_stats"]


@dataclass(frozen=True)
class ScriptUse:
    """How one script was used during a run."""

    path: str
    """Path relative to the workbench root (`scripts/check.py`)."""
    writes: int
    """Write/Edit calls on it."""
    runs: int
    """Bash commands that ran it."""


@dataclass(frozen=True)
class WorkbenchStats:
    """Workbench reuse of one run, from its transcripts (main and subagents) and the disk."""

    scripts_written: int
    """Distinct scripts created or changed with Write/Edit."""
    script_writes: int
    """Write/Edit calls on scripts/."""
    scripts_executed: int
    """Distinct scripts run at least once."""
    script_runs: int
    """Bash commands that ran a script (a command running two scripts counts for both)."""
    scripts_rerun: int
    """Distinct scripts run more than once: the reuse the workbench exists for."""
    scripts: int
    """Files in scripts/ now."""
    artifacts: int
    """Files in artifacts/ now."""
    notes: int
    """Files in notes/ now."""
    per_script: tuple[ScriptUse, ...]
    """Every script written or run, sorted by path."""


_INTERPRETER_RE = re.compile(
    r"^(?:python[0-9.]*|pypy[0-9.]*|bash|sh|zsh|dash|ksh|node|deno|bun|tsx|ts-node|ruby|perl|php|"
    r"Rscript|lua|julia|pwsh|pytest|uv|poetry|pipenv|npx)$"
)
_WRAPPERS = frozenset({"env", "time", "nice", "nohup", "sudo", "exec", "command", "timeout", "stdbuf"})
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPERATOR_RE = re.compile(r"^[();<>|&]+$")


def workbench_stats(workbench: Workbench, entries: Iterable[object]) -> WorkbenchStats:
    """Count script writes and runs in transcript `entries` (dicts as stored; a list may also hold
    whole lists, e.g. the main transcript and each subagent's) and the files on disk.

    Tool calls are deduplicated by their `tool_use` id, since one API message can be stored as several
    entries. A script "runs" when a Bash command executes its path directly or hands it (path or
    basename) to an interpreter; merely naming it (`cat`, `chmod`, redirections) does not count.
    """
    on_disk = {name: workbench.entries(name) for name in SECTIONS}
    known = {e.path for e in on_disk["scripts"]}
    writes: dict[str, int] = {}
    commands: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for entry in _flatten(entries):
        cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
        for block in _tool_uses(entry):
            if block.get("id") in seen:
                continue
            seen.add(str(block.get("id")))
            name, tool_input = block.get("name"), block.get("input") or {}
            if name in ("Write", "Edit") and isinstance(tool_input.get("file_path"), str):
                rel = _script_rel(workbench, tool_input["file_path"], cwd)
                if rel is not None:
                    writes[rel] = writes.get(rel, 0) + 1
            elif name == "Bash" and isinstance(tool_input.get("command"), str):
                commands.append((tool_input["command"], cwd))
    known |= set(writes)
    runs: dict[str, int] = {}
    for command, cwd in commands:
        for rel in _scripts_run(workbench, command, cwd, known):
            runs[rel] = runs.get(rel, 0) + 1
    per_script = tuple(
        ScriptUse(p, writes.get(p, 0), runs.get(p, 0)) for p in sorted(set(writes) | set(runs))
    )
    return WorkbenchStats(
        scripts_written=len(writes),
        script_writes=sum(writes.values()),
        scripts_executed=len(runs),
        script_runs=sum(runs.values()),
        scripts_rerun=sum(1 for n in runs.values() if n > 1),
        scripts=len(on_disk["scripts"]),
        artifacts=len(on_disk["artifacts"]),
        notes=len(on_disk["notes"]),
        per_script=per_script,
    )


def _flatten(entries: Iterable[object]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for item in entries:
        if isinstance(item, Mapping):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out.extend(x for x in item if isinstance(x, Mapping))
    return out


def _tool_uses(entry: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = entry.get("message")
    if entry.get("type") != "assistant" or not isinstance(message, Mapping):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]


def _script_rel(workbench: Workbench, path: str, cwd: str | None) -> str | None:
    """`scripts/x.py` for a path that resolves to a file (or future file) inside scripts/, else None."""
    if not inside(path, workbench.scripts, cwd) or os.path.isdir(_absolute(path, cwd)):
        return None
    real = os.path.realpath(_absolute(path, cwd))
    rel = os.path.relpath(real, os.path.realpath(workbench.root))
    return escape(Path(rel).as_posix())


def _absolute(path: str, cwd: str | None) -> str:
    return path if os.path.isabs(path) else os.path.join(cwd or os.getcwd(), path)


def _scripts_run(workbench: Workbench, command: str, cwd: str | None, known: set[str]) -> set[str]:
    by_name: dict[str, str] = {}
    for name in sorted(known):
        by_name.setdefault(name.rsplit("/", 1)[-1], name)
    found: set[str] = set()
    for words in simple_commands(command):
        target = _executed_word(words)
        if target is None:
            continue
        rel = _script_rel(workbench, os.path.expanduser(target), cwd) if "/" in target else by_name.get(target)
        if rel is not None and (rel in known or "/" in target):
            found.add(rel)
    return found


def simple_commands(command: str) -> list[list[str]]:
    """Split a shell command into simple commands' words, dropping operators and redirection targets.
    A heuristic for counting only (the glance guard uses a real parser); unparsable lines are skipped."""
    result: list[list[str]] = []
    for line in command.splitlines():
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            continue
        words: list[str] = []
        skip_next = False
        for tok in tokens:
            if _OPERATOR_RE.match(tok):
                if "<" in tok or ">" in tok:
                    skip_next = True  # the next word is a redirection target, not an argument
                else:
                    result.append(words)
                    words = []
                continue
            if skip_next:
                skip_next = False
                continue
            words.append(tok)
        result.append(words)
    return [w for w in result if w]


def _executed_word(words: list[str]) -> str | None:
    """The word a simple command executes as a script: its program when path-like, else the first
    non-option argument of an interpreter."""
    i = 0
    while i < len(words) and (_ASSIGN_RE.match(words[i]) or words[i] in _WRAPPERS or words[i].startswith("-")):
        i += 1
        if words[i - 1] == "timeout" and i < len(words) and words[i][:1].isdigit():
            i += 1  # timeout's duration
    if i >= len(words):
        return None
    program = words[i]
    if "/" in program and not _INTERPRETER_RE.match(os.path.basename(program)):
        return program
    if not _INTERPRETER_RE.match(os.path.basename(program)):
        return None
    rest = iter(words[i + 1 :])
    for word in rest:
        if word == "-m" and _INTERPRETER_RE.match(next(rest, "")):
            continue  # `python -m pytest FILE` runs FILE
        if word in ("-m", "-c", "-e", "--eval"):
            return None  # another module or inline code, not a file
        if word.startswith("-") or word == "run" or _INTERPRETER_RE.match(os.path.basename(word)):
            continue
        return word
    return None
