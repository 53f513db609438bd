"""The commit's move of a batch's rows from its staging tables into the target.

This is the price of exactly-once without XA: the tasks' rows are written twice (COPY into
staging, then one ``INSERT ... SELECT`` in the commit's transaction), so that the rows and the
proof become visible together. ``append`` and ``complete`` insert; ``upsert`` checks the batch's
keys first (no null key, no two rows on one key) and inserts ``ON CONFLICT (key) DO UPDATE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from eosink.plugin import ConfigurationError
from eosink_postgres import store
from eosink_postgres.options import SINK, PostgresOptions


def move_rows(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    columns: Sequence[str],
    tables: Sequence[str],
) -> int:
    """Insert the rows of exactly the named staging tables into the target; returns how many
    rows the batch held (for an upsert too, where the INSERT's own count can be smaller)."""
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    source = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {} FROM {}").format(cols, store.ident(options.meta_schema, t))
        for t in tables
    )
    target = store.target_ident(options)
    if options.mode != "upsert":
        return conn.execute(sql.SQL("INSERT INTO {} ({}) {}").format(target, cols, source)).rowcount
    check_keys(conn, options, source)
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in options.key)
    others = [c for c in columns if c not in options.key]
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
    cur = conn.execute(query)
    if others:
        return cur.rowcount
    # DO NOTHING counts only the rows it inserted, not the rows it was given
    (n,) = conn.execute(sql.SQL("SELECT count(*) FROM ({}) s").format(source)).fetchone()
    return int(n)


def check_keys(
    conn: psycopg.Connection[Any], options: PostgresOptions, source: sql.Composable
) -> None:
    """Refuse a batch with a row without key or two rows on one key, naming the fix."""
    keys = sql.SQL(", ").join(sql.Identifier(k) for k in options.key)
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
