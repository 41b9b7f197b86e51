"""`flower.testing`: a scripted fake Anthropic Messages API for offline, deterministic tests (B-8).

    from flower.testing import ScriptedAPI, text, tool_use

    with ScriptedAPI([tool_use("Bash", {"command": "echo hi"}), text("done")]) as api:
        options = ClaudeAgentOptions(env=api.cli_env(tmp_path / "home"), ...)
        ...  # run the real CLI through the SDK
    # leaving the block raises ScriptError on violations, exhaustion or unused steps

`go_script` scripts a whole `flower go` (docs/go.md). See docs/testing.md for the whole surface.
"""

from __future__ import annotations

from flower.testing.go import GoRound, go_dispatch, go_script
from flower.testing.replies import (
    Drop,
    Error,
    Reply,
    Step,
    Text,
    Thinking,
    ToolUse,
    Usage,
    api_error,
    prompt_too_long,
    structured,
    text,
    thinking,
    tool_use,
)
from flower.testing.run import Collected, collect
from flower.testing.server import MAIN, Request, ScriptedAPI, cli_env
from flower.testing.strict import request_problems

__all__ = [
    "MAIN",
    "Collected",
    "Drop",
    "Error",
    "GoRound",
    "Reply",
    "Request",
    "ScriptedAPI",
    "Step",
    "Text",
    "Thinking",
    "ToolUse",
    "Usage",
    "api_error",
    "cli_env",
    "collect",
    "go_dispatch",
    "go_script",
    "prompt_too_long",
    "request_problems",
    "structured",
    "text",
    "thinking",
    "tool_use",
]
