"""A fleet on PostgreSQL for the end-to-end tests: a database of its own per test, and `flower` processes
(a lead, workers) started the way a user starts them."""

from __future__ import annotations

import os
import secrets
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

ADMIN = os.environ.get("FLOWER_TEST_PG_DSN", "host=127.0.0.1 port=5432 user=postgres dbname=test")


@contextmanager
def fleet_database() -> Iterator[str]:
    """A fresh database on the local server (its DSN), dropped afterwards; skipped off CI without a server."""
    name = f"flow_fleet_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        with psycopg.connect(ADMIN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.OperationalError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def flower(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`python -m flower ARGS` in a session of its own, with none of the FLOWER_* settings of the process
    running the tests: only what `env` says reaches it."""
    plain = {k: v for k, v in os.environ.items() if not k.startswith("FLOWER_")}
    return subprocess.Popen([sys.executable, "-m", "flower", *args], env={**plain, **env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def first_line(child: subprocess.Popen[str], timeout: float = 60) -> str:
    """The first line the process writes on stderr (a worker's banner)."""
    assert child.stderr is not None
    ready, _, _ = select.select([child.stderr], [], [], timeout)
    assert ready, "the worker printed nothing"
    return child.stderr.readline()
