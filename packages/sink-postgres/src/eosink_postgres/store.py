"""The sink's SQL: connections, the catalog questions it asks, and its staging tables.

The meta schema's bookkeeping tables, where the proofs live, are in :mod:`eosink_postgres.proof`.
Staging tables
live in the meta schema too, one UNLOGGED table per task attempt, with a comment (JSON) saying
whose they are and since when, for ``eosink cleanup``.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from eosink.plugin import ConfigurationError, SinkError
from eosink_postgres.options import SINK, PostgresOptions, scrub

STAGING_PREFIX = "stg_"


def connect(options: PostgresOptions, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection to the target's database; connection failures as errors naming the fix."""
    conninfo = options.conninfo()
    try:
        return psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise connection_error(exc, options) from None


def connection_error(exc: Exception, options: PostgresOptions) -> EosinkErrorType:
    """What a failed connection attempt means for the user, without any secret in it."""
    text = scrub(str(exc).strip(), options)
    lowered = text.lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        return ConfigurationError(
            f"{SINK}: the server refused the credentials ({text}); check options user and "
            "password (or the url's)"
        )
    if "connection refused" in lowered or "could not translate host name" in lowered:
        return ConfigurationError(
            f"{SINK}: no PostgreSQL server answers there ({text}); check options host and "
            "port (or the url), and that the server runs and listens on that address"
        )
    if "does not exist" in lowered and "database" in lowered:
        return ConfigurationError(f"{SINK}: {text}; check option dbname (or the url's)")
    return SinkError(f"{SINK}: cannot connect to PostgreSQL: {text}")


EosinkErrorType = ConfigurationError | SinkError


def ident(*parts: str) -> sql.Identifier:
    return sql.Identifier(*parts)


def target_ident(options: PostgresOptions) -> sql.Identifier:
    return sql.Identifier(*options.target)


def target_oid(conn: psycopg.Connection[Any], options: PostgresOptions) -> int | None:
    """The OID of the target table (None: there is none). Views and other relations are
    refused: only a table holds rows and proofs in one transaction."""
    row = conn.execute(
        "SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s",
        options.target,
    ).fetchone()
    if row is None:
        return None
    if row[1] not in ("r", "p"):
        raise ConfigurationError(
            f"{SINK}: {options.qualified} is not a table (relkind {row[1]!r}); give a table"
        )
    return int(row[0])


def table_columns(conn: psycopg.Connection[Any], oid: int) -> dict[str, tuple[str, bool, bool]]:
    """name -> (type as format_type writes it, NOT NULL, has a default), in column order."""
    rows = conn.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef OR "
        "attidentity <> '' OR attgenerated <> '' FROM pg_attribute WHERE attrelid = %s "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (oid,),
    ).fetchall()
    return {r[0]: (r[1], bool(r[2]), bool(r[3])) for r in rows}


def unique_keys(conn: psycopg.Connection[Any], oid: int) -> list[frozenset[str]]:
    """The column sets of the table's unique indexes (primary key included), non-partial."""
    rows = conn.execute(
        "SELECT array_agg(a.attname::text) FROM pg_index i "
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
        "WHERE i.indrelid = %s AND i.indisunique AND i.indpred IS NULL "
        "AND i.indexprs IS NULL GROUP BY i.indexrelid",
        (oid,),
    ).fetchall()
    return [frozenset(r[0]) for r in rows]


def staging_prefix(writer_id: str, batch_id: int, tag: str) -> str:
    """The start of the staging table's name of one attempt of a batch (``abort`` and
    ``eosink cleanup`` find it by it): writer (hashed: ids may be long or hold any
    character), batch, attempt tag."""
    writer = hashlib.sha1(writer_id.encode()).hexdigest()[:8]  # noqa: S324 - a name, not a secret
    return f"{STAGING_PREFIX}{writer}_{batch_id}_{tag[:8]}_"


def staging_name(prefix: str) -> str:
    """The staging table of one attempt of a batch: every task attempt COPYs into it, its rows
    tagged with the task attempt (:data:`TASK_COLUMNS`)."""
    return prefix + "rows"


#: The columns of a staging table after the stream's: which task attempt staged the row
#: (Spark's partition and ``taskAttemptId``). The commit moves the rows of the attempts the
#: messages name, never those of a retried or speculative attempt that also finished.
TASK_COLUMNS = (("eosink:partition", "integer"), ("eosink:attempt", "bigint"))


def staging_tables(
    conn: psycopg.Connection[Any], options: PostgresOptions, prefix: str = STAGING_PREFIX
) -> list[tuple[str, dict[str, Any]]]:
    """Staging tables in the meta schema whose name starts with ``prefix``, with their
    comments (who made them, when)."""
    rows = conn.execute(
        "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r' "
        "AND starts_with(c.relname, %s) ORDER BY c.relname",
        (options.meta_schema, prefix),
    ).fetchall()
    found = []
    for name, comment in rows:
        try:
            about = json.loads(comment) if comment else {}
        except ValueError:
            about = {}
        found.append((str(name), about if isinstance(about, dict) else {}))
    return found


def sql_error(exc: Exception, options: PostgresOptions, doing: str) -> EosinkErrorType:
    """A server error as an eosink error naming the fix where there is one; no secrets."""
    text = scrub(str(exc).strip(), options)
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return ConfigurationError(
            f"{SINK}: {doing}: {text}. The sink's role needs SELECT, INSERT (UPDATE for upsert, "
            f"DELETE for complete) on {options.qualified}, and CREATE on the database (or on "
            f"schema {options.meta_schema!r}, with its tables) for its staging and proofs"
        )
    if isinstance(exc, pg_errors.UntranslatableCharacter):
        diag = getattr(exc, "diag", None)
        primary = scrub(getattr(diag, "message_primary", None) or text.splitlines()[0], options)
        context = getattr(diag, "context", None) or ""
        where = f" ({scrub(context.splitlines()[0], options)})" if context else ""
        return ConfigurationError(
            f"{SINK}: {doing}: {primary}{where}. The database's encoding cannot hold a character "
            "of the batch (the sink sends UTF8): write into a database created with ENCODING "
            "'UTF8', or replace those characters in the query"
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return ConfigurationError(
            f"{SINK}: {doing}: {text}. The connection is read-only (a standby, or "
            "default_transaction_read_only for this role or database): connect to the primary "
            "with a role that may write"
        )
    return SinkError(f"{SINK}: {doing}: {text}")
