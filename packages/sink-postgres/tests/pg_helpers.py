"""Plain-SQL helpers of the tests: an independent reader of a table, an admin connection and
scratch databases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql


def admin(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection (for CREATE DATABASE, roles, inspection)."""
    return psycopg.connect(url, autocommit=True)


@contextmanager
def scratch_database(server: Any, prefix: str, options: str = "") -> Iterator[str]:
    """Another database on ``server`` (from template0, with ``options`` such as ``ENCODING
    'LATIN1' LOCALE 'C'``), dropped afterwards, connections and all; yields its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with admin(server.url()) as conn:
        conn.execute(f'CREATE DATABASE "{name}" {options} TEMPLATE template0')
    try:
        yield server.url(database=name)
    finally:
        with admin(server.url()) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def read_table(url: str, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` as dicts, by a plain SELECT; [] when the table does not exist."""
    schema, name = table.split(".") if "." in table else ("public", table)
    # UTF8 whatever the database's session default is (a history may set LATIN1 there)
    with psycopg.connect(url, autocommit=True, client_encoding="UTF8") as conn:
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


def batch_rows(batch_id: int, partitions: int = 2, rows: int = 3, writer: int = 0) -> list:
    """Deterministic rows of a batch, as partitions of Arrow record batches (id, name)."""
    import pyarrow as pa

    out = []
    for p in range(partitions):
        ids = [writer * 10**9 + batch_id * 10_000 + p * 100 + i for i in range(rows)]
        out.append(
            [pa.record_batch({"id": pa.array(ids, pa.int64()), "name": [f"r{i}" for i in ids]})]
        )
    return out


def run(
    sink,
    batch_id: int,
    partitions: list,
    writer_id: str = "w",
    mode: str = "append",
    plugins=(),
    query_id: str = "00000000-0000-4000-8000-000000000001",
):
    """One batch through the real protocol (executors in this process)."""
    from eosink.plugin import BatchContext
    from eosink.testing import run_batch
    from eosink.testing.local import LocalRunner

    ctx = BatchContext(
        sink=sink.name,
        writer_id=writer_id,
        batch_id=batch_id,
        mode=mode,
        query_id=query_id,
        checkpoint=f"/checkpoints/{writer_id}",
    )
    schema = partitions[0][0].schema
    return run_batch(sink, ctx, schema, LocalRunner(partitions), plugins=list(plugins))


def ids(rows: list) -> list:
    return sorted(r["id"] for r in rows)


def expected_ids(partitions_by_batch: list) -> list:
    return sorted(
        i
        for partitions in partitions_by_batch
        for part in partitions
        for b in part
        for i in b.column("id").to_pylist()
    )
