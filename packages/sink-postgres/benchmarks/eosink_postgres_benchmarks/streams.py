"""The paths the postgres throughput benchmark runs, each a streaming query over the same source
into a fresh table from a fresh checkpoint: eosink-postgres through both front doors, Spark's
JDBC writer, the bare COPY loop and the Arrow-only floor (see ``throughput``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import eosink
from eosink.testing.stream_input import SCHEMA

FILES_PER_BATCH = 2  # one task per file: every core gets work
EOSINK_DS = "eosink-postgres (data source)"
EOSINK_FB = "eosink-postgres (foreachBatch)"
BARE_COPY = "bare COPY loop (foreachBatch)"
JDBC = "Spark JDBC (foreachBatch)"
ARROW_ONLY = "Arrow to Python, no write"
TABLES = {
    EOSINK_DS: "eosink_ds",
    EOSINK_FB: "eosink_fb",
    BARE_COPY: "bare_copy",
    JDBC: "spark_jdbc",
}


class StreamPaths:
    """Starts each path's query on ``source`` (the warm-up source first, then the measured
    one); ``timer`` is an eosink plugin that times the foreachBatch path's driver hooks."""

    def __init__(self, spark: Any, server: Any, work: str, source: str, timer: Any) -> None:
        self.spark = spark
        self.server = server
        self.work = work
        self.source = source
        self.timer = timer
        self.url = server.url()

    def runs(self, *, with_jdbc: bool) -> dict[str, Callable[[], Any]]:
        runs: dict[str, Callable[[], Any]] = {
            EOSINK_DS: self.eosink_source,
            EOSINK_FB: self.eosink_foreach,
            BARE_COPY: self.copy_foreach,
            ARROW_ONLY: self.arrow_foreach,
        }
        if with_jdbc:
            runs[JDBC] = self.jdbc_foreach
        return runs

    def stream(self) -> Any:
        return (
            self.spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", FILES_PER_BATCH)
            .parquet(self.source)
            .writeStream.trigger(availableNow=True)
        )

    def fresh(self, name: str) -> tuple[str, str]:
        """The path's table, empty, and its checkpoint folder, removed."""
        import psycopg

        table = "public." + TABLES[name]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.execute(
                f"CREATE TABLE {table} (id bigint, name text, amount double precision, "
                "day date, ts timestamptz)"
            )
        checkpoint = os.path.join(self.work, TABLES[name] + "-ckpt")
        shutil.rmtree(checkpoint, ignore_errors=True)
        return table, checkpoint

    def eosink_source(self) -> Any:
        table, ckpt = self.fresh(EOSINK_DS)
        return (
            self.stream()
            .format("eosink-postgres")
            .option("writerId", "bench")
            .option("url", self.url)
            .option("path", table)
            .option("checkpointLocation", ckpt)
            .start()
        )

    def eosink_foreach(self) -> Any:
        table, ckpt = self.fresh(EOSINK_FB)
        sink = eosink.sink("postgres", url=self.url, table=table)
        writer = eosink.foreach_batch(sink, writer_id="bench", plugins=[self.timer])
        return self.stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

    def jdbc_foreach(self) -> Any:
        table, ckpt = self.fresh(JDBC)
        server = self.server
        jdbc = f"jdbc:postgresql://{server.host}:{server.port}/postgres"
        props = {
            "user": server.user,
            "password": server.password,
            "driver": "org.postgresql.Driver",
        }

        def write(df: Any, batch_id: int) -> None:
            df.write.jdbc(jdbc, table, mode="append", properties=props)

        return self.stream().foreachBatch(write).option("checkpointLocation", ckpt).start()

    def copy_foreach(self) -> Any:
        table, ckpt = self.fresh(BARE_COPY)
        writer = bare_copy(self.url, table)
        return self.stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

    def arrow_foreach(self) -> Any:
        checkpoint = os.path.join(self.work, "arrow-only-ckpt")
        shutil.rmtree(checkpoint, ignore_errors=True)
        writer = arrow_only()
        return self.stream().foreachBatch(writer).option("checkpointLocation", checkpoint).start()


def bare_copy(url: str, table: str) -> Callable[[Any, int], None]:
    """foreachBatch: every task COPYs its Arrow batches into the table with the sink's encoder,
    committing on its own (no staging, no proof)."""

    def copy_partition(batches):  # runs on the executors
        import psycopg
        from eosink_postgres import copy_binary
        from eosink_postgres.types import pg_type

        rows = 0
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            with cur.copy(
                f"COPY {table} (id, name, amount, day, ts) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.write(copy_binary.SIGNATURE)
                for batch in batches:
                    if batch.num_rows == 0:
                        continue
                    copy.write(copy_binary.encode_rows(batch, [pg_type(f) for f in batch.schema]))
                    rows += batch.num_rows
                copy.write(copy_binary.TRAILER)
        yield pa.record_batch({"rows": pa.array([rows], pa.int64())})

    def run(df: Any, batch_id: int) -> None:
        df.mapInArrow(copy_partition, "rows long").collect()

    return run


def arrow_only() -> Callable[[Any, int], None]:
    """foreachBatch: every task takes its Arrow batches in Python and writes nothing: the floor
    of any path that writes from Python workers (Spark's read and its Arrow transfer)."""

    def count_partition(batches):  # runs on the executors
        rows = sum(batch.num_rows for batch in batches)
        yield pa.record_batch({"rows": pa.array([rows], pa.int64())})

    def run(df: Any, batch_id: int) -> None:
        df.mapInArrow(count_partition, "rows long").collect()

    return run
