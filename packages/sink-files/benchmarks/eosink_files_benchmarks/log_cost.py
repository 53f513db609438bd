"""Benchmark: the files sink's per-batch exactly-once cost as the history grows.

    ./pants run packages/sink-files/benchmarks:log-cost
    python -m eosink_files_benchmarks.log_cost  # the packages' sources and tests on PYTHONPATH

For each history length (default 10, 1,000, 10,000 and 100,000 batches of one writer) a
folder is synthesized on local disk holding the ``_spark_metadata`` log Spark's format holds
at that batch, for a stream with a 100 ms trigger, two files per batch and the default options
(``compact_interval`` 10, ``log_cleanup_delay_s`` 600):

* the latest compact lists every file of the history, with the proofs it carries and its
  closing line, as the sink writes it; the deltas after it are complete;
* the older log files still inside the cleanup delay are there too (600 s / 100 ms = 6,000
  names, with modification times 100 ms apart), as small stand-ins: the sink lists, ages and
  deletes them but never reads them. Data files of the history are not created (nothing reads
  them); the measured batches write theirs.

Then 20 batches run through the sink's hooks at the trigger's pace, as the core runs them on
the driver: ``is_committed`` + ``init`` (timed), the executors' part files (not timed),
``commit`` (timed). Printed: the median per-batch cost, its ratio to batch 10's, the first
batch of a fresh process (it lists the log once), the compaction commit among the 20 and the
size of the compact it wrote. No Spark is involved: this is the driver's own cost.

A second table compares local disk with S3 (a bucket of the loopback S3 server,
``eosink.testing.s3``: moto in a child process, one mutating request at a time) at a short
history (``--s3-at``, 10 batches by default; the history is synthesized on disk and uploaded):
the median of ``is_committed`` + ``commit`` (the exactly-once overhead) and of the three hooks,
with the ratio of S3 to local disk. ``--no-s3`` leaves it out.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time

import pyarrow as pa

from files_helpers import synthesize_history

WRITER = "bench"


def run_batches(
    out: str, first: int, count: int, trigger_s: float, storage_options: dict | None = None
) -> dict[str, float]:
    from eosink.plugin import BatchContext
    from eosink.model import Proof
    from eosink_files.sink import FilesMessage, FilesSink
    from eosink_files.writers import WrittenFile

    # One sink for the query, as foreachBatch keeps it.
    sink = FilesSink(path=out, storage_options=storage_options)
    store = sink._store()
    schema = pa.schema([("id", pa.int64())])
    costs, overheads, compactions, cold = [], [], [], None
    for batch in range(first, first + count):
        began = time.perf_counter()
        ctx = BatchContext("files", WRITER, batch, query_id="q")
        assert sink.is_committed(ctx) is None
        checked = time.perf_counter()
        state = sink.init(ctx, schema)
        driver = time.perf_counter() - began
        files = []
        for p in range(2):  # the executors' part files
            name = f"part-{p:05d}-{state.attempt}-{p}-c000.snappy.parquet"
            with store.open_write(name) as f:
                f.write(b"PAR1" * 64)
            files.append(WrittenFile(name, 256, int(time.time() * 1000), 1))
        messages = [FilesMessage(files=(f,), rows=1) for f in files]
        began_commit = time.perf_counter()
        sink.commit(ctx, state, messages, Proof(WRITER, batch, "q", rows=2))
        commit = time.perf_counter() - began_commit
        cost = (driver + commit) * 1000
        if cold is None:
            cold = cost
        else:
            costs.append(cost)
            overheads.append((checked - began + commit) * 1000)
        if (batch + 1) % 10 == 0:
            compactions.append(cost)
        time.sleep(max(0.0, trigger_s - cost / 1000))
    return {
        "median_ms": statistics.median(costs),
        "overhead_ms": statistics.median(overheads),
        "cold_ms": cold,
        "compaction_ms": max(compactions) if compactions else float("nan"),
    }


def local_vs_s3(work: str, at: int, batches: int, trigger_s: float) -> None:
    """The second table: the same batches on local disk and on the loopback S3 server."""
    import fsspec

    from eosink.testing.s3 import s3_server

    local = os.path.join(work, "local")
    synthesize_history(local, at, trigger_s=trigger_s, writer=WRITER, query="q")
    results = {"local disk": run_batches(local, at, batches, trigger_s)}
    with s3_server() as endpoint:
        bucket, options = endpoint.create_bucket(), endpoint.fsspec_options()
        staged = os.path.join(work, "staged")
        synthesize_history(staged, at, trigger_s=trigger_s, writer=WRITER, query="q")
        fs = fsspec.filesystem("s3", **options)
        fs.put(staged + "/", f"{bucket}/out/", recursive=True)
        out = f"s3://{bucket}/out"
        results["S3 (loopback)"] = run_batches(out, at, batches, trigger_s, options)
    base = results["local disk"]
    print(
        f"\nfiles sink, local disk vs S3 (moto on loopback), batch {at}, 2 files per batch, "
        f"median of {batches - 1} batches"
    )
    print_table(
        [
            (
                where,
                f"{r['overhead_ms']:.2f}",
                f"{r['overhead_ms'] / base['overhead_ms']:.1f}x",
                f"{r['median_ms']:.2f}",
                f"{r['median_ms'] / base['median_ms']:.1f}x",
                f"{r['cold_ms']:.1f}",
            )
            for where, r in results.items()
        ],
        (
            "store",
            "is_committed+commit ms",
            "vs local",
            "+init ms",
            "vs local",
            "cold ms",
        ),
    )


def compact_bytes(out: str) -> int:
    from eosink_files.log import LOG_DIR

    folder = os.path.join(out, LOG_DIR)
    names = [n for n in os.listdir(folder) if n.endswith(".compact")]
    latest = max(names, key=lambda n: int(n.split(".")[0]))
    return os.path.getsize(os.path.join(folder, latest))


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def fmt(r: tuple[str, ...]) -> str:
        return "  ".join(str(c).rjust(w) for c, w in zip(r, widths))

    print(fmt(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(fmt(r))


def history(work: str, at: list[int], batches: int, trigger_s: float) -> list[dict[str, float]]:
    """``run_batches``' figures at each history length, on a log synthesized in ``work``."""
    results = []
    for n in at:
        out = os.path.join(work, f"at-{n}")
        began = time.perf_counter()
        synthesize_history(out, n, trigger_s=trigger_s, writer=WRITER, query="q")
        built = time.perf_counter() - began
        log_files = len(os.listdir(os.path.join(out, "_spark_metadata")))
        result = run_batches(out, n, batches, trigger_s)
        size = compact_bytes(out)
        shutil.rmtree(out, ignore_errors=True)
        results.append(
            {"at": n, "log_files": log_files, "compact_bytes": size, "synth_s": built, **result}
        )
    return results


