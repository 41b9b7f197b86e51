"""The PostgreSQL schema under `PostgresSessionStore`: its migrations, its queries, and bringing a schema up to
date once even when several processes start together (under `pg_advisory_xact_lock`)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from flower.errors import StoreError
from flower.stores._common import Migration

__all__ = ["MIGRATIONS", "QUERIES", "SCHEMA_VERSION", "migrate", "schema_version"]

_NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
"""The server's clock in milliseconds: every writer's mtime comes from it, so skewed machines agree."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "initial schema",
        (
            """CREATE TABLE {schema}.transcripts (
                id bigserial PRIMARY KEY,
                project_key text NOT NULL,
                session_id text NOT NULL,
                subpath text NOT NULL DEFAULT '',
                mtime bigint NOT NULL,
                UNIQUE (project_key, session_id, subpath))""",
            "CREATE INDEX transcripts_by_session ON {schema}.transcripts (session_id)",
            """CREATE TABLE {schema}.entries (
                seq bigserial PRIMARY KEY,
                transcript bigint NOT NULL REFERENCES {schema}.transcripts (id) ON DELETE CASCADE,
                uuid text,
                type text,
                payload text NOT NULL)""",
            "CREATE INDEX entries_by_transcript ON {schema}.entries (transcript, seq)",
            "CREATE UNIQUE INDEX entries_uuid ON {schema}.entries (transcript, uuid) WHERE uuid IS NOT NULL",
            """CREATE TABLE {schema}.summaries (
                project_key text NOT NULL,
                session_id text NOT NULL,
                mtime bigint NOT NULL,
                data text NOT NULL,
                PRIMARY KEY (project_key, session_id))""",
        ),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

QUERIES = {
    # Upsert-and-lock: the row lock is what serialises appends to one transcript.
    "touch": f"""INSERT INTO {{schema}}.transcripts AS t (project_key, session_id, subpath, mtime)
        VALUES (%s, %s, %s, {_NOW_MS})
        ON CONFLICT (project_key, session_id, subpath) DO UPDATE SET mtime = GREATEST({_NOW_MS}, t.mtime + 1)
        RETURNING id, mtime""",
    "insert": """INSERT INTO {schema}.entries (transcript, uuid, type, payload)
        SELECT %s, b.u, b.t, b.p FROM unnest(%b::text[], %b::text[], %b::text[]) WITH ORDINALITY AS b (u, t, p, n)
        ORDER BY b.n
        ON CONFLICT (transcript, uuid) WHERE uuid IS NOT NULL DO NOTHING
        RETURNING uuid""",
    "summary": "SELECT mtime, data FROM {schema}.summaries WHERE project_key = %s AND session_id = %s FOR UPDATE",
    "put_summary": """INSERT INTO {schema}.summaries (project_key, session_id, mtime, data) VALUES (%s, %s, %s, %s)
        ON CONFLICT (project_key, session_id) DO UPDATE SET mtime = EXCLUDED.mtime, data = EXCLUDED.data""",
    "load": """SELECT e.seq, e.payload FROM {schema}.entries e JOIN {schema}.transcripts t ON t.id = e.transcript
        WHERE t.project_key = %s AND t.session_id = %s AND t.subpath = %s ORDER BY e.seq""",
    "sessions": "SELECT session_id, mtime FROM {schema}.transcripts WHERE project_key = %s AND subpath = ''",
    "summaries": "SELECT session_id, mtime, data FROM {schema}.summaries WHERE project_key = %s",
    "subkeys": """SELECT subpath FROM {schema}.transcripts
        WHERE project_key = %s AND session_id = %s AND subpath <> '' ORDER BY id""",
    "delete_main": "DELETE FROM {schema}.transcripts WHERE project_key = %s AND session_id = %s",
    "delete_summary": "DELETE FROM {schema}.summaries WHERE project_key = %s AND session_id = %s",
    "delete_sub": "DELETE FROM {schema}.transcripts WHERE project_key = %s AND session_id = %s AND subpath = %s",
    "transcript": "SELECT id FROM {schema}.transcripts WHERE project_key = %s AND session_id = %s AND subpath = %s",
    "find": """SELECT project_key FROM {schema}.transcripts WHERE session_id = %s AND subpath = ''
        ORDER BY mtime DESC LIMIT 1""",
    "projects": "SELECT DISTINCT project_key FROM {schema}.transcripts ORDER BY project_key",
    "has": "SELECT 1 FROM {schema}.transcripts WHERE project_key = %s AND session_id = %s AND subpath = ''",
    "assistants_before": """SELECT seq, payload FROM {schema}.entries
        WHERE transcript = %s AND type = 'assistant' AND seq < %s ORDER BY seq DESC LIMIT 200""",
}


def migrate(conn: psycopg.Connection[Any], schema: str, where: str) -> None:
    """Bring `schema` to `SCHEMA_VERSION`, once even when several processes start together."""
    ident = sql.Identifier(schema)
    if schema_version(conn, schema, where) == SCHEMA_VERSION:
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"flower-store-migrate:{schema}",))
        current = schema_version(conn, schema, where)  # again, under the lock
        if current == 0:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.schema_version"
                    " (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(ident)
            )
        for migration in MIGRATIONS[current:]:
            for statement in migration.statements:
                conn.execute(sql.SQL(statement).format(schema=ident))
            conn.execute(
                sql.SQL("INSERT INTO {}.schema_version (version, name) VALUES (%s, %s)").format(ident),
                (migration.version, migration.name),
            )


SIBLINGS = {"human_letters": frozenset({"id", "run", "kind", "ref", "body", "meta", "at"})}
"""Tables flower itself keeps in a session store's schema, with their columns: a run's human channel binds its
mailbox there (`flower.human.mailbox.PostgresMailbox`), and may create it before the store's first write. A
table of that name with other columns is someone else's."""


def _ours(conn: psycopg.Connection[Any], schema: str, tables: set[str]) -> set[str]:
    """The tables of `tables` that are flower's own siblings of a session store (name and columns)."""
    found = set()
    for table in tables & SIBLINGS.keys():
        columns = {name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
            (schema, table)).fetchall()}
        if columns == SIBLINGS[table]:
            found.add(table)
    return found


def schema_version(conn: psycopg.Connection[Any], schema: str, where: str) -> int:
    """The flower schema version in `schema` (0 if absent or empty); StoreError for a foreign or newer one."""
    tables = {
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    }
    foreign = tables - _ours(conn, schema, tables)
    if not foreign:  # empty, or only what flower's human channel keeps beside the store
        return 0
    if "schema_version" not in tables:
        shown = ", ".join(sorted(foreign)[:5])
        raise StoreError(f"schema {schema} at {where} holds other tables, not a flower session store ({shown})")
    row = conn.execute(
        sql.SQL("SELECT COALESCE(MAX(version), 0) FROM {}.schema_version").format(sql.Identifier(schema))
    ).fetchone()
    version = int(row[0]) if row is not None else 0
    if version > SCHEMA_VERSION:
        raise StoreError(f"session store at {where} has schema version {version}, newer than this flower ({SCHEMA_VERSION})")
    return version
