"""The commit's move of a batch's rows from its staging table into the target.

This is the price of exactly-once without XA: the tasks' rows are written twice (COPY into
staging, then one ``INSERT ... SELECT`` in the commit's transaction), so that the rows and the
proof become visible together. The batch's rows are those of the task attempts its messages
name (the staging table also holds what a failed or speculative task attempt staged).
``append`` and ``complete`` insert; ``upsert`` inserts ``ON CONFLICT (key) DO UPDATE`` and
refuses a batch with a row without key or two rows on one key, naming it. Those checks read the
whole batch again, so they run only where the server would not refuse the batch itself:
PostgreSQL refuses two rows on one key in one ``DO UPDATE`` and a null in a ``NOT NULL``
column; the checks then only name the key for the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from eosink.plugin import ConfigurationError
from eosink_postgres import store
from eosink_postgres.options import SINK, PostgresOptions


def move_rows(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    columns: Sequence[str],
    staging: str,
    tasks: Sequence[tuple[int, int]],
) -> int:
    """Insert the rows the named task attempts (partition, attempt) staged into the target;
    returns how many rows the batch held (for an upsert too, where the INSERT's own count can
    be smaller)."""
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    tagged = sql.SQL(", ").join(sql.Identifier(name) for name, _ in store.TASK_COLUMNS)
    attempts = sql.SQL(", ").join(
        sql.SQL("({}, {})").format(sql.Literal(int(p)), sql.Literal(int(a))) for p, a in tasks
    )
    source = sql.SQL("SELECT {} FROM {} WHERE ({}) IN ({})").format(
        cols, store.ident(options.meta_schema, staging), tagged, attempts
    )
    target = store.target_ident(options)
    if options.mode != "upsert":
        return conn.execute(sql.SQL("INSERT INTO {} ({}) {}").format(target, cols, source)).rowcount
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in options.key)
    others = [c for c in columns if c not in options.key]
    if not key_not_null(conn, options):  # the server would insert a null key as a new row
        check_null_keys(conn, options, source)
    if not others:  # DO NOTHING would keep one of two rows on one key, silently
        check_duplicate_keys(conn, options, source)
    action = (
        sql.SQL("DO UPDATE SET ")
        + sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in others
        )
        if others
        else sql.SQL("DO NOTHING")
    )
    query = (
        sql.SQL("INSERT INTO {} ({}) SELECT {} FROM ({}) s ON CONFLICT ({}) ").format(
            target, cols, cols, source, keys
        )
        + action
    )
    try:
        with conn.transaction():  # a savepoint: the batch's refusal is explained below
            cur = conn.execute(query)
    except pg_errors.CardinalityViolation:
        check_duplicate_keys(conn, options, source)
        raise
    except pg_errors.NotNullViolation:
        check_null_keys(conn, options, source)
        raise
    if others:
        return cur.rowcount
    # DO NOTHING counts only the rows it inserted, not the rows it was given
    (n,) = conn.execute(sql.SQL("SELECT count(*) FROM ({}) s").format(source)).fetchone()
    return int(n)


def key_not_null(conn: psycopg.Connection[Any], options: PostgresOptions) -> bool:
    """Whether every key column of the target is ``NOT NULL`` (a primary key's are). The
    commit holds the target's lock, so no ``ALTER TABLE`` changes that before its INSERT."""
    (all_not_null,) = conn.execute(
        "SELECT coalesce(bool_and(attnotnull), false) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attname = ANY(%s) AND NOT attisdropped",
        (store.target_ident(options).as_string(conn), list(options.key)),
    ).fetchone()
    return bool(all_not_null)


def check_null_keys(
    conn: psycopg.Connection[Any], options: PostgresOptions, source: sql.Composable
) -> None:
    """Refuse a batch with a row without key, naming the fix."""
    null = sql.SQL(" OR ").join(
        sql.SQL("{} IS NULL").format(sql.Identifier(k)) for k in options.key
    )
    (nulls,) = conn.execute(
        sql.SQL("SELECT count(*) FROM ({}) s WHERE {}").format(source, null)
    ).fetchone()
    if nulls:
        raise ConfigurationError(
            f"{SINK}: {nulls} row(s) of the batch have a null key column "
            f"({', '.join(options.key)}); upserts need a key in every row: filter them "
            "out or fill the key in the query"
        )


def check_duplicate_keys(
    conn: psycopg.Connection[Any], options: PostgresOptions, source: sql.Composable
) -> None:
    """Refuse a batch with two rows on one key, naming the key and the fix."""
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in options.key)
    dup = conn.execute(
        sql.SQL("SELECT {}, count(*) FROM ({}) s GROUP BY {} HAVING count(*) > 1 LIMIT 1").format(
            keys, source, keys
        )
    ).fetchone()
    if dup is not None:
        raise ConfigurationError(
            f"{SINK}: {dup[-1]} rows of one batch have the same key "
            f"({', '.join(options.key)}) = {tuple(dup[:-1])!r}; an upsert cannot "
            "apply two rows to one key in one statement: deduplicate the batch in the "
            "query (e.g. keep the latest row per key)"
        )
