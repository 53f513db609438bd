"""Throughput of the delta sink beside Spark's parquet sink and eosink-files, on one stream.

The stream: ``--batches`` micro-batches of ``--rows`` rows x 5 columns (Parquet files read with
``maxFilesPerTrigger``, two files a batch), on ``local[--cores]``. Every sink gets the same
stream from a fresh checkpoint; rows/s is the whole query's wall time (start to the end of the
last batch). Both sinks run through the data source and through ``foreachBatch`` with each
file writer (``arrow``: rows handed to Python as Arrow batches; ``spark``: Spark's own
Parquet writer); "vs files" compares each delta run with the files run of the same kind.
The commit overhead is the median time of the sink's ``commit`` hook (the Delta
commit), measured through the foreachBatch front door. The two ``S3`` rows write the same stream
into a bucket of the loopback S3 server (``eosink.testing.s3``: moto in a child process, one
mutating request at a time; ``--no-s3`` leaves them out), with the ratio to the same front door
on local disk.

    ./pants run packages/sink-delta/benchmarks:throughput             # 5 x 2M rows, local[2]
    ./pants run packages/sink-delta/benchmarks:throughput -- --rows 200000 --batches 3  # dev loop
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

import structlog

import eosink
from eosink.testing.hook_timer import HookTimer
from eosink.testing.s3 import s3_server
from eosink.testing.spark import local_spark
from eosink.testing.stream_input import SCHEMA, timed_query, write_stream_input

FILES_PER_BATCH = 2  # one task per file: every core gets work


def data_source(
    stream: Callable[[], Any],
    out: Callable[[str], tuple[str, str]],
    source: str,
    options: dict[str, str] | None = None,
) -> Callable[[], Any]:
    """A run through the Spark data source ``source`` (e.g. ``eosink-delta``) into
    ``out(source)``, with the data source's ``options``."""

    def start() -> Any:
        target, ckpt = out(source)
        return (
            stream()
            .format(source)
            .option("writerId", "bench")
            .option("path", target)
            .option("checkpointLocation", ckpt)
            .options(**(options or {}))
            .start()
        )

    return start


