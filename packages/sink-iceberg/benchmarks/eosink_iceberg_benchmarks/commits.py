"""Benchmark of the iceberg sink's driver side (no Spark): the exactly-once overhead per batch
with the SQL catalog on SQLite, and how a batch's cost grows with the table's history.

    ./pants run packages/sink-iceberg/benchmarks:commits -- [--batches 1000] [--rows 100]
        [--keep-snapshots N] [--merge-manifests] [--expire-every N] [--dir /tmp/iceberg-bench]

Each batch runs the whole protocol (``is_committed``, ``init``, a write of one Parquet file,
``commit``). Interleaved with it, the **anchor**: a bare pyiceberg fast append of the same
files into a second table of the same history (load the table, append, commit: what any
pyiceberg writer does per batch, with no proof). The exactly-once overhead of a batch is
``is_committed + commit - anchor``.

Prints a table: per-phase medians over the first and the last window of batches, the overhead,
and the ratio of the last window's batch cost to the first's.

* default: no maintenance: every snapshot stays in the metadata, one manifest per append;
* ``--keep-snapshots N``: the sink's option, each commit expires all but the newest N
  snapshots (the anchor's commits too, the same way);
* ``--merge-manifests``: both tables set ``commit.manifest-merge.enabled``;
* ``--expire-every N``: the maintenance job instead, ``expire_snapshots`` of every snapshot
  but the current one every N batches (both tables).

With ``--keep-snapshots`` or ``--expire-every`` the anchor runs only in the measured windows
(its table bounded the same way, warmed before each window); otherwise at every batch, so that
both histories are as long.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pyarrow as pa

from eosink.plugin import BatchContext, hookimpl
from eosink.testing import run_batch
from eosink.testing.hook_timer import HookTimer
from eosink.testing.local import LocalRunner


class CommittedFiles:
    """Keeps the files the batch commits (for the anchor); a wrapper, as it must see them."""

    def __init__(self) -> None:
        self.files: list[Any] = []

    @hookimpl(wrapper=True)
    def commit(self, messages: list[Any]) -> Generator[None, Any, Any]:
        self.files = [f for m in messages for f in m.files]
        return (yield)


def batch_rows(batch: int, rows: int) -> pa.RecordBatch:
    ids = pa.array(range(batch * rows, (batch + 1) * rows), pa.int64())
    return pa.record_batch({"id": ids, "name": pa.array([f"n{i}" for i in range(rows)])})


def expire_all_but_current(table: Any) -> None:
    """What table maintenance does: expire old snapshots (the proof stays in a property)."""
    current = table.metadata.current_snapshot().snapshot_id
    old = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != current]
    if old:
        table.maintenance.expire_snapshots().by_ids(old).commit()


class Anchor:
    """A bare pyiceberg fast append of the sink's files into a table of its own."""

    def __init__(self, catalog: Any, schema: Any, keep: int, merge: bool) -> None:
        self.catalog = catalog
        self.keep = keep
        properties = {"commit.manifest-merge.enabled": "true"} if merge else {}
        self.name = "bench.anchor"
        catalog.create_table(self.name, schema=schema, properties=properties)

    def append(self, files: list[Any]) -> float:
        from eosink_iceberg.history import expire_beyond

        start = time.perf_counter()
        table = self.catalog.load_table(self.name)
        with table.transaction() as txn:
            snapshot = txn.update_snapshot()
            merge = table.metadata.properties.get("commit.manifest-merge.enabled") == "true"
            with snapshot.merge_append() if merge else snapshot.fast_append() as add:
                for f in files:
                    add.append_data_file(f.data_file())
            if self.keep:
                expire_beyond(txn, self.keep)
        return time.perf_counter() - start

    def expire(self) -> None:
        expire_all_but_current(self.catalog.load_table(self.name))


def medians(samples: dict[int, dict[str, float]], window: range) -> dict[str, float]:
    """The median ms of each phase over the batches of ``window``, and of the overhead
    (``is_committed + commit`` minus the anchor's append)."""
    picked = [samples[b] for b in window]
    out = {k: statistics.median(s[k] for s in picked) * 1000 for k in picked[0]}
    out["overhead"] = (
        statistics.median((s["is_committed"] + s["commit"] - s["anchor"]) for s in picked) * 1000
    )
    return out


