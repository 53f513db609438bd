"""The target's identity: a row of the meta schema's ``targets`` table, which the proofs are
keyed by.

A table's OID does not survive what operators do to move a database: a logical dump restored
into a fresh database (or in place with ``pg_restore --clean``, or on another server), a
logical replica. The restored table has a new OID while proofs keyed by the old one travel
along, and a replayed batch would be written twice. The name alone is no identity either: a
table dropped (or renamed) and made again under the name is another table, which must not
inherit the old one's proofs.

So each target gets a row ``(target_id uuid, schema_name, table_name, table_oid, bound_in)``
created with its first batch (or when the sink creates the table). ``bound_in`` names the
database *incarnation* the OID is valid in: the server's system identifier, the database's OID
and the ``targets`` table's own OID. A dump and restore, a replica or ``pg_upgrade`` changes it
(every OID of the copy is new, the ``targets`` table's too); dropping or renaming a target
does not. Then:

* a table whose OID is bound in this incarnation is that row's target (after a rename too);
* otherwise the live row of its name counts only if it was bound in another incarnation (it
  travelled here with the table: a restore); ``init`` binds it to the table's OID;
* otherwise (the row's table was dropped or renamed away here and another made under the
  name) the table is a new target: ``init`` retires the old row and makes a new one.

A table the sink creates itself always gets a new row: a restored meta schema without its
table must not lend the old table's proofs to an empty new one. What the identity cannot tell:
a table renamed and another made under its name, then a restore before any batch reached
the new one: the restored new table takes the old row (and skips only batches the old table
already holds, as the stream itself would).
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import psycopg
from psycopg import sql

from eosink_postgres.options import PostgresOptions

TARGETS = "targets"


@attrs.frozen
class Found:
    """The identity of a table, as the meta schema holds it now."""

    target_id: str
    #: the row was bound in another incarnation (a restore): ``bind`` rebinds it to the OID
    travelled: bool = False
    #: the row names the table under another name (it was renamed), or was retired when
    #: another table took the name: ``bind`` gives the row the table's name again
    renamed: bool = False


def create_table(conn: psycopg.Connection[Any], meta: str) -> None:
    """The ``targets`` table (in the caller's transaction, under the setup lock)."""
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (target_id uuid PRIMARY KEY, schema_name text NOT "
            "NULL, table_name text NOT NULL, table_oid oid NOT NULL, bound_in text NOT NULL, "
            "created_at timestamptz NOT NULL DEFAULT now(), replaced_at timestamptz)"
        ).format(sql.Identifier(meta, TARGETS))
    )
    conn.execute(
        sql.SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (schema_name, table_name) "
            "WHERE replaced_at IS NULL"
        ).format(sql.Identifier(f"{TARGETS}_live_name"), sql.Identifier(meta, TARGETS))
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (table_oid)").format(
            sql.Identifier(f"{TARGETS}_table_oid"), sql.Identifier(meta, TARGETS)
        )
    )


def incarnation(conn: psycopg.Connection[Any], meta: str) -> str:
    """This database's incarnation: what a dump and restore (or a replica) changes and a drop
    or rename of a table does not."""
    (text,) = conn.execute(
        "SELECT (SELECT system_identifier FROM pg_control_system())::text || ':' || d.oid "
        "|| ':' || coalesce(to_regclass(%s)::oid::text, '') FROM pg_database d "
        "WHERE d.datname = current_database()",
        (f"{meta}.{TARGETS}",),
    ).fetchone()
    return str(text)


def find(conn: psycopg.Connection[Any], options: PostgresOptions, oid: int) -> Found | None:
    """The identity of the target whose OID is ``oid`` (None: a new target). Reads only."""
    meta = options.meta_schema
    here = incarnation(conn, meta)
    table = sql.Identifier(meta, TARGETS)
    row = conn.execute(
        sql.SQL(
            "SELECT target_id, schema_name, table_name, replaced_at FROM {} "
            "WHERE table_oid = %s AND bound_in = %s ORDER BY replaced_at DESC NULLS FIRST LIMIT 1"
        ).format(table),
        (oid, here),
    ).fetchone()
    if row is not None:
        renamed = (row[1], row[2]) != options.target or row[3] is not None
        return Found(str(row[0]), renamed=renamed)
    row = conn.execute(
        sql.SQL(
            "SELECT target_id, bound_in FROM {} WHERE schema_name = %s AND table_name = %s "
            "AND replaced_at IS NULL"
        ).format(table),
        options.target,
    ).fetchone()
    if row is not None and row[1] != here:
        return Found(str(row[0]), travelled=True)
    return None


def bind(
    conn: psycopg.Connection[Any],
    options: PostgresOptions,
    oid: int,
    *,
    created: bool,
    setup_lock: int,
) -> str:
    """The target's identity, made or brought up to date in the caller's transaction (``init``'s):
    a travelled row bound to ``oid``, a renamed one renamed, a new target given a new row.
    ``created``: the sink made the table just now (always a new target)."""
    found = None if created else find(conn, options, oid)
    if found is not None and not found.travelled and not found.renamed:
        return found.target_id
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (setup_lock,))
    found = None if created else find(conn, options, oid)  # again, under the lock
    meta = options.meta_schema
    table = sql.Identifier(meta, TARGETS)
    here = incarnation(conn, meta)
    schema_name, table_name = options.target
    if found is None or found.renamed:  # the name's live row is another table's now
        conn.execute(
            sql.SQL(
                "UPDATE {} SET replaced_at = now() WHERE schema_name = %s AND table_name = %s "
                "AND replaced_at IS NULL"
            ).format(table),
            (schema_name, table_name),
        )
    if found is None:
        target_id = str(uuid.uuid4())
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (target_id, schema_name, table_name, table_oid, bound_in) "
                "VALUES (%s, %s, %s, %s, %s)"
            ).format(table),
            (uuid.UUID(target_id), schema_name, table_name, oid, here),
        )
        return target_id
    conn.execute(
        sql.SQL(
            "UPDATE {} SET schema_name = %s, table_name = %s, table_oid = %s, bound_in = %s, "
            "replaced_at = NULL WHERE target_id = %s"
        ).format(table),
        (schema_name, table_name, oid, here, uuid.UUID(found.target_id)),
    )
    return found.target_id