def main(argv: list[str] | None = None) -> int:
    import structlog

    parser = argparse.ArgumentParser(
        prog="eosink_files_benchmarks.log_cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--at", type=int, nargs="+", default=[10, 1_000, 10_000, 100_000])
    parser.add_argument("--batches", type=int, default=21, help="measured batches (+1 cold)")
    parser.add_argument("--trigger-ms", type=float, default=100.0)
    parser.add_argument("--work", default=None, help="a folder on the disk to measure")
    parser.add_argument("--s3-at", type=int, default=10, help="history of the S3 comparison")
    parser.add_argument("--no-s3", action="store_true", help="leave out the S3 comparison")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    trigger = args.trigger_ms / 1000
    work = tempfile.mkdtemp(prefix="eosink-files-logbench-", dir=args.work)
    rows, base = [], None
    try:
        for result in history(work, args.at, args.batches, trigger):
            base = base or result["median_ms"]
            rows.append(
                (
                    f"{result['at']:,}",
                    str(result["log_files"]),
                    f"{result['median_ms']:.2f}",
                    f"{result['median_ms'] / base:.2f}x",
                    f"{result['cold_ms']:.1f}",
                    f"{result['compaction_ms']:.1f}",
                    f"{result['compact_bytes'] / 1e6:.1f}",
                    f"{result['synth_s']:.0f}",
                )
            )
        print_history(rows, args)
        if not args.no_s3:
            local_vs_s3(work, args.s3_at, args.batches, trigger)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def print_history(rows: list[tuple[str, ...]], args: argparse.Namespace) -> None:
    if rows:
        print(
            f"\nfiles sink, per-batch driver cost (is_committed + init + commit), one writer, "
            f"2 files per batch, {args.trigger_ms:.0f} ms trigger, local disk, median of "
            f"{args.batches - 1} batches"
        )
        print_table(
            rows,
            (
                "batch",
                "log files",
                "median ms",
                "vs batch 10",
                "cold ms",
                "compaction ms",
                "compact MB",
                "synth s",
            ),
        )


if __name__ == "__main__":
    sys.exit(main())
