"""What a line typed on the interactive terminal means (issue #15, L-12)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from flower.cli.console import Action, route


@dataclass
class Q:
    id: str = "q1"
    question: str = "Which format?"
    options: tuple[str, ...] = ("CSV", "TSV")


@pytest.mark.parametrize(
    ("line", "pending", "expected"),
    [
        ("2", Q(), Action("answer", "q1", "TSV")),
        (" 1 ", Q(), Action("answer", "q1", "CSV")),
        ("3", Q(), Action("answer", "q1", "3")),  # out of range: the digits are the answer
        ("0", Q(), Action("answer", "q1", "0")),
        ("2", Q(options=()), Action("answer", "q1", "2")),
        ("use JSON", Q(), Action("answer", "q1", "use JSON")),
        ("   ", Q(), Action("decline", "q1", "the human left it to you")),
        ("also handle CRLF", None, Action("mail", text="also handle CRLF")),
        ("", None, Action("nothing")),
    ],
)
def test_route(line: str, pending: Q | None, expected: Action) -> None:
    assert route(line, pending) == expected
