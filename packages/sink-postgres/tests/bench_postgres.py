"""Throughput of the postgres sink beside Spark's JDBC writer and a bare COPY loop, on one stream.

The stream: ``--batches`` micro-batches of ``--rows`` rows x 5 columns (Parquet files read with
``maxFilesPerTrigger``, two files a batch), on ``local[--cores]``, into a PostgreSQL server of
its own (``eosink.testing.postgres``: the machine's binaries, loopback). Every run writes a
fresh table from a fresh checkpoint; rows/s is the whole query's wall time. The runs:

* eosink-postgres through the data source (``format("eosink-postgres")``) and ``foreachBatch``;
* Spark's own JDBC writer (``df.write.jdbc`` in ``foreachBatch``: each partition commits on its
  own, at-least-once), with the PostgreSQL JDBC driver jar (``--jdbc-jar``; by default the
  newest ``org/postgresql/postgresql/*/postgresql-*.jar`` of the local Maven cache);
* a bare COPY loop (``foreachBatch`` + ``mapInArrow``: each task COPYs its rows straight into
  the table with the sink's own row conversion; no staging, no proof: at-least-once).

The exactly-once overhead per batch is the median time of the driver's hooks
(``is_committed`` + ``init`` + ``commit``) minus nothing: all of it is what a bare loop does not
do (the commit moves the staged rows, which is the part that grows with the batch).

    ./pants run packages/sink-postgres/tests:bench            # 5 x 1M rows, local[2]
    python packages/sink-postgres/tests/bench_postgres.py --rows 100000 --batches 3
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

import eosink
from eosink.plugin import hookimpl
from eosink.testing.postgres import postgres_server_running
from eosink.testing.spark import local_spark

SCHEMA = "id long, name string, amount double, day date, ts timestamp"
FILES_PER_BATCH = 2  # one task per file: every core gets work
PHASES = ("is_committed", "init", "commit")


def make_source(folder: str, batches: int, rows: int) -> None:
    os.makedirs(folder)
    rows //= FILES_PER_BATCH
    for b in range(batches * FILES_PER_BATCH):
        start = b * rows
        table = pa.table(
            {
                "id": pa.array(range(start, start + rows), pa.int64()),
                "name": pa.array([f"name-{i % 10_000}" for i in range(start, start + rows)]),
                "amount": pa.array([i * 0.25 for i in range(start, start + rows)], pa.float64()),
                "day": pa.array([19_000 + (i % 30) for i in range(rows)], pa.int32()).cast(
                    pa.date32()
                ),
                "ts": pa.array(
                    [1_700_000_000_000_000 + i * 1_000 for i in range(rows)], pa.int64()
                ).cast(pa.timestamp("us", tz="UTC")),
            }
        )
        pq.write_table(table, os.path.join(folder, f"part-{b:03d}.parquet"))


class DriverTimer:
    """A cross-cutting plugin: the driver's time in the exactly-once hooks, per batch."""

    def __init__(self) -> None:
        self.current = 0.0
        self.per_batch: list[float] = []
        self.commits: list[float] = []

    def _timed(self, phase: str):  # noqa: ANN202
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            spent = time.perf_counter() - started
            self.current += spent
            if phase == "commit":
                self.commits.append(spent)
                self.per_batch.append(self.current)
                self.current = 0.0

    @hookimpl(wrapper=True)
    def is_committed(self):  # noqa: ANN201
        return (yield from self._timed("is_committed"))

    @hookimpl(wrapper=True)
    def init(self):  # noqa: ANN201
        return (yield from self._timed("init"))

    @hookimpl(wrapper=True)
    def commit(self):  # noqa: ANN201
        return (yield from self._timed("commit"))


def find_jdbc_jar() -> str | None:
    pattern = os.path.expanduser("~/.m2/repository/org/postgresql/postgresql/*/postgresql-*.jar")
    jars = sorted(j for j in glob.glob(pattern) if not j.endswith(("-sources.jar", "-javadoc.jar")))
    return jars[-1] if jars else None


def timed(start: Callable[[], Any]) -> float:
    began = time.perf_counter()
    query = start()
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(str(query.exception()))
    return time.perf_counter() - began


