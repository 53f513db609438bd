"""Plain-SQL helpers of the tests: an independent reader of a table and an admin connection."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql


def admin(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection (for CREATE DATABASE, roles, inspection)."""
    return psycopg.connect(url, autocommit=True)


def read_table(url: str, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` as dicts, by a plain SELECT; [] when the table does not exist."""
    schema, name = table.split(".") if "." in table else ("public", table)
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f"{schema}.{name}",)).fetchone()[0] is None:
            return []
        cur = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, name)))
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def staging_tables(url: str, meta: str = "eosink") -> list[str]:
    """The staging tables in the meta schema (what failed attempts left)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname LIKE 'stg%%' ORDER BY 1",
            (meta,),
        ).fetchall()
    return [r[0] for r in rows]
