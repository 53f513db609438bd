"""Keyed upserts into PostgreSQL, exactly-once beside at-least-once (no Spark).

The change feed of ``eosink.testing.change_feed`` (``--batches`` batches of ``--rows``
rows keyed by ``id``, half of each later batch updating keys of the last few batches).
Interleaved in this process, batch by batch
(their order alternating), two paths upsert the same rows into two tables of one server of its
own (``eosink.testing.postgres``):

* **eosink-postgres**, ``mode="upsert", key="id"``: the whole protocol through the kit's
  ``run_batch`` with the batch in two partitions (executors in this process): COPY into staging
  tables, then one transaction that moves the rows with ``INSERT ... SELECT ... ON CONFLICT
  (id) DO UPDATE`` and writes the proof;
* **the anchor**, what an at-least-once ``foreachBatch`` does with psycopg and the same path
  eosink takes: one transaction that COPYs the batch (the sink's binary encoder) into a
  temporary table and ``INSERT ... SELECT ... ON CONFLICT (id) DO UPDATE``s it into the target,
  on one connection kept open across batches, no staging, no proof.

Per batch it times each path (wall clock, the whole batch); at the end both tables must hold
the same rows. Prints rows/s and the per-batch cost early (from batch 10) and at the end.

    ./pants run packages/sink-postgres/benchmarks:upsert -- --batches 240 --rows 2000
    python -m eosink_postgres_benchmarks.upsert --batches 60 --rows 1000
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import pyarrow as pa
import structlog

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.change_feed import change_feed, check_same, print_result, time_batch
from eosink.testing.local import LocalRunner
from eosink.testing.postgres import postgres_server_running

EOSINK = "eosink-postgres, mode=upsert"
ANCHOR = "psycopg: COPY into a temp table + INSERT ... ON CONFLICT DO UPDATE (at-least-once)"
COLUMNS = "id bigint PRIMARY KEY, batch bigint, name text, amount bigint, score double precision"


class Anchor:
    """The at-least-once upsert: a temp table COPYed and merged in one transaction."""

    def __init__(self, url: str, table: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url)
        self.table = table

    def upsert(self, batch: pa.RecordBatch) -> None:
        from eosink_postgres import copy_binary
        from eosink_postgres.types import pg_type

        names = ", ".join(batch.schema.names)
        others = ", ".join(f"{c} = EXCLUDED.{c}" for c in batch.schema.names if c != "id")
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(f"CREATE TEMP TABLE s (LIKE {self.table}) ON COMMIT DROP")
            with cur.copy(f"COPY s ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(copy_binary.SIGNATURE)
                copy.write(copy_binary.encode_rows(batch, [pg_type(f) for f in batch.schema]))
                copy.write(copy_binary.TRAILER)
            cur.execute(
                f"INSERT INTO {self.table} ({names}) SELECT {names} FROM s "
                f"ON CONFLICT (id) DO UPDATE SET {others}"
            )

    def close(self) -> None:
        self.conn.close()


def measure(url: str, batches: int, rows: int) -> dict[str, Any]:
    """Both paths over ``batches`` batches of the feed; seconds per batch of each."""
    import psycopg

    from eosink_postgres.sink import PostgresSink

    with psycopg.connect(url, autocommit=True) as conn:
        for name in ("upsert_eosink", "upsert_anchor"):
            conn.execute(f"DROP TABLE IF EXISTS {name}")
            conn.execute(f"CREATE TABLE {name} ({COLUMNS})")
    sink = PostgresSink(url=url, table="upsert_eosink", mode="upsert", key="id")
    anchor = Anchor(url, "upsert_anchor")
    spent: dict[str, list[float]] = {EOSINK: [], ANCHOR: []}

    def eosink_batch(batch: int, data: pa.RecordBatch) -> None:
        ctx = BatchContext(sink="postgres", writer_id="bench", batch_id=batch)
        half = data.num_rows // 2
        parts = [[data.slice(0, half)], [data.slice(half)]]
        outcome = run_batch(sink, ctx, data.schema, LocalRunner(parts))
        assert outcome.status == "committed", outcome

    paths = {EOSINK: eosink_batch, ANCHOR: lambda batch, data: anchor.upsert(data)}
    try:
        for batch in range(batches):
            data = change_feed(batch, rows)
            time_batch(paths, batch, data, spent)
    finally:
        anchor.close()
    with psycopg.connect(url) as conn:
        held = [
            conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
            for t in ("upsert_eosink", "upsert_anchor")
        ]
    check_same(held[0], held[1], batches, rows)
    return {"seconds": spent, "anchor": ANCHOR, "eosink": EOSINK}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=240)
    parser.add_argument("--rows", type=int, default=2000, help="rows per batch")
    parser.add_argument("--window", type=int, default=10, help="batches per median")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with postgres_server_running() as server:
        result = measure(server.url(), args.batches, args.rows)
    print_result(result, args.batches, args.rows, args.window)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
