"""Keyed upserts into PostgreSQL, exactly-once beside at-least-once (no Spark).

A change feed of ``--batches`` batches of ``--rows`` rows keyed by ``id``: batch 0 inserts
``rows`` new keys; every later batch carries ``rows / 2`` new keys and ``rows / 2`` keys already
in the table, drawn from the keys the last :data:`RECENT` batches inserted (recent entities
change: an order's status, a session's counters). Interleaved in this process, batch by batch
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
import random
import statistics
import time
from typing import Any

import pyarrow as pa
import structlog

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner
from eosink.testing.postgres import postgres_server_running

EOSINK = "eosink-postgres, mode=upsert"
ANCHOR = "psycopg: COPY into a temp table + INSERT ... ON CONFLICT DO UPDATE (at-least-once)"
#: The updates of a batch hit keys the last RECENT batches inserted.
RECENT = 5
COLUMNS = "id bigint PRIMARY KEY, batch bigint, name text, amount bigint, score double precision"


def new_keys(batch: int, rows: int) -> range:
    """The keys batch ``batch`` inserts: ``rows`` at batch 0, ``rows // 2`` later."""
    half = rows // 2
    return range(0, rows) if batch == 0 else range(rows + (batch - 1) * half, rows + batch * half)


def change_feed(batch: int, rows: int) -> pa.RecordBatch:
    """Batch ``batch`` of the feed: its new keys and (after batch 0) as many keys of the last
    :data:`RECENT` batches, in a seeded random order; every key at most once."""
    fresh = new_keys(batch, rows)
    keys = list(fresh)
    if batch:
        recent = range(new_keys(max(0, batch - RECENT), rows).start, fresh.start)
        keys += random.Random(batch).sample(recent, rows - len(fresh))
        random.Random(-batch).shuffle(keys)
    ids = pa.array(keys, pa.int64())
    return pa.record_batch(
        {
            "id": ids,
            "batch": pa.array([batch] * len(keys), pa.int64()),
            "name": pa.array([f"user-{k}-{batch}" for k in keys]),
            "amount": pa.array([(k * 7 + batch) % 1000 for k in keys], pa.int64()),
            "score": pa.array([(k % 97) / 7 + batch for k in keys], pa.float64()),
        }
    )


def table_rows(batches: int, rows: int) -> int:
    """The table's rows after ``batches`` batches."""
    return new_keys(batches - 1, rows).stop


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
            order = list(paths) if batch % 2 == 0 else list(reversed(paths))
            for name in order:
                began = time.perf_counter()
                paths[name](batch, data)
                spent[name].append(time.perf_counter() - began)
    finally:
        anchor.close()
    with psycopg.connect(url) as conn:
        held = [
            conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
            for t in ("upsert_eosink", "upsert_anchor")
        ]
    if held[0] != held[1] or len(held[0]) != table_rows(batches, rows):
        raise AssertionError(
            f"the two tables differ after {batches} batches: {len(held[0])} vs {len(held[1])} "
            f"rows, {table_rows(batches, rows)} expected"
        )
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


def print_result(result: dict[str, Any], batches: int, rows: int, window: int) -> None:
    first = min(10, max(1, batches - 2 * window))
    for name, seconds in result["seconds"].items():
        measured = seconds[1:]  # batch 0 creates what the later ones find: the warm-up
        early = statistics.median(seconds[first : first + window]) * 1000
        late = statistics.median(seconds[-window:]) * 1000
        print(
            f"{name}: {len(measured) * rows / sum(measured):,.0f} rows/s; "
            f"median ms per batch at batch {first}: {early:.1f}, at the last {window}: "
            f"{late:.1f} ({late / early:.2f}x)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
