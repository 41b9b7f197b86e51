"""B-3: what the workbench listing's placement costs the prompt cache, through the real CLI.

Two steps of one coordinator run, a new workbench file written between them. With the cache-stable
placement ("user", the default) the system prompt is byte-identical in both steps and only the messages
after it are new; with the seed's placement ("system") the listing sits in the system prompt, so the new
file breaks the cached prefix there. The scripted API simulates the prompt cache (longest shared prefix in
the API's order: tools, system, messages), so the first request of step two reports how many tokens it
read from the cache. Counted in characters, so nothing here depends on timing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio

from bench._table import row
from flower.agent.roles import coordinator, worker
from flower.runtime.runtime import Runtime
from flower.testing import ScriptedAPI, text

BENCH = "placement"


async def _second_step_usage(placement: str, files: int) -> dict[str, int]:
    root = Path(tempfile.mkdtemp(prefix="flower-bench-placement-"))
    ws = root / "ws"
    ws.mkdir()
    api = ScriptedAPI([text("step one done"), text("step two done")]).start()
    try:
        rt = Runtime(ws, run_dir=root / "runs", env=api.cli_env(root / "home"), placement=placement)  # type: ignore[arg-type]
        spec = coordinator("lead", "Goal: keep notes.", {"w": worker("works", "You work.")})
        assert rt.workbench is not None
        for i in range(files):
            (rt.workbench.notes / f"decision-{i:02d}.md").write_text(f"# desc: decision {i}\nbecause\n")
        await rt.run(spec, "first step", step_name="one")
        (rt.workbench.scripts / "check.py").write_text("# desc: a new check between the steps\nprint(1)\n")
        await rt.run(spec, "second step", step_name="two")
    finally:
        api.stop()
    api.assert_done()
    first_of_two = api.main_requests[-1]
    usage = {"chars": first_of_two.size, "system": len(first_of_two.system_text)}
    usage["same_system"] = int(api.main_requests[0].system_text == first_of_two.system_text)
    usage["read"] = (api.usage(first_of_two) or {}).get("cache_read_input_tokens", 0)
    return usage


def run(tiny: bool = False) -> list[dict[str, Any]]:
    files = 3 if tiny else 30
    got = {p: anyio.run(_second_step_usage, p, files) for p in ("user", "system")}
    user, system = got["user"], got["system"]
    return [
        row(BENCH, "cache-stable placement: step two reads from cache", user["read"], "tokens", None,
            f"system prompt identical across steps: {bool(user['same_system'])}; {files} notes listed"),
        row(BENCH, "seed placement: step two reads from cache", system["read"], "tokens",
            system["read"] / max(1, user["read"]),
            f"vs cache-stable; system prompt identical: {bool(system['same_system'])}"),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