def bare_copy(url: str, table: str) -> Callable[[Any, int], None]:
    """foreachBatch: every task COPYs its rows into the table, committing on its own."""

    def copy_partition(batches):  # runs on the executors
        import psycopg
        from eosink_postgres.types import copy_rows, copy_type, pg_type

        rows = 0
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            with cur.copy(
                f"COPY {table} (id, name, amount, day, ts) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                for batch in batches:
                    if batch.num_rows == 0:
                        continue
                    copy.set_types([copy_type(pg_type(f)) for f in batch.schema])
                    for row in copy_rows(batch):
                        copy.write_row(row)
                    rows += batch.num_rows
        yield pa.record_batch({"rows": pa.array([rows], pa.int64())})

    def run(df: Any, batch_id: int) -> None:
        df.mapInArrow(copy_partition, "rows long").collect()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--jdbc-jar", default=None, help="the PostgreSQL JDBC driver jar")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with postgres_server_running() as server:
        measure(args, server)


def measure(args: argparse.Namespace, server: Any) -> None:
    import psycopg

    work = args.workdir or tempfile.mkdtemp(prefix="eosink-postgres-bench-")
    source = os.path.join(work, "source")
    if not os.path.exists(source):
        make_source(source, args.batches, args.rows)
    warm = os.path.join(work, "warm-source")
    if not os.path.exists(warm):
        make_source(warm, 1, 20_000)
    jar = args.jdbc_jar or find_jdbc_jar()
    spark = local_spark(cores=args.cores, **({"spark.jars": jar} if jar else {}))
    eosink.register_data_sources(spark)
    url = server.url()
    total = args.batches * args.rows
    reading = [warm]

    def stream() -> Any:
        return (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", FILES_PER_BATCH)
            .parquet(reading[0])
            .writeStream.trigger(availableNow=True)
        )

    def fresh(name: str) -> tuple[str, str]:
        table = "public." + name.replace("-", "_")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(
                f"CREATE TABLE {table} (id bigint, name text, amount double precision, "
                "day date, ts timestamptz)"
            )
        checkpoint = os.path.join(work, name + "-ckpt")
        shutil.rmtree(checkpoint, ignore_errors=True)
        return table, checkpoint

    timer = DriverTimer()

    def eosink_source() -> Any:
        table, ckpt = fresh("eosink_ds")
        return (
            stream()
            .format("eosink-postgres")
            .option("writerId", "bench")
            .option("url", url)
            .option("path", table)
            .option("checkpointLocation", ckpt)
            .start()
        )

    def eosink_foreach() -> Any:
        table, ckpt = fresh("eosink_fb")
        sink = eosink.sink("postgres", url=url, table=table)
        writer = eosink.foreach_batch(sink, writer_id="bench", plugins=[timer])
        return stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

    def jdbc_foreach() -> Any:
        table, ckpt = fresh("spark_jdbc")
        jdbc = f"jdbc:postgresql://{server.host}:{server.port}/postgres"
        props = {
            "user": server.user,
            "password": server.password,
            "driver": "org.postgresql.Driver",
        }

        def write(df: Any, batch_id: int) -> None:
            df.write.jdbc(jdbc, table, mode="append", properties=props)

        return stream().foreachBatch(write).option("checkpointLocation", ckpt).start()

    def copy_foreach() -> Any:
        table, ckpt = fresh("bare_copy")
        return (
            stream().foreachBatch(bare_copy(url, table)).option("checkpointLocation", ckpt).start()
        )

    runs: dict[str, Callable[[], Any]] = {
        "eosink-postgres (data source)": eosink_source,
        "eosink-postgres (foreachBatch)": eosink_foreach,
        "bare COPY loop (foreachBatch)": copy_foreach,
    }
    if jar:
        runs["Spark JDBC (foreachBatch)"] = jdbc_foreach
    else:
        print("no PostgreSQL JDBC driver jar (give --jdbc-jar): the Spark JDBC row is left out")
    for start in runs.values():  # warm-up: JVM, Python workers, connections
        timed(start)
    reading[0] = source
    timer.per_batch.clear()
    timer.commits.clear()
    seconds = {name: timed(start) for name, start in runs.items()}
    tables = {
        "eosink-postgres (data source)": "eosink_ds",
        "eosink-postgres (foreachBatch)": "eosink_fb",
        "bare COPY loop (foreachBatch)": "bare_copy",
        "Spark JDBC (foreachBatch)": "spark_jdbc",
    }
    with psycopg.connect(url, autocommit=True) as conn:
        for name in seconds:
            (held,) = conn.execute(f"SELECT count(*) FROM {tables[name]}").fetchone()
            assert held == total, f"{name}: {held} rows, expected {total}"

    jdbc = seconds.get("Spark JDBC (foreachBatch)")
    copy = seconds["bare COPY loop (foreachBatch)"]
    print(f"\n{args.batches} micro-batches x {args.rows:,} rows x 5 columns, local[{args.cores}]")
    print(f"{'run':32} {'seconds':>8} {'rows/s':>12} {'vs JDBC':>8} {'vs COPY':>8}")
    for name, s in seconds.items():
        vs_jdbc = f"{jdbc / s:7.2f}x" if jdbc else ""
        print(f"{name:32} {s:8.1f} {total / s:12,.0f} {vs_jdbc:>8} {copy / s:7.2f}x")
    if timer.per_batch:
        print(
            f"\nexactly-once driver time per batch (is_committed + init + commit), median "
            f"{statistics.median(timer.per_batch) * 1000:.1f} ms; commit alone "
            f"{statistics.median(timer.commits) * 1000:.1f} ms; over {len(timer.per_batch)} "
            "batches (foreachBatch)"
        )
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
