"""Recognising a worker cut off by an API failure, and the hook that asks for a re-dispatch (issue #16 item 16).

The texts are the bundled CLI's own (docs/sdk-notes.md); the end-to-end proof is
tests/e2e/test_worker_cutoff_e2e.py.
"""

from __future__ import annotations

import anyio
import pytest

from flower import texts
from flower.runtime.resilience import redispatch_hook, worker_cut_off
from tests.support.hooks import hook_input

CLI_TEXT = ("Agent terminated early due to an API error: API Error: 529 Overloaded (fake). This is a server-side "
            "issue, usually temporary — try again in a moment. (error type server_error, HTTP 529)")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (CLI_TEXT, True),
        ("Error: " + CLI_TEXT, True),  # the tool_use_result form
        ([{"type": "text", "text": CLI_TEXT}], True),  # content blocks
        ('Agent "do work" failed: ' + CLI_TEXT, True),  # a background worker's task-notification summary
        ("The agent said: Agent terminated early is a phrase", False),  # not at the start
        ("Exit code 1", False),
        (None, False),
        ({"text": CLI_TEXT}, False),
    ],
)
def test_worker_cut_off_matches_only_the_clis_result(value: object, expected: bool) -> None:
    assert worker_cut_off(value) is expected


def test_the_hook_adds_the_redispatch_text_only_for_a_cut_off_worker() -> None:
    hook = redispatch_hook()

    async def call(error: str) -> dict:
        data = hook_input("PostToolUseFailure", "Agent", {"prompt": "x"}, error=error)
        return await hook(data, "toolu_1", {"signal": None})

    added = anyio.run(call, CLI_TEXT)
    context = added["hookSpecificOutput"]["additionalContext"]
    assert added["hookSpecificOutput"]["hookEventName"] == "PostToolUseFailure"
    assert context == texts.WORKER_REDISPATCH.format(error=" ".join(CLI_TEXT.split()))
    assert anyio.run(call, "Permission denied by rule") == {}
