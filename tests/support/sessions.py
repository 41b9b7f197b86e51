"""Hand-made stored sessions, as the CLI writes them: a coordinator's main session, its worker's subagent
session and a glance-heavy session, plus the real transcript with subagents that the report reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.transcripts import TRANSCRIPTS, Transcript, bash, text

Entry = dict[str, Any]


def usage(inp: int, read: int, write: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
        "output_tokens": out,
    }


def reply(
    msg_id: str,
    request: str,
    blocks: list[dict[str, Any]],
    use: dict[str, int],
    *,
    session: str = "S1",
    sidechain: bool = False,
    agent: str | None = None,
    outs: list[int] | None = None,
) -> list[Entry]:
    """One API reply stored the way the CLI stores it: one entry per block, each repeating the usage."""
    entries = []
    for number, block in enumerate(blocks):
        u = dict(use)
        if outs is not None:
            u["output_tokens"] = outs[number]  # streamed output tokens grow entry by entry
        entry: Entry = {
            "type": "assistant",
            "uuid": f"{msg_id}-{number}",
            "requestId": request,
            "sessionId": session,
            "isSidechain": sidechain,
            "cwd": "/work/ws",
            "message": {
                "id": msg_id,
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [block],
                "usage": u,
            },
        }
        if agent:
            entry["agentId"] = agent
        entries.append(entry)
    return entries


def user(uuid: str, content: Any, *, session: str = "S1") -> Entry:
    return {
        "type": "user",
        "uuid": uuid,
        "sessionId": session,
        "message": {"role": "user", "content": content},
    }


def result(uuid: str, call: str, body: str, *, session: str = "S1") -> Entry:
    return user(uuid, [{"type": "tool_result", "tool_use_id": call, "content": body}], session=session)


BASH_INPUT = '{"command": "git status"}'
AGENT_INPUT = '{"description": "fix", "prompt": "FIX IT", "subagent_type": "worker"}'


def main_session() -> list[Entry]:
    return [
        user("u1", "fix the bug"),
        *reply(
            "m1",
            "r1",
            [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "git status"}},
            ],
            usage(100, 900, 50, 5),
            outs=[5, 20],
        ),
        result("u2", "t1", "clean"),
        *reply(
            "m2",
            "r2",
            [
                {
                    "type": "tool_use",
                    "id": "t2",
                    "name": "Agent",
                    "input": {"description": "fix", "prompt": "FIX IT", "subagent_type": "worker"},
                }
            ],
            usage(10, 1990, 100, 30),
        ),
        {"type": "cost-state", "totalCostUSD": 0.12},
        result("u3", "t2", "fixed at a.py:3"),
        *reply("m3", "r3", [{"type": "text", "text": "Done."}], usage(5, 2995, 0, 7)),
        {"type": "cost-state", "totalCostUSD": 0.15},
    ]


def sub_session() -> list[Entry]:
    return [
        {"type": "agent_metadata", "agentType": "worker", "toolUseId": "t2"},
        user("s-u1", "FIX IT"),
        *reply(
            "s1",
            "rs1",
            [
                {"type": "thinking", "thinking": "hm"},
                {"type": "tool_use", "id": "t3", "name": "Edit", "input": {"file_path": "a.py"}},
                {"type": "tool_use", "id": "t4", "name": "Bash", "input": {"command": "pytest"}},
            ],
            usage(500, 0, 500, 40),
            sidechain=True,
            agent="a1",
        ),
        result("s-u2", "t3", "ok"),
        result("s-u3", "t4", "1 passed"),
        *reply(
            "s2",
            "rs2",
            [{"type": "text", "text": "fixed at a.py:3"}],
            usage(50, 1000, 0, 10),
            sidechain=True,
            agent="a1",
        ),
    ]


STATUS = "On branch main\n" + "".join(f"modified: src/module_{n}.py\n" for n in range(30))


def glance_session() -> Transcript:
    t = Transcript()
    t.prompt("check the tree")
    for n in range(7):
        t.assistant(bash(f"g{n}", "git status" if n == 0 else f"ls dir{n}"))
        t.result(f"g{n}", STATUS if n == 0 else f"file{n}.txt")
    t.assistant(text("all clean"))
    return t


REAL = TRANSCRIPTS / "spotter" / "test" / "fixtures" / "transcripts"
REAL_ID = "ae4a77f8-aedd-4bc1-888f-c94edc91af04"


def jsonl_entries(path: Path) -> list[Entry]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
