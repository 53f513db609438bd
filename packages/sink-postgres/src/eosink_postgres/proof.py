"""The proof of a batch: a row of the meta schema's ``proofs`` table, committed in the same
PostgreSQL transaction as the batch's rows.

This is the ``postgres`` sink's exactly-once evidence, in one place. Three tables in the meta
schema (``eosink`` by default) hold it, next to the data in the same database so that one
transaction covers it all:

* ``targets (target_id, schema_name, table_name, table_oid, bound_in, ...)``: the identity of
  each target (:mod:`eosink_postgres.identity`), which survives a dump and restore and tells a
  table dropped or renamed and made again under its name apart;
* ``progress (target_id, writer_id, last_batch)``: one row per writer of a target; a commit
  locks it ``FOR UPDATE``, so two commits of one writer into one target run one after the
  other, and the second sees the first's batch;
* ``proofs (target_id, writer_id, batch_id, attempt, ...)``: one row per committed batch.

:func:`ensure_meta` creates them (and migrates proofs an earlier version keyed by the table's
OID); the sink's ``commit`` locks the progress row (:func:`lock_last_batch`) and writes both
(:func:`record`) in the batch's transaction; :func:`read_proof` reads a proof back
(``is_committed``, and a commit that lost its connection, to tell whether it landed).
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

import psycopg
from psycopg import sql

from eosink.plugin import BatchContext, Proof
from eosink_postgres import identity
from eosink_postgres.options import PostgresOptions

PROGRESS = "progress"
PROOFS = "proofs"
#: Serializes the creation of the meta schema and of missing targets across writers.
SETUP_LOCK = 0x656F73696E6B  # "eosink"
Layout = Literal["none", "oid", "current"]


def layout(conn: psycopg.Connection[Any], options: PostgresOptions) -> Layout:
    """Which bookkeeping the meta schema holds: none yet, proofs keyed by the table's OID (an
    earlier version's, migrated by :func:`ensure_meta`), or keyed by the target's identity."""
    meta = options.meta_schema
    (progress, proofs, targets, by_oid) = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL, "
        "to_regclass(%s) IS NOT NULL, EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
        "to_regclass(%s) AND attname = 'target_oid' AND NOT attisdropped)",
        (
            f"{meta}.{PROGRESS}",
            f"{meta}.{PROOFS}",
            f"{meta}.{identity.TARGETS}",
            f"{meta}.{PROOFS}",
        ),
    ).fetchone()
    if not (progress and proofs):
        return "none"
    if by_oid:
        return "oid"
    return "current" if targets else "none"


def meta_ready(conn: psycopg.Connection[Any], options: PostgresOptions) -> bool:
    return layout(conn, options) == "current"


def ensure_meta(conn: psycopg.Connection[Any], options: PostgresOptions) -> None:
    """Create the meta schema and its tables if missing, and migrate proofs keyed by the
    table's OID (in the caller's transaction)."""
    if meta_ready(conn, options):
        return
    meta = options.meta_schema
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
    found = layout(conn, options)  # again, under the lock
    if found == "current":
        return
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(meta)))
    identity.create_table(conn, meta)
    if found == "oid":
        _migrate_oid_keys(conn, options)
        return
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (target_id uuid NOT NULL, writer_id text NOT NULL, "
            "last_batch bigint NOT NULL, PRIMARY KEY (target_id, writer_id))"
        ).format(sql.Identifier(meta, PROGRESS))
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (target_id uuid NOT NULL, writer_id text NOT NULL, "
            "batch_id bigint NOT NULL, attempt text NOT NULL, target text NOT NULL, "
            "mode text NOT NULL, rows bigint, fingerprint text, query_id text, checkpoint text, "
            "committed_at timestamptz NOT NULL DEFAULT now(), proof jsonb NOT NULL, "
            "PRIMARY KEY (target_id, writer_id, batch_id))"
        ).format(sql.Identifier(meta, PROOFS))
    )


def _migrate_oid_keys(conn: psycopg.Connection[Any], options: PostgresOptions) -> None:
    """Proofs an earlier version keyed by the table's OID, keyed by a target identity: one
    ``targets`` row per OID, bound in this incarnation (an OID whose table is gone keeps a row
    no table will match, as its proofs matched none before). Once, under the setup lock."""
    meta = options.meta_schema
    t = {
        "targets": sql.Identifier(meta, identity.TARGETS),
        "progress": sql.Identifier(meta, PROGRESS),
        "proofs": sql.Identifier(meta, PROOFS),
    }
    here = identity.incarnation(conn, meta)
    # the table's current name if it still exists, else the name its latest proof recorded
    conn.execute(
        sql.SQL(
            "INSERT INTO {targets} (target_id, schema_name, table_name, table_oid, bound_in, "
            "replaced_at) SELECT gen_random_uuid(), coalesce(n.nspname, split_part(o.target, "
            "'.', 1)), coalesce(c.relname, substr(o.target, length(split_part(o.target, '.', 1)) "
            "+ 2)), o.target_oid, %s, CASE WHEN c.oid IS NULL THEN now() END FROM (SELECT "
            "DISTINCT ON (target_oid) target_oid, target FROM (SELECT target_oid, target, "
            "batch_id FROM {proofs} UNION ALL SELECT target_oid, NULL, -2 FROM {progress}) a "
            "ORDER BY target_oid, (target IS NULL), batch_id DESC) o LEFT JOIN pg_class c ON "
            "c.oid = o.target_oid AND c.relkind IN ('r', 'p') LEFT JOIN pg_namespace n ON "
            "n.oid = c.relnamespace"
        ).format(**t),
        (here,),
    )
    for name, key in (
        ("progress", "target_id, writer_id"),
        ("proofs", "target_id, writer_id, batch_id"),
    ):
        table = t[name]
        conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN target_id uuid").format(table))
        conn.execute(
            sql.SQL(
                "UPDATE {} x SET target_id = g.target_id FROM {} g "
                "WHERE g.table_oid = x.target_oid AND g.bound_in = %s"
            ).format(table, t["targets"]),
            (here,),
        )
        conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN target_oid").format(table))
        conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN target_id SET NOT NULL").format(table))
        conn.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY ({})").format(table, sql.SQL(key)))


def read_proof(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    target_id: str | int,
    writer_id: str,
    batch_id: int,
) -> tuple[Proof, str] | None:
    """The proof of exactly ``batch_id`` if there is one, else the latest later one, with the
    attempt tag of the commit that wrote it (two index lookups, whatever the history's length).
    ``target_id``: the target's identity; an int is a table OID, for a meta schema an earlier
    version keyed by OID and not yet migrated (``is_committed`` reads it as it is)."""
    table = sql.Identifier(options.meta_schema, PROOFS)
    key = sql.Identifier("target_oid" if isinstance(target_id, int) else "target_id")
    value = target_id if isinstance(target_id, int) else uuid.UUID(target_id)
    row = conn.execute(
        sql.SQL(
            "(SELECT proof, attempt FROM {t} WHERE {k} = %s AND writer_id = %s "
            "AND batch_id = %s) UNION ALL (SELECT proof, attempt FROM {t} WHERE {k} = %s "
            "AND writer_id = %s AND batch_id > %s ORDER BY batch_id DESC LIMIT 1) LIMIT 1"
        ).format(t=table, k=key),
        (value, writer_id, batch_id, value, writer_id, batch_id),
    ).fetchone()
    if row is None:
        return None
    return Proof.from_dict(row[0]), row[1]


def lock_last_batch(
    conn: psycopg.Connection[Any], options: PostgresOptions, target_id: str, writer_id: str
) -> int:
    """Lock this writer's progress row for the caller's transaction (creating it on the first
    batch) and return the last batch it recorded (-1 for none): commits of one writer into one
    target run one after the other, and each sees the batch of the one before."""
    table = sql.Identifier(options.meta_schema, PROGRESS)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (target_id, writer_id, last_batch) VALUES (%s, %s, -1) "
            "ON CONFLICT DO NOTHING"
        ).format(table),
        (uuid.UUID(target_id), writer_id),
    )
    (last,) = conn.execute(
        sql.SQL(
            "SELECT last_batch FROM {} WHERE target_id = %s AND writer_id = %s FOR UPDATE"
        ).format(table),
        (uuid.UUID(target_id), writer_id),
    ).fetchone()
    return int(last)


def record(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    target_id: str,
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
        sql.SQL("UPDATE {} SET last_batch = %s WHERE target_id = %s AND writer_id = %s").format(
            sql.Identifier(meta, PROGRESS)
        ),
        (ctx.batch_id, uuid.UUID(target_id), ctx.writer_id),
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (target_id, writer_id, batch_id, attempt, target, mode, rows, "
            "fingerprint, query_id, checkpoint, committed_at, proof) VALUES (%s, %s, %s, "
            "%s, %s, %s, %s, %s, %s, %s, to_timestamp(%s), %s)"
        ).format(sql.Identifier(meta, PROOFS)),
        (
            uuid.UUID(target_id),
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
