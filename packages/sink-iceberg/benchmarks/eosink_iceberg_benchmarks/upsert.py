"""Keyed upserts into Iceberg, exactly-once beside pyiceberg's own ``upsert`` (no Spark).

The change feed of ``eosink.testing.change_feed`` (``--batches`` batches of ``--rows``
rows keyed by ``id``, half of each later batch updating keys of the last few batches).
Interleaved in this process, batch by batch
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
import shutil
import tempfile
from typing import Any

import pyarrow as pa
import structlog

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.change_feed import change_feed, check_same, print_result, time_batch
from eosink.testing.local import LocalRunner

EOSINK = "eosink-iceberg, mode=upsert"
ANCHOR = "pyiceberg table.upsert, no proof"
KEEP_SNAPSHOTS = 10
MERGE = {"commit.manifest-merge.enabled": "true"}


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
        time_batch(paths, batch, data, spent)
        if batch == 0:  # the sink created its table: it merges its manifests from now on
            with catalog.load_table(mine).transaction() as txn:
                txn.set_properties(MERGE)
        with catalog.load_table(theirs).transaction() as txn:  # maintenance, not timed
            expire_beyond(txn, KEEP_SNAPSHOTS)
    a, b = held(catalog, mine), held(catalog, theirs)
    check_same(a, b, batches, rows)
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


if __name__ == "__main__":
    raise SystemExit(main())
