"""Drive a program through a real pseudo-terminal (pexpect), as a person at an 80-column terminal would.

A real terminal answers a cursor position request (ESC [6n, which prompt_toolkit sends before it draws
what sits below the input line); `Term.expect` answers it the same way while it waits for text.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pexpect

CTRL_C = "\x03"
CTRL_D = "\x04"
CPR_REQUEST = "\x1b[6n"


class Term:
    """A program in a pty of `columns` x `rows`; output decoded as UTF-8."""

    def __init__(self, args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None,
                 columns: int = 80, rows: int = 24, timeout: float = 60) -> None:
        full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(rows),
                    "PYTHONUNBUFFERED": "1", **(env or {})}
        self.rows = rows
        self.child = pexpect.spawn(sys.executable, list(args), cwd=str(cwd), env=full_env,
                                   dimensions=(rows, columns), encoding="utf-8", codec_errors="replace",
                                   timeout=timeout)
        self.seen = ""

    def expect(self, text: str) -> None:
        """Wait for `text` (literal), answering cursor position requests meanwhile."""
        while True:
            index = self.child.expect_exact([text, CPR_REQUEST])
            self.seen += str(self.child.before) + str(self.child.after)
            if index == 0:
                return
            self.child.send(f"\x1b[{self.rows};1R")

    def expect_regex(self, pattern: str) -> str:
        """Wait for a regex; its first group (or the whole match)."""
        while True:
            index = self.child.expect([pattern, r"\x1b\[6n"])
            if index == 0:
                match = self.child.match
                return str(match.group(1) if match.groups() else match.group(0))
            self.child.send(f"\x1b[{self.rows};1R")

    def text(self) -> str:
        """What was shown so far, without escape sequences, with wrapped lines joined."""
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[\]P].*?(?:\x07|\x1b\\)", "", self.seen).replace("\r", "")
        return re.sub(r"\n +", " ", plain)

    def send(self, text: str) -> None:
        self.child.send(text)

    def wait_exit(self) -> int:
        self.child.expect(pexpect.EOF)
        self.seen += str(self.child.before)
        self.child.close()
        return int(self.child.exitstatus if self.child.exitstatus is not None else -1)
