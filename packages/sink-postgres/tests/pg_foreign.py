"""What other programs do to a PostgreSQL target between any two steps of a generated history
(:mod:`eosink.testing.simulation_foreign`): another application INSERTs rows of its own,
an operator runs ``VACUUM FULL`` (the table rewritten under a new file), or sets a session
default ``client_encoding`` for the database (``LATIN1``: every new session, the sink's
included, then speaks LATIN1 unless it says otherwise).

The other program's session gives up after a second on a lock the stream's commit holds
(``lock_timeout``): a step armed inside that commit would wait for it for ever, as the commit
waits for the step; it counts as skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql
from psycopg.types.json import Jsonb

from eosink.testing.simulation import ForeignHand, ForeignOutcome, ForeignStep, HistorySpec

NO_TABLE = ForeignOutcome(skipped="no table yet")
LOCKED = ForeignOutcome(skipped="the table is locked by a commit")


def _session(url: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(url, autocommit=True)
    conn.execute("SET lock_timeout = '1s'")
    conn.execute("SET client_encoding = 'UTF8'")  # the other program knows its encoding
    return conn


def _exists(conn: psycopg.Connection[Any], table: str) -> bool:
    return conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None


def _param(field: pa.Field, value: Any) -> Any:
    if pa.types.is_struct(field.type) and value is not None:
        return Jsonb(value)
    return value


def postgres_foreign_steps(
    spec: HistorySpec, database: str, table: str
) -> Mapping[str, ForeignStep]:
    """The foreign steps on ``table`` of ``database`` (an admin URL, not the fault proxy's)."""
    schema, name = table.split(".")
    target = sql.Identifier(schema, name)

    def insert(hand: ForeignHand) -> ForeignOutcome:
        """Another application INSERTs rows of its own (plain SQL, one statement)."""
        with _session(database) as conn:
            if not _exists(conn, table):
                return NO_TABLE
            rows = hand.rows()
            columns = sql.SQL(", ").join(sql.Identifier(n) for n in spec.schema.names)
            marks = sql.SQL(", ").join(sql.Placeholder() * len(spec.schema.names))
            query = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(target, columns, marks)
            params = [[_param(f, row[f.name]) for f in spec.schema] for row in rows.to_pylist()]
            try:
                with conn.transaction():
                    conn.cursor().executemany(query, params)
            except psycopg.errors.LockNotAvailable:
                return LOCKED
        return ForeignOutcome(appended=rows)

    def vacuum_full(hand: ForeignHand) -> ForeignOutcome:
        """``VACUUM FULL``: the table rewritten into a new file (a new relfilenode, the OID
        kept); nothing a reader sees changes."""
        with _session(database) as conn:
            if not _exists(conn, table):
                return NO_TABLE
            try:
                conn.execute(sql.SQL("VACUUM FULL {}").format(target))
            except psycopg.errors.LockNotAvailable:
                return LOCKED
        return ForeignOutcome()

    def latin1_sessions(hand: ForeignHand) -> ForeignOutcome:
        """``ALTER DATABASE ... SET client_encoding = 'LATIN1'``: every session opened from
        now on speaks LATIN1 unless it sets its own encoding (the history's end resets it)."""
        with _session(database) as conn:
            db = conn.execute("SELECT current_database()").fetchone()[0]
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET client_encoding = 'LATIN1'").format(
                    sql.Identifier(db)
                )
            )
        return ForeignOutcome()

    return {"insert": insert, "vacuum_full": vacuum_full, "latin1_sessions": latin1_sessions}


def reset_encoding(database: str) -> None:
    """Undo :func:`postgres_foreign_steps`' ``latin1_sessions`` (histories share a database)."""
    with _session(database) as conn:
        db = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute(sql.SQL("ALTER DATABASE {} RESET client_encoding").format(sql.Identifier(db)))
