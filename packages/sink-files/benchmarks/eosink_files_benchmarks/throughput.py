"""Benchmark: the files sink against Spark's own Parquet file sink and the ``noop`` sink.

    ./pants run packages/sink-files/benchmarks:throughput
    python -m eosink_files_benchmarks.throughput   # with the packages' sources on PYTHONPATH

One stream (default 5 micro-batches x 2,000,000 rows x 5 columns, a file source with one input
file per micro-batch) is written, in one Spark session, by:

* ``noop``: Spark's no-op sink, the cost of producing the rows (the ceiling);
* ``spark parquet``: Spark's built-in file sink (``format("parquet")``, its manifest log);
* ``python data source floor``: a Python data source whose writer drains its Arrow batches and
  writes nothing (:class:`Drain`): Spark's hand-over to Python alone, the floor of every
  data-source door; ``..., batches by rows`` runs it with
  ``spark.sql.execution.arrow.maxBytesPerBatch`` at ``Int.MaxValue`` (Spark then skips the
  byte check it makes after every row, see ``eosink.spark.executors.batches_by_rows``);
* ``eosink data source``: ``format("eosink-files")`` (needs the ``files`` entry point, i.e.
  eosink-files installed); rows reach Python as Arrow, the arrow file writer writes them;
  ``..., batches by rows`` as the floor's;
* ``eosink foreachBatch, spark writer``: ``foreachBatch(eosink.foreach_batch(...))`` with the
  default file writer, which lets Spark's own writer stage the files;
* ``eosink foreachBatch, arrow writer``: the same with ``file_writer="arrow"``;
* ``..., S3``: the data source and the arrow writer again, writing into a bucket of the
  loopback S3 server (``eosink.testing.s3``, moto in a child process, one mutating request at
  a time), with the ratio to the same sink on local disk (``--no-s3`` leaves them out).

The per-batch exactly-once cost of the driver as the history grows is measured by
:mod:`eosink_files_benchmarks.log_cost`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

WARMUP_ROWS = 200_000
S3_SUFFIX = ", S3"
BY_ROWS = ", batches by rows"
#: Spark's byte limit of an Arrow batch, and the value that turns its per-row check off.
ARROW_BYTES = ("spark.sql.execution.arrow.maxBytesPerBatch", str(2**31 - 1))


class DrainWriter(DataSourceStreamArrowWriter):
    """Reads every Arrow batch Spark hands over, writes nothing, commits nothing."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _batch in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's name
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803
        pass


class Drain(DataSource):
    """The floor of a data-source door: Spark's hand-over of the rows to Python, nothing else."""

    @classmethod
    def name(cls) -> str:
        return "eosink-bench-drain"

    def streamWriter(self, schema: Any, overwrite: bool) -> DrainWriter:  # noqa: N802
        return DrainWriter()


def with_conf(spark: Any, key: str, value: str, start: Callable[[], Any]) -> Callable[[], Any]:
    """``start`` with a SQL conf set while the query starts: a streaming query runs on a clone
    of the session made at its start, so the setting holds for that query alone."""

    def started() -> Any:
        before = spark.conf.get(key, None)
        spark.conf.set(key, value)
        try:
            return start()
        finally:
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)

    return started


