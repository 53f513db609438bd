"""Benchmark of the iceberg sink's driver side (no Spark): the exactly-once overhead per batch
with the SQL catalog on SQLite, and how a batch's cost grows with the table's history.

    python bench_iceberg.py [--batches 1000] [--rows 100] [--dir /tmp/iceberg-bench]

Prints a table: per-phase medians (is_committed, init, commit) over the first and the last
window of batches, and the ratio of the last window's batch cost to the first's. Each fast
append adds one manifest and the sink does not merge them, so the commit (which writes a
manifest list naming every live manifest) grows with the number of batches until the table's
maintenance rewrites manifests, and the table metadata (which pyiceberg copies several times
per commit) holds every snapshot until they expire: ``--expire-every N`` runs that maintenance.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from eosink.plugin import BatchContext, hookimpl
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner


class PhaseClock:
    """Times every phase of a batch (a pluggy wrapper, as the core's own logging does)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}

    def _timed(self, name: str):
        start = time.perf_counter()
        result = yield
        self.times[name] = time.perf_counter() - start
        return result

    @hookimpl(wrapper=True)
    def is_committed(self):
        return (yield from self._timed("is_committed"))

    @hookimpl(wrapper=True)
    def init(self):
        return (yield from self._timed("init"))

    @hookimpl(wrapper=True)
    def commit(self):
        return (yield from self._timed("commit"))


def batch_rows(batch: int, rows: int) -> pa.RecordBatch:
    ids = pa.array(range(batch * rows, (batch + 1) * rows), pa.int64())
    return pa.record_batch({"id": ids, "name": pa.array([f"n{i}" for i in range(rows)])})


def expire_all_but_current(sink) -> None:
    """What table maintenance does: expire old snapshots (the proof stays in a property)."""
    from eosink_iceberg.catalog import load

    table = load(sink.options)
    current = table.metadata.current_snapshot().snapshot_id
    old = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != current]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()


def main() -> None:
    from eosink_iceberg.sink import IcebergSink

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--dir", default=None)
    parser.add_argument(
        "--expire-every",
        type=int,
        default=0,
        help="expire every snapshot but the current one every N batches (table maintenance)",
    )
    args = parser.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="eosink-iceberg-bench-"))
    (folder / "warehouse").mkdir(parents=True, exist_ok=True)
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": f"file://{folder}/warehouse",
    }
    sink = IcebergSink(table="bench.events", catalog=catalog, create_namespace=True)
    samples: list[dict[str, float]] = []
    for batch in range(args.batches):
        clock = PhaseClock()
        part = batch_rows(batch, args.rows)
        ctx = BatchContext(sink="iceberg", writer_id="bench", batch_id=batch, query_id="q")
        start = time.perf_counter()
        run_batch(sink, ctx, part.schema, LocalRunner([[part]]), plugins=[clock])
        samples.append({**clock.times, "batch": time.perf_counter() - start})
        if args.expire_every and batch % args.expire_every == args.expire_every - 1:
            expire_all_but_current(sink)
    first = samples[1 : 1 + args.window]  # batch 0 creates the table
    last = samples[-args.window :]
    expiry = f", snapshots expired every {args.expire_every}" if args.expire_every else ""
    print(f"iceberg sink, SQL catalog on SQLite, {args.batches} batches x {args.rows} rows{expiry}")
    head = (f"batches 1-{args.window}", f"last {args.window}")
    print(f"{'phase (median ms)':<22}{head[0]:>16}{head[1]:>16}")
    for phase in ("is_committed", "init", "commit", "batch"):
        a = statistics.median(s[phase] for s in first) * 1000
        b = statistics.median(s[phase] for s in last) * 1000
        print(f"{phase:<22}{a:>16.1f}{b:>16.1f}")
    overhead = [s["is_committed"] + s["commit"] for s in last]
    print(
        f"exactly-once overhead (is_committed + commit), median of last window: "
        f"{statistics.median(overhead) * 1000:.1f} ms"
    )
    ratio = statistics.median(s["batch"] for s in last) / statistics.median(
        s["batch"] for s in first
    )
    print(f"batch cost at batch {args.batches} vs batch {1 + args.window // 2}: {ratio:.2f}x")
    if not args.dir:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
