"""`async for event in rt.stream(spec, prompt)` through the real CLI (issue #18, L-3)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flower.agent.events import Event
from flower.agent.spec import AgentSpec
from flower.runtime.runtime import Runtime
from flower.runtime.steps import read_manifest
from flower.testing import ScriptedAPI, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def solo() -> AgentSpec:
    return AgentSpec(name="solo", instructions="Work alone.", allowed_tools=["Bash"])


async def test_stream_yields_the_steps_events_in_order_and_keeps_the_result(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    scripted_api.script([tool_use("Bash", {"command": "echo STREAMED-42"}), text("all done")])
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    also: list[Event] = []
    stream = rt.stream(solo(), "work", on_event=also.append)
    events = [event async for event in stream]
    kinds = [e.kind for e in events]
    assert kinds[0] == "step" and kinds[-1] == "step"
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("result")
    (output,) = [e for e in events if e.kind == "tool_result"]
    assert "STREAMED-42" in output.text
    assert stream.result is not None and stream.result.ok and stream.result.text == "all done"
    assert also == events  # an on_event callback still sees the same events
    with pytest.raises(RuntimeError, match="once"):
        stream.__aiter__()


async def test_leaving_the_loop_early_cancels_the_run(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    # Requests the CLI may still send while it shuts down get a plain answer.
    scripted_api.handler = lambda request: (
        tool_use("Bash", {"command": 'python3 -c "import time; time.sleep(30)"'}) if request.index == 0
        else text("stopped"))
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    started = time.monotonic()
    stream = rt.stream(solo(), "work")
    events = aiter = stream.__aiter__()
    async for event in events:
        if event.kind == "tool_call":
            break
    await aiter.aclose()  # type: ignore[attr-defined]
    assert time.monotonic() - started < 20
    assert stream.result is None
    assert read_manifest(tmp_path / "runs") == []  # the step never finished (its session row may be there)


async def test_a_workflow_streams_every_steps_events(
    scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path
) -> None:
    """The same idiom for a durable workflow: both steps' events in order; the Context in `.result`."""
    from flower import Step, Workflow
    from flower.flow import engine

    scripted_api.script([text("first answer"), text("second answer")])
    rt = Runtime(workspace, run_dir=tmp_path / "runs", env=scripted_api.cli_env(tmp_path / "home"))
    spec = AgentSpec(name="agent", instructions="Answer.", allowed_tools=["Read"])
    wf = Workflow([Step("a", spec, "one"), Step("b", spec, "two")], name="streamed")
    try:
        stream = wf.stream(rt)
        events = [event async for event in stream]
    finally:
        if engine.current() is not None:
            engine.destroy()
    steps = [(e.text, e.payload.get("phase")) for e in events if e.kind == "step"]
    assert [s for s in steps if s[1] in ("start", "end")] == [("a", "start"), ("a", "end"), ("b", "start"),
                                                            ("b", "end")]
    assert [e.text for e in events if e.kind == "result"] == ["first answer", "second answer"]
    assert stream.result is not None and stream.result["b"] == "second answer" and stream.result.ok
