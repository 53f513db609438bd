"""Keyed upserts into Iceberg, exactly-once beside pyiceberg's own ``upsert`` (no Spark).

A change feed of ``--batches`` batches of ``--rows`` rows keyed by ``id``: batch 0 inserts
``rows`` new keys; every later batch carries ``rows / 2`` new keys and ``rows / 2`` keys already
in the table, drawn from the keys the last :data:`RECENT` batches inserted (recent entities
change: an order's status, a session's counters; updates spread over the whole table would
touch every file of it, whatever the writer). Interleaved in this process, batch by batch
(their order alternating), two paths upsert the same rows into two tables of one SQL catalog
on SQLite with a local warehouse:

* **eosink-iceberg**, ``mode="upsert", key=["id"]``: the whole protocol through the kit's
  ``run_batch`` with the batch in two partitions (executors in this process): the batch's files
  staged, then one catalog commit that deletes the table's rows of the batch's keys
  (copy-on-write, files pruned by the key's bounds), appends the batch and records the proof;
* **the anchor**, pyiceberg's ``table.upsert(batch, join_cols=["id"])`` (load the table,
  upsert, commit), no proof (at-least-once).

Both tables merge their manifests (``commit.manifest-merge.enabled``) and keep the newest
:data:`KEEP_SNAPSHOTS` snapshots (eosink's ``keep_snapshots`` in its commit; the anchor's table
expired the same way after each batch, outside its timing), so that neither pays for a growing
history: what grows is the table. Per batch it times each path (wall clock, the whole batch); at
the end both tables must hold the same rows. Prints rows/s and the per-batch cost early (from
batch 10) and at the end.

    ./pants run packages/sink-iceberg/benchmarks:upsert -- --batches 240 --rows 2000
    python -m eosink_iceberg_benchmarks.upsert --batches 60 --rows 1000
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import statistics
import tempfile
import time
from typing import Any

import pyarrow as pa
import structlog

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner

EOSINK = "eosink-iceberg, mode=upsert"
ANCHOR = "pyiceberg table.upsert, no proof"
KEEP_SNAPSHOTS = 10
MERGE = {"commit.manifest-merge.enabled": "true"}

#: The updates of a batch hit keys the last RECENT batches inserted.
RECENT = 5


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


def held(catalog: Any, name: str) -> list[dict[str, Any]]:
    return catalog.load_table(name).scan().to_arrow().sort_by("id").to_pylist()


def measure(folder: str, batches: int, rows: int) -> dict[str, Any]:
    """Both paths over ``batches`` batches of the feed; seconds per batch of each."""
    from pyiceberg.catalog import load_catalog

    from eosink_iceberg.history import expire_beyond
    from eosink_iceberg.sink import IcebergSink

    os.makedirs(os.path.join(folder, "warehouse"), exist_ok=True)
    properties = {
        "type": "sql",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": f"file://{folder}/warehouse",
    }
    mine, theirs = "bench.eosink", "bench.anchor"
    sink = IcebergSink(
        table=mine,
        catalog=properties,
        create_namespace=True,
        mode="upsert",
        key=["id"],
        keep_snapshots=KEEP_SNAPSHOTS,
    )
    catalog = load_catalog("eosink", **properties)  # the sink's catalog name
    catalog.create_namespace_if_not_exists("bench")
    catalog.create_table(theirs, schema=change_feed(0, 2).schema, properties=MERGE)
    spent: dict[str, list[float]] = {EOSINK: [], ANCHOR: []}

    def eosink_batch(batch: int, data: pa.RecordBatch) -> None:
        ctx = BatchContext(sink="iceberg", writer_id="bench", batch_id=batch)
        half = data.num_rows // 2
        parts = [[data.slice(0, half)], [data.slice(half)]]
        outcome = run_batch(sink, ctx, data.schema, LocalRunner(parts))
        assert outcome.status == "committed", outcome

    def anchor_batch(batch: int, data: pa.RecordBatch) -> None:
        catalog.load_table(theirs).upsert(pa.Table.from_batches([data]), join_cols=["id"])

    paths = {EOSINK: eosink_batch, ANCHOR: anchor_batch}
    for batch in range(batches):
        data = change_feed(batch, rows)
        order = list(paths) if batch % 2 == 0 else list(reversed(paths))
        for name in order:
            began = time.perf_counter()
            paths[name](batch, data)
            spent[name].append(time.perf_counter() - began)
        if batch == 0:  # the sink created its table: it merges its manifests from now on
            with catalog.load_table(mine).transaction() as txn:
                txn.set_properties(MERGE)
        with catalog.load_table(theirs).transaction() as txn:  # maintenance, not timed
            expire_beyond(txn, KEEP_SNAPSHOTS)
    a, b = held(catalog, mine), held(catalog, theirs)
    if a != b or len(a) != table_rows(batches, rows):
        raise AssertionError(
            f"the two tables differ after {batches} batches: {len(a)} vs {len(b)} rows, "
            f"{table_rows(batches, rows)} expected"
        )
    return {"seconds": spent, "anchor": ANCHOR, "eosink": EOSINK}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=240)
    parser.add_argument("--rows", type=int, default=2000, help="rows per batch")
    parser.add_argument("--window", type=int, default=10, help="batches per median")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    folder = tempfile.mkdtemp(prefix="eosink-iceberg-upsert-", dir=args.dir)
    try:
        result = measure(folder, args.batches, args.rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
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
