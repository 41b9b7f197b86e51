"""main_usages: each main-thread API message once, in order, from stored entries."""

from __future__ import annotations

from flower.stores._common import main_usages


def _assistant(ident: str, tokens: int, **extra: object) -> dict[str, object]:
    return {"type": "assistant", "message": {"id": ident, "model": "claude-sonnet-4-5",
                                             "usage": {"input_tokens": tokens}}, **extra}


def test_each_api_message_counts_once_and_subagents_errors_and_synthetic_replies_not_at_all() -> None:
    entries = [
        {"type": "user", "message": {"content": "go"}},
        _assistant("m1", 100), _assistant("m1", 100),  # one API message, two content blocks
        _assistant("s1", 900, isSidechain=True),
        _assistant("e1", 800, isApiErrorMessage=True),
        {"type": "assistant", "message": {"id": "x", "model": "<synthetic>", "usage": {"input_tokens": 5}}},
        _assistant("m2", 0),
        _assistant("m3", 300),
    ]
    assert [(i, u["input_tokens"]) for i, _, u in main_usages(entries)] == [("m1", 100), ("m3", 300)]
