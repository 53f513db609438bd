"""The target table against the stream: create it when missing, refuse it when it cannot hold
the stream's rows (before anything is written), with the fix in the message."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql

from eosink.plugin import ConfigurationError
from eosink_postgres import proof, store
from eosink_postgres.options import SINK, PostgresOptions
from eosink_postgres.types import columns_sql, pg_type

#: Column types that hold every value of the stream's type without loss (besides the type
#: itself): an existing table may be wider than the stream.
WIDER = {
    "smallint": {"integer", "bigint", "numeric", "real", "double precision"},
    "integer": {"bigint", "numeric", "double precision"},
    "bigint": {"numeric"},
    "real": {"double precision"},
    "text": {"character varying"},
    "jsonb": {"json"},
}
#: Decimal digits an integer column needs left of the point in a numeric column.
INTEGER_DIGITS = {"smallint": 5, "integer": 10, "bigint": 19}
SPARK_NAMES = {
    "timestamp with time zone": "TimestampType",
    "timestamp without time zone": "TimestampNTZType",
}


def create_target(
    conn: psycopg.Connection[Any], options: PostgresOptions, schema: pa.Schema
) -> int:
    """Create the target from the stream's schema (upsert: the key is its primary key)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (proof.SETUP_LOCK,))
    missing = [k for k in options.key if k not in schema.names]
    if missing:
        raise ConfigurationError(
            f"{SINK}: key column(s) {missing} are not columns of the stream "
            f"({', '.join(schema.names)}); name the key columns of the rows"
        )
    body = columns_sql(schema, not_null=options.key)
    if options.key:
        body += ", PRIMARY KEY ({})".format(
            ", ".join(sql.Identifier(k).as_string(conn) for k in options.key)
        )
    conn.execute(
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(options.target[0]))
    )
    conn.execute(
        sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
            store.target_ident(options), sql.SQL(body)
        )
    )
    oid = store.target_oid(conn, options)
    assert oid is not None  # created just now, in this transaction
    return oid


def _fits(stream: str, table: str) -> bool:
    if stream == table:
        return True
    base = re.sub(r"\(.*\)", "", table).strip()
    if stream.startswith("numeric(") and base == "numeric":
        if table == "numeric":
            return True
        p, s = (int(x) for x in stream[8:-1].split(","))
        tp, ts = (int(x) for x in table[8:-1].split(","))
        return ts >= s and tp - ts >= p - s
    if stream in INTEGER_DIGITS and base == "numeric" and table != "numeric":
        tp, ts = (int(x) for x in table[8:-1].split(","))
        return tp - ts >= INTEGER_DIGITS[stream]
    if stream.endswith("[]") and table.endswith("[]"):
        return _fits(stream[:-2], table[:-2])
    return base in WIDER.get(stream, set())


def check_target(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    oid: int,
    schema: pa.Schema,
    mode: str,
) -> None:
    """Refuse a target the batch cannot go into: a missing column, a type that does not hold
    the stream's values, a NOT NULL column the stream does not fill, missing privileges, an
    upsert key without a unique constraint."""
    columns = store.table_columns(conn, oid)
    problems = []
    for field in schema:
        want = pg_type(field)
        have = columns.get(field.name)
        if have is None:
            problems.append(f"column {field.name!r} ({want}) is not in the table")
        elif not _fits(want, have[0]):
            spark = f" (Spark {SPARK_NAMES[want]})" if want in SPARK_NAMES else ""
            problems.append(
                f"column {field.name!r} is {have[0]} in the table, the stream's is {want}{spark}"
            )
    for name, (_, not_null, has_default) in columns.items():
        if not_null and not has_default and name not in schema.names:
            problems.append(f"column {name!r} is NOT NULL without default and not in the stream")
    if problems:
        raise ConfigurationError(
            f"{SINK}: table {options.qualified} does not fit the stream: {'; '.join(problems)}. "
            "Select and cast the table's columns in the query, alter the table, or write to "
            "another table"
        )
    needed = ["INSERT", "SELECT"]
    if options.mode == "upsert":
        needed.append("UPDATE")
    if mode == "complete":
        needed.append("DELETE")
    row = conn.execute(
        "SELECT "
        + ", ".join(["has_table_privilege(%s::oid, %s)"] * len(needed))
        + ", has_schema_privilege(%s, 'CREATE')",
        [x for p in needed for x in (oid, p)] + [options.meta_schema],
    ).fetchone()
    lacking = [p for p, ok in zip(needed, row[:-1]) if not ok]
    if lacking or not row[-1]:
        what = [f"{', '.join(lacking)} on {options.qualified}"] if lacking else []
        if not row[-1]:
            what.append(f"CREATE on schema {options.meta_schema}")
        user = conn.execute("SELECT current_user").fetchone()[0]
        raise ConfigurationError(
            f"{SINK}: role {user!r} lacks {' and '.join(what)}; grant it (GRANT ... TO {user}) "
            "or connect as a role that may write"
        )
    if options.mode == "upsert":
        missing = [k for k in options.key if k not in schema.names]
        if missing:
            raise ConfigurationError(
                f"{SINK}: key column(s) {missing} are not columns of the stream; name the "
                "columns that identify a row"
            )
        if frozenset(options.key) not in store.unique_keys(conn, oid):
            raise ConfigurationError(
                f"{SINK}: table {options.qualified} has no primary key or unique constraint on "
                f"exactly ({', '.join(options.key)}), which an upsert needs; add one (ALTER TABLE "
                f"{options.qualified} ADD UNIQUE ({', '.join(options.key)})) or change option key"
            )