def make_input(folder: str, batches: int, rows: int) -> None:
    import numpy as np

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(1)
    for n in range(batches):
        ids = np.arange(n * rows, (n + 1) * rows, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "user_id": rng.integers(0, 1_000_000, rows),
                "amount": rng.uniform(0, 1000, rows),
                "country": pa.array(rng.integers(0, 50, rows)).cast(pa.string()),
                "ts": pa.array(
                    (1_700_000_000_000_000 + ids * 1000).astype("datetime64[us]"),
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        )
        pq.write_table(table, os.path.join(folder, f"in-{n:04d}.parquet"), row_group_size=rows // 8)


SCHEMA = "id long, user_id long, amount double, country string, ts timestamp"


def stream(spark, source: str):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)


def timed(start) -> float:
    began = time.perf_counter()
    query = start()
    query.awaitTermination()
    return time.perf_counter() - began


def configs(
    spark,
    work: str,
    tag: str,
    source: str,
    has_entry_point: bool,
    s3: Any = None,
    partition_by: tuple[str, ...] = (),
):
    """(name, start) of every path, each writing the stream of ``source`` into ``work``.

    ``start`` is None where the path cannot run (no ``files`` entry point: no data source).
    With ``partition_by``, every file sink writes Hive-style partition folders of those columns.
    """
    import eosink
    from eosink_files.sink import FilesSink

    def out(name):
        return os.path.join(work, f"{tag}-{name}")

    def ck(name):
        return os.path.join(work, f"{tag}-{name}-ckpt")

    def base(name):
        return (
            stream(spark, source)
            .writeStream.option("checkpointLocation", ck(name))
            .trigger(availableNow=True)
        )

    yield "noop", lambda: base("noop").format("noop").start()

    def spark_parquet():
        writer = base("spark").format("parquet").option("path", out("spark"))
        return (writer.partitionBy(*partition_by) if partition_by else writer).start()

    yield "spark parquet", spark_parquet
    spark.dataSource.register(Drain)
    yield "python data source floor", lambda: base("drain").format(Drain.name()).start()
    yield "python data source floor" + BY_ROWS, with_conf(
        spark, *ARROW_BYTES, lambda: base("drain-rows").format(Drain.name()).start()
    )

    def door(name: str) -> Any:
        return (
            base(name)
            .format("eosink-files")
            .option("writerId", "bench")
            .option("path", out(name))
            .options(**({"partitionBy": ",".join(partition_by)} if partition_by else {}))
            .start()
        )

    yield "eosink data source", (lambda: door("ds")) if has_entry_point else None
    yield "eosink data source" + BY_ROWS, (
        with_conf(spark, *ARROW_BYTES, lambda: door("ds-rows")) if has_entry_point else None
    )
    for writer in ("spark", "arrow"):
        yield f"eosink foreachBatch, {writer} writer", lambda writer=writer: base(
            f"fb-{writer}"
        ).foreachBatch(
            eosink.foreach_batch(
                FilesSink(path=out(f"fb-{writer}"), file_writer=writer, partition_by=partition_by),
                writer_id="bench",
            )
        ).start()
    if s3 is not None:
        yield from s3_configs(base, tag, has_entry_point, s3)


def s3_configs(base, tag: str, has_entry_point: bool, s3: Any):
    """(name, start) of the paths that write into a fresh bucket of the loopback S3 server:
    the data source and the arrow writer, as :func:`configs` on local disk."""
    import eosink
    from eosink_files.sink import FilesSink

    bucket = s3.create_bucket()
    storage = s3.fsspec_options()
    spark_storage = {
        "storage.key": s3.access_key,
        "storage.secret": s3.secret_key,
        "storage.client_kwargs.endpoint_url": s3.url,
        "storage.client_kwargs.region_name": s3.region,
    }
    if has_entry_point:
        yield "eosink data source" + S3_SUFFIX, lambda: (
            base("ds-s3")
            .format("eosink-files")
            .option("writerId", "bench")
            .option("path", f"s3://{bucket}/{tag}-ds")
            .options(**spark_storage)
            .start()
        )
    yield "eosink foreachBatch, arrow writer" + S3_SUFFIX, lambda: base("fb-s3").foreachBatch(
        eosink.foreach_batch(
            FilesSink(path=f"s3://{bucket}/{tag}-fb", storage_options=storage),
            writer_id="bench",
        )
    ).start()


def run_spark(args, work: str, s3: Any = None) -> list[tuple[str, float | None]]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import eosink
    from eosink.registry import installed_sinks

    spark = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("eosink-files-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(args.cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", os.path.join(work, "spark-tmp"))
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.arrow_batch))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    has_entry_point = "files" in installed_sinks()
    if has_entry_point:
        eosink.register_data_sources(spark)

    warm = os.path.join(work, "warm-in")
    make_input(warm, 2, WARMUP_ROWS)
    for _name, start in configs(
        spark, work, "warm", warm, has_entry_point, s3
    ):  # JIT, Python workers, imports
        if start:
            timed(start)
    source = os.path.join(work, "in")
    make_input(source, args.batches, args.rows)
    results: dict[str, list[float]] = {}
    for rep in range(args.repeat):
        for name, start in configs(spark, work, f"r{rep}", source, has_entry_point, s3):
            results.setdefault(name, [])
            if start:
                results[name].append(timed(start))
    spark.stop()
    return [(name, min(times) if times else None) for name, times in results.items()]


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def fmt(r: tuple[str, ...]) -> str:
        cells = enumerate(zip(r, widths))
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in cells)

    print(fmt(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(fmt(r))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="eosink_files_benchmarks.throughput", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows per micro-batch")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="runs per sink; the best is shown")
    parser.add_argument(
        "--arrow-batch",
        type=int,
        default=10_000,
        help="spark.sql.execution.arrow.maxRecordsPerBatch",
    )
    parser.add_argument("--no-s3", action="store_true", help="leave out the S3 rows")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="eosink-files-bench-")
    try:
        total = args.batches * args.rows
        from eosink.testing.s3 import s3_server

        with nullcontext() if args.no_s3 else s3_server() as s3:
            results = run_spark(args, work, s3)
        by = dict(results)
        rows = []
        for name, secs in results:
            if secs is None:
                rows.append((name, "n/a", "n/a", "n/a", "n/a", ""))
                continue
            rate = total / secs
            local = by.get(name.removesuffix(S3_SUFFIX)) if name.endswith(S3_SUFFIX) else None
            rows.append(
                (
                    name,
                    f"{secs:.1f}",
                    f"{rate / 1e6:.2f}M",
                    f"{by['spark parquet'] / secs:.2f}x" if by.get("spark parquet") else "",
                    f"{by['noop'] / secs:.2f}x" if by.get("noop") else "",
                    f"{local / secs:.2f}x" if local else "",
                )
            )
        print(
            f"\n{args.batches} micro-batches x {args.rows:,} rows x 5 columns, "
            f"local[{args.cores}], "
            f"arrow batch {args.arrow_batch:,}, best of {args.repeat}"
        )
        print_table(
            rows, ("sink", "seconds", "rows/s", "vs spark parquet", "vs noop", "vs local disk")
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
