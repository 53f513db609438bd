"""Keyed upserts into Delta, exactly-once beside delta-rs' own MERGE (no Spark).

The change feed of ``eosink.testing.change_feed`` (``--batches`` batches of ``--rows``
rows keyed by ``id``, half of each later batch updating keys of the last few batches).
Interleaved in this process, batch by batch
(their order alternating), two paths upsert the same rows into two tables of their own:

* **eosink-delta**, ``mode="upsert", key=["id"]`` on the delta-rs engine: the whole protocol
  through the kit's ``run_batch`` with the batch in two partitions (executors in this process):
  the batch's files staged, then one Delta commit that removes the files holding the batch's
  keys (pruned by the key's min/max statistics), adds their survivors and the batch, and
  records the proof (``txn``);
* **the anchor**, delta-rs' own
  ``DeltaTable.merge(...).when_matched_update_all().when_not_matched_insert_all().execute()``
  of the batch, no proof (at-least-once).

Per batch it times each path (wall clock, the whole batch); at the end both tables must hold
the same rows. Prints rows/s and the per-batch cost early (from batch 10) and at the end.

    ./pants run packages/sink-delta/benchmarks:upsert -- --batches 240 --rows 2000
    python -m eosink_delta_benchmarks.upsert --batches 60 --rows 1000
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

EOSINK = "eosink-delta, mode=upsert (delta-rs engine)"
ANCHOR = "delta-rs MERGE (when_matched_update_all + when_not_matched_insert_all), no proof"


def merge(path: str, batch: pa.RecordBatch) -> None:
    """The anchor: delta-rs' MERGE of the batch on its key."""
    from deltalake import DeltaTable

    (
        DeltaTable(path)
        .merge(source=batch, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def held(path: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().sort_by("id").to_pylist()


def measure(folder: str, batches: int, rows: int) -> dict[str, Any]:
    """Both paths over ``batches`` batches of the feed; seconds per batch of each."""
    from deltalake import DeltaTable

    from eosink_delta.sink import DeltaSink

    mine, theirs = os.path.join(folder, "eosink"), os.path.join(folder, "anchor")
    sink = DeltaSink(path=mine, mode="upsert", key=["id"])
    DeltaTable.create(theirs, schema=change_feed(0, 2).schema)
    spent: dict[str, list[float]] = {EOSINK: [], ANCHOR: []}

    def eosink_batch(batch: int, data: pa.RecordBatch) -> None:
        ctx = BatchContext(sink="delta", writer_id="bench", batch_id=batch)
        half = data.num_rows // 2
        parts = [[data.slice(0, half)], [data.slice(half)]]
        outcome = run_batch(sink, ctx, data.schema, LocalRunner(parts))
        assert outcome.status == "committed", outcome

    paths = {EOSINK: eosink_batch, ANCHOR: lambda batch, data: merge(theirs, data)}
    for batch in range(batches):
        data = change_feed(batch, rows)
        time_batch(paths, batch, data, spent)
    a, b = held(mine), held(theirs)
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
    folder = tempfile.mkdtemp(prefix="eosink-delta-upsert-", dir=args.dir)
    try:
        result = measure(folder, args.batches, args.rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print_result(result, args.batches, args.rows, args.window)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
