"""The proof of a batch: a row of the meta schema's ``proofs`` table, committed in the same
PostgreSQL transaction as the batch's rows.

This is the ``postgres`` sink's exactly-once evidence, in one place. Two tables in the meta
schema (``eosink`` by default) hold it, next to the data in the same database so that one
transaction covers both:

* ``progress (target_oid, writer_id, last_batch)``: one row per writer of a target; a commit
  locks it ``FOR UPDATE``, so two commits of one writer into one target run one after the
  other, and the second sees the first's batch;
* ``proofs (target_oid, writer_id, batch_id, attempt, ...)``: one row per committed batch.

Both are keyed by the target's OID, not its name: a table dropped and created again under the
same name is a new target, without the old table's proofs. :func:`ensure_meta` creates them;
the sink's ``commit`` locks the first (:func:`lock_last_batch`) and writes both
(:func:`record`) in the batch's transaction; :func:`read_proof` reads a proof back
(``is_committed``, and a commit that lost its connection, to tell whether it landed).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg import sql

from eosink.plugin import BatchContext, Proof
from eosink_postgres.options import PostgresOptions

PROGRESS = "progress"
PROOFS = "proofs"
#: Serializes the creation of the meta schema and of missing targets across writers.
SETUP_LOCK = 0x656F73696E6B  # "eosink"


def meta_ready(conn: psycopg.Connection[Any], options: PostgresOptions) -> bool:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
        (f"{options.meta_schema}.{PROGRESS}", f"{options.meta_schema}.{PROOFS}"),
    ).fetchone()
    return bool(row and row[0])


def ensure_meta(conn: psycopg.Connection[Any], options: PostgresOptions) -> None:
    """Create the meta schema and its tables if missing (in the caller's transaction)."""
    if meta_ready(conn, options):
        return
    meta = options.meta_schema
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(meta)))
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (target_oid oid NOT NULL, writer_id text NOT NULL, "
            "last_batch bigint NOT NULL, PRIMARY KEY (target_oid, writer_id))"
        ).format(sql.Identifier(meta, PROGRESS))
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (target_oid oid NOT NULL, writer_id text NOT NULL, "
            "batch_id bigint NOT NULL, attempt text NOT NULL, target text NOT NULL, "
            "mode text NOT NULL, rows bigint, fingerprint text, query_id text, checkpoint text, "
            "committed_at timestamptz NOT NULL DEFAULT now(), proof jsonb NOT NULL, "
            "PRIMARY KEY (target_oid, writer_id, batch_id))"
        ).format(sql.Identifier(meta, PROOFS))
    )


def read_proof(
    conn: psycopg.Connection[Any], options: PostgresOptions, oid: int, writer_id: str, batch_id: int
) -> tuple[Proof, str] | None:
    """The proof of exactly ``batch_id`` if there is one, else the latest later one, with the
    attempt tag of the commit that wrote it (two index lookups, whatever the history's length)."""
    table = sql.Identifier(options.meta_schema, PROOFS)
    row = conn.execute(
        sql.SQL(
            "(SELECT proof, attempt FROM {t} WHERE target_oid = %s AND writer_id = %s "
            "AND batch_id = %s) UNION ALL (SELECT proof, attempt FROM {t} WHERE target_oid = %s "
            "AND writer_id = %s AND batch_id > %s ORDER BY batch_id DESC LIMIT 1) LIMIT 1"
        ).format(t=table),
        (oid, writer_id, batch_id, oid, writer_id, batch_id),
    ).fetchone()
    if row is None:
        return None
    return Proof.from_dict(row[0]), row[1]


def lock_last_batch(
    conn: psycopg.Connection[Any], options: PostgresOptions, oid: int, writer_id: str
) -> int:
    """Lock this writer's progress row for the caller's transaction (creating it on the first
    batch) and return the last batch it recorded (-1 for none): commits of one writer into one
    target run one after the other, and each sees the batch of the one before."""
    table = sql.Identifier(options.meta_schema, PROGRESS)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (target_oid, writer_id, last_batch) VALUES (%s, %s, -1) "
            "ON CONFLICT DO NOTHING"
        ).format(table),
        (oid, writer_id),
    )
    (last,) = conn.execute(
        sql.SQL(
            "SELECT last_batch FROM {} WHERE target_oid = %s AND writer_id = %s FOR UPDATE"
        ).format(table),
        (oid, writer_id),
    ).fetchone()
    return int(last)


def record(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    oid: int,
    ctx: BatchContext,
    *,
    attempt: str,
    mode: str,
    proof: Proof,
) -> None:
    """Record the batch in the writer's progress row and its proof row, in the caller's
    transaction (the one that moves the batch's rows)."""
    meta = options.meta_schema
    conn.execute(
        sql.SQL("UPDATE {} SET last_batch = %s WHERE target_oid = %s AND writer_id = %s").format(
            sql.Identifier(meta, PROGRESS)
        ),
        (ctx.batch_id, oid, ctx.writer_id),
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (target_oid, writer_id, batch_id, attempt, target, mode, rows, "
            "fingerprint, query_id, checkpoint, committed_at, proof) VALUES (%s, %s, %s, "
            "%s, %s, %s, %s, %s, %s, %s, to_timestamp(%s), %s)"
        ).format(sql.Identifier(meta, PROOFS)),
        (
            oid,
            ctx.writer_id,
            ctx.batch_id,
            attempt,
            options.qualified,
            mode,
            proof.rows,
            proof.fingerprint,
            proof.query_id,
            proof.checkpoint,
            proof.committed_at,
            json.dumps(proof.to_dict()),
        ),
    )