def measure(
    folder: str | None,
    batches: int,
    *,
    rows: int = 100,
    window: int = 20,
    keep_snapshots: int = 0,
    merge_manifests: bool = False,
    expire_every: int = 0,
) -> dict[str, Any]:
    """Run ``batches`` batches; the medians (ms) of the first and the last window."""
    from pyiceberg.catalog import load_catalog

    from eosink_iceberg.catalog import load
    from eosink_iceberg.sink import IcebergSink

    work = Path(folder or tempfile.mkdtemp(prefix="eosink-iceberg-bench-"))
    (work / "warehouse").mkdir(parents=True, exist_ok=True)
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{work}/catalog.db",
        "warehouse": f"file://{work}/warehouse",
    }
    sink = IcebergSink(
        table="bench.events", catalog=catalog, create_namespace=True, keep_snapshots=keep_snapshots
    )
    anchor: Anchor | None = None
    bounded = bool(keep_snapshots or expire_every)
    first_window = range(1, 1 + window)  # batch 0 creates the table
    last_window = range(batches - window, batches)
    samples: dict[int, dict[str, float]] = {}
    for batch in range(batches):
        clock, committed = HookTimer(("is_committed", "init", "commit")), CommittedFiles()
        part = batch_rows(batch, rows)
        ctx = BatchContext(sink="iceberg", writer_id="bench", batch_id=batch, query_id="q")
        start = time.perf_counter()
        run_batch(sink, ctx, part.schema, LocalRunner([[part]]), plugins=[clock, committed])
        took = {**clock.current, "batch": time.perf_counter() - start}
        if batch == 0:
            if merge_manifests:
                with load(sink.options).transaction() as txn:
                    txn.set_properties({"commit.manifest-merge.enabled": "true"})
            anchor = Anchor(
                load_catalog("eosink", **catalog),
                load(sink.options).metadata.schema(),
                keep_snapshots,
                merge_manifests,
            )
        measured = batch in first_window or batch in last_window
        if anchor is not None and (measured or not bounded):
            if bounded and batch == last_window.start:
                for _ in range(keep_snapshots):  # the anchor's history as long as the sink's
                    anchor.append(committed.files)
            took["anchor"] = anchor.append(committed.files)
        if measured:
            samples[batch] = took
        if expire_every and batch % expire_every == expire_every - 1:
            expire_all_but_current(load(sink.options))
            if anchor is not None:
                anchor.expire()
    if not folder:
        shutil.rmtree(work, ignore_errors=True)
    first, last = medians(samples, first_window), medians(samples, last_window)
    return {
        "batches": batches,
        "rows": rows,
        "window": window,
        "keep_snapshots": keep_snapshots,
        "merge_manifests": merge_manifests,
        "expire_every": expire_every,
        "first": first,
        "last": last,
        "ratio": last["batch"] / first["batch"],
    }


def report(result: dict[str, Any]) -> str:
    window, batches = result["window"], result["batches"]
    setup = []
    if result["keep_snapshots"]:
        setup.append(f"keep_snapshots={result['keep_snapshots']}")
    if result["merge_manifests"]:
        setup.append("commit.manifest-merge.enabled")
    if result["expire_every"]:
        setup.append(f"snapshots expired every {result['expire_every']} batches")
    lines = [
        f"iceberg sink, SQL catalog on SQLite, {batches} batches x {result['rows']} rows"
        + (f", {', '.join(setup)}" if setup else ", no maintenance"),
        f"{'median ms':<34}{f'batches 1-{window}':>16}{f'last {window}':>16}",
    ]
    names = {
        "is_committed": "is_committed",
        "init": "init",
        "commit": "commit",
        "batch": "whole batch",
        "anchor": "anchor (bare pyiceberg append)",
        "overhead": "overhead (is_committed+commit-anchor)",
    }
    for key, name in names.items():
        lines.append(f"{name:<34}{result['first'][key]:>16.1f}{result['last'][key]:>16.1f}")
    lines.append(
        f"batch cost, last window vs batches 1-{window}: {result['ratio']:.2f}x "
        f"(batch {batches} vs batch {1 + window // 2})"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--keep-snapshots", type=int, default=0)
    parser.add_argument("--merge-manifests", action="store_true")
    parser.add_argument(
        "--expire-every",
        type=int,
        default=0,
        help="expire every snapshot but the current one every N batches (table maintenance)",
    )
    args = parser.parse_args()
    result = measure(
        args.dir,
        args.batches,
        rows=args.rows,
        window=args.window,
        keep_snapshots=args.keep_snapshots,
        merge_manifests=args.merge_manifests,
        expire_every=args.expire_every,
    )
    print(report(result), flush=True)


if __name__ == "__main__":
    main()
