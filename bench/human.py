"""What the human channel costs: context per main-thread request, and how fast an answer arrives (L-8).

1. Context. The same coordinator, with and without `channel=`, makes one request against the scripted API;
   the difference in request body characters (system, tools and messages) is what the channel adds to every main-thread request (the CLI
   defers SDK MCP tools behind ToolSearch, so it is a name in a listing rather than two full schemas).
2. Answer latency, as pure Python: a question waits; the answer comes (a) from another thread through
   `ch.answer` (in-process) and (b) as a letter in the SQLite mailbox, as `flower answer` leaves it from
   another process, picked up by the channel's poll (`poll_s`). The ratio is (b) over (a).

`tiny`: 3 answers per way instead of 15.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from bench._table import median, row
from flower.agent.options import build_options
from flower.agent.roles import coordinator, worker
from flower.human.channel import HumanChannel
from flower.human.mailbox import SqliteMailbox
from flower.testing import ScriptedAPI, collect, text

BENCH = "human"


async def _request_chars(channel: HumanChannel | None, tmp: Path) -> int:
    spec = coordinator("bench", "Paint the shed.", {"hands": worker("does the work", "You work.")}, channel=channel)
    with ScriptedAPI([text("done")]) as api:
        options = build_options(spec, cwd=tmp)
        options.env = {**options.env, **api.cli_env(tmp / "home")}
        if channel is None:
            await collect("go", options)
        else:
            from claude_agent_sdk import ClaudeSDKClient

            async with ClaudeSDKClient(options) as client:  # SDK MCP servers need a streaming session
                await client.query("go")
                async for _ in client.receive_response():
                    pass
        return len(json.dumps(api.main_requests[0].body, ensure_ascii=False))  # system + tools + messages


async def _latency(way: str, tmp: Path, count: int) -> list[float]:
    path = tmp / f"{way}.db"
    ch = HumanChannel(timeout_s=30, poll_s=0.5, mailbox=SqliteMailbox(path) if way == "mailbox" else None,
                      run="bench")
    other = SqliteMailbox(path) if way == "mailbox" else None
    samples: list[float] = []
    for index in range(count):
        sent: list[float] = []
        delay = 0.5 * (index + 0.5) / count  # spread over one poll interval, the same for both ways

        def human(delay: float = delay, sent: list[float] = sent) -> None:
            while not ch.pending():
                time.sleep(0.001)
            time.sleep(delay)
            item = ch.pending()[0]
            sent.append(time.perf_counter())
            if other is not None:
                other.post("bench", "answer", "yes", ref=item.id)
            else:
                ch.answer(item.id, "yes")

        thread = threading.Thread(target=human)
        thread.start()
        await ch.ask("go on?")
        samples.append((time.perf_counter() - sent[0]) * 1000)
        thread.join()
    return samples


def run(tiny: bool = False) -> list[dict[str, Any]]:
    count = 3 if tiny else 15
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        plain = anyio.run(_request_chars, None, tmp)
        with_channel = anyio.run(_request_chars, HumanChannel(), tmp)
        local = median(asyncio.run(_latency("thread", tmp, count)))
        remote = median(asyncio.run(_latency("mailbox", tmp, count)))
    return [
        row(BENCH, "main request, no channel", plain, "chars"),
        row(BENCH, "main request, with channel", with_channel, "chars", with_channel / plain,
            f"+{with_channel - plain} chars per main-thread request"),
        row(BENCH, "answer latency, in-process (thread)", local, "ms"),
        row(BENCH, "answer latency, mailbox (another process)", remote, "ms", remote / local if local else None,
            "poll_s=0.5; answers spread over one poll interval"),
    ]


if __name__ == "__main__":
    for line in run():
        print(line)