def delta_paths(
    stream: Callable[[], Any],
    out: Callable[[str], tuple[str, str]],
    timer: Any = None,
    partition_by: tuple[str, ...] = (),
) -> dict[str, Callable[[], Any]]:
    """The delta sink's paths (name -> start): the data source and foreachBatch per writer.

    ``stream()`` is the stream's writer (source and trigger set), ``out(name)`` a fresh
    (table, checkpoint) pair; ``timer`` a plugin added to the foreachBatch runs.
    """
    options = {"partitionBy": ",".join(partition_by)} if partition_by else {}

    def delta_foreach(file_writer: str) -> Callable[[], Any]:
        def start() -> Any:
            target, ckpt = out(f"eosink-delta-fb-{file_writer}")
            sink = eosink.sink(
                "delta", path=target, file_writer=file_writer, partition_by=partition_by
            )
            plugins = [timer] if timer else []
            writer = eosink.foreach_batch(sink, writer_id="bench", plugins=plugins)
            return stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

        return start

    return {
        "eosink-delta (data source)": data_source(stream, out, "eosink-delta", options),
        "eosink-delta (fB, arrow)": delta_foreach("arrow"),
        "eosink-delta (fB, spark)": delta_foreach("spark"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--no-s3", action="store_true", help="leave out the S3 rows")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        endpoint = None if args.no_s3 else stack.enter_context(s3_server())
        measure(args, endpoint)


def files_paths(stream: Callable[[], Any], out: Callable[[str], tuple[str, str]], work: str):
    """The eosink-files paths beside delta's (none when eosink-files is not installed)."""
    try:
        eosink.sink("files", path=os.path.join(work, "probe"))
    except Exception as exc:  # noqa: BLE001 - report and go on without it
        print(f"eosink-files not available: {exc}")
        return {}

    def files_foreach(file_writer: str) -> Callable[[], Any]:
        def start() -> Any:
            target, ckpt = out(f"eosink-files-fb-{file_writer}")
            sink = eosink.sink("files", path=target, file_writer=file_writer)
            writer = eosink.foreach_batch(sink, writer_id="bench")
            return stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

        return start

    return {
        "eosink-files (data source)": data_source(stream, out, "eosink-files"),
        "eosink-files (fB, arrow)": files_foreach("arrow"),
        "eosink-files (fB, spark)": files_foreach("spark"),
    }


def s3_paths(
    stream: Callable[[], Any],
    out: Callable[[str], tuple[str, str]],
    endpoint: Any,
    s3_tables: dict[str, str],
) -> dict[str, Callable[[], Any]]:
    """Delta's data source and foreachBatch arrow paths into a bucket of the loopback S3
    server; each run's table is recorded in ``s3_tables``."""
    storage = endpoint.object_store_options()

    def s3_table(name: str) -> tuple[str, str]:
        s3_tables[name] = f"s3://{endpoint.create_bucket()}/table"  # fresh for every run
        return s3_tables[name], out(name)[1]

    def delta_source_s3() -> Any:
        target, ckpt = s3_table("eosink-delta-s3")
        query = stream().format("eosink-delta").option("writerId", "bench")
        query = query.options(**{f"storage.{k}": v for k, v in storage.items()})
        return query.option("path", target).option("checkpointLocation", ckpt).start()

    def delta_foreach_s3() -> Any:
        target, ckpt = s3_table("eosink-delta-fb-arrow-s3")
        sink = eosink.sink("delta", path=target, storage_options=storage)
        writer = eosink.foreach_batch(sink, writer_id="bench")
        return stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

    return {
        "eosink-delta (data source, S3)": delta_source_s3,
        "eosink-delta (fB, arrow, S3)": delta_foreach_s3,
    }


def check_counts(work: str, s3_tables: dict[str, str], endpoint: Any, total: int) -> None:
    """Every delta table, read back by delta-rs, holds every row of the stream."""
    from deltalake import DeltaTable

    for name in ("eosink-delta", "eosink-delta-fb-arrow", "eosink-delta-fb-spark"):
        held = DeltaTable(os.path.join(work, name)).count()
        assert held == total, f"{name}: {held} rows, expected {total}"
    for name, uri in s3_tables.items():
        held = DeltaTable(uri, storage_options=endpoint.object_store_options()).count()
        assert held == total, f"{name}: {held} rows, expected {total}"


def print_table(
    args: argparse.Namespace, seconds: dict[str, float], total: int, timer: HookTimer
) -> None:
    base = seconds["spark parquet (built-in)"]
    print(f"\n{args.batches} micro-batches x {args.rows:,} rows x 5 columns, local[{args.cores}]")
    print(
        f"{'sink':34} {'seconds':>8} {'rows/s':>12} {'vs spark':>9} {'vs files':>9} "
        f"{'vs local':>9}"
    )
    for name, s in seconds.items():
        # the files sink through the same front door and file writer
        twin = seconds.get(name.replace("eosink-delta", "eosink-files"))
        vs_files = f"{twin / s:8.2f}x" if twin and name.startswith("eosink-delta") else ""
        local = seconds.get(name.replace(", S3", ""))  # the same front door on local disk
        vs_local = f"{local / s:8.2f}x" if local and name.endswith("S3)") else ""
        print(f"{name:34} {s:8.1f} {total / s:12,.0f} {base / s:8.2f}x {vs_files:>9} {vs_local:>9}")
    commits = timer.seconds("commit")
    median_ms = statistics.median(commits) * 1000 if commits else float("nan")
    print(
        f"\ndelta commit (driver, commit hook) median: {median_ms:.1f} ms "
        f"over {len(commits)} batches; all: " + ", ".join(f"{d * 1000:.0f}" for d in commits)
    )


def measure(args: argparse.Namespace, endpoint: Any) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    work = args.workdir or tempfile.mkdtemp(prefix="eosink-delta-bench-")
    source = os.path.join(work, "source")
    if not os.path.exists(source):
        write_stream_input(source, args.batches, args.rows, FILES_PER_BATCH)
    spark = local_spark(cores=args.cores)
    eosink.register_data_sources(spark)
    total = args.batches * args.rows

    warm_source = os.path.join(work, "warm-source")
    if not os.path.exists(warm_source):
        write_stream_input(warm_source, 1, 20_000, FILES_PER_BATCH)
    reading = [warm_source]  # the warm-up runs read a small source first

    def stream() -> Any:
        return (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", FILES_PER_BATCH)
            .parquet(reading[0])
            .writeStream.trigger(availableNow=True)
        )

    def out(name: str) -> tuple[str, str]:
        target, checkpoint = os.path.join(work, name), os.path.join(work, name + "-ckpt")
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)
        return target, checkpoint

    def spark_parquet() -> Any:
        target, ckpt = out("spark-parquet")
        return (
            stream()
            .format("parquet")
            .option("path", target)
            .option("checkpointLocation", ckpt)
            .start()
        )

    runs: dict[str, Callable[[], Any]] = {"spark parquet (built-in)": spark_parquet}
    runs.update(files_paths(stream, out, work))
    timer = HookTimer(("commit",))
    runs.update(delta_paths(stream, out, timer))
    s3_tables: dict[str, str] = {}
    if endpoint is not None:
        runs.update(s3_paths(stream, out, endpoint, s3_tables))

    for start in runs.values():  # warm-up: JIT, imports, Python workers of every path
        timed_query(start)
    reading[0] = source
    timer.clear()
    seconds = {name: timed_query(start) for name, start in runs.items()}
    check_counts(work, s3_tables, endpoint, total)
    print_table(args, seconds, total, timer)
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
