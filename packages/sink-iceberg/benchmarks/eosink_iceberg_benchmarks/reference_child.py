"""The scenarios of :mod:`eosink_iceberg_benchmarks.reference`, run on Spark 4.1 (Iceberg's
runtime 1.12 is built for it) by ``eosink.testing.spark_child``: one session holds Iceberg's
catalog ``eosink`` (its JDBC catalog on the SQLite file of pyiceberg's SQL catalog) and
eosink's data sources, so Iceberg's own streaming sink and eosink-iceberg's two doors write
tables of one catalog from the same stream, in one JVM.

A scenario is ``<kind>:<path>`` or ``throughput:<round>:<path>``, ``path`` one of
:data:`PATHS`:

* ``warm`` and ``throughput``: the report's stream (``eosink_files_benchmarks.throughput``)
  into the path's table, timed from the query's start to its end; then the table must hold
  one row per input row, each id once (read by Spark), or the scenario fails.
* ``history``: the small files, one a micro-batch; per batch Spark's ``addBatch`` time (the
  sink's write and commit; foreachBatch: the function).

The inputs and the catalog's folder come in the session's settings (:data:`SETTINGS`).
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any


from eosink_files_benchmarks.throughput import SCHEMA, stream

from eosink_iceberg_benchmarks.reference import (
    HISTORY_PROPERTIES,
    KEEP_SNAPSHOTS,
    SETTINGS,
    SPARK_CATALOG,
    catalog_properties,
)

PATHS = ("parquet", "iceberg", "ds", "fb")


NAMESPACE = "bench"
CONF = {
    # as section 1 of the report
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.ui.showConsoleProgress": "false",
    # every batch of the history's queries stays in recentProgress
    "spark.sql.streaming.numRecentProgressUpdates": "100000",
}


def setting(spark: Any, name: str) -> str:
    return spark.sparkContext.getConf().get(SETTINGS[name])


def create_table(spark: Any, table: str, properties: dict[str, str]) -> None:
    """The table, made before its query by Iceberg's runtime with the stream's schema: every
    Iceberg path appends to a table of the same making."""
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {SPARK_CATALOG}.{NAMESPACE}")
    shown = ", ".join(f"'{k}' = '{v}'" for k, v in {"format-version": "2", **properties}.items())
    spark.sql(
        f"CREATE TABLE {SPARK_CATALOG}.{table} ({SCHEMA.replace(' long', ' bigint')}) "
        f"USING iceberg TBLPROPERTIES ({shown})"
    )


def start(
    spark: Any, path: str, source: str, folder: str, table: str, *, keep_snapshots: int = 0
) -> Any:
    """The path's query over ``source`` (files of the report's stream), run to its input's end."""
    import eosink
    from eosink_iceberg.sink import IcebergSink

    writer = (
        stream(spark, source)
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", os.path.join(folder, "checkpoint"))
    )
    catalog = catalog_properties(setting(spark, "catalog"))
    if path == "parquet":
        return writer.format("parquet").option("path", os.path.join(folder, "out")).start()
    if path == "iceberg":
        return writer.format("iceberg").outputMode("append").toTable(f"{SPARK_CATALOG}.{table}")
    if path == "ds":
        query = (
            writer.format("eosink-iceberg")
            .option("writerId", "bench")
            .option("table", table)
            .option("keepSnapshots", str(keep_snapshots))
        )
        for key, value in catalog.items():
            query = query.option(f"catalog.{key}", value)
        return query.start()
    assert path == "fb", path
    sink = IcebergSink(table=table, catalog=catalog, keep_snapshots=keep_snapshots)
    return writer.foreachBatch(eosink.foreach_batch(sink, writer_id="bench")).start()


def finished(query: Any) -> None:
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")


def expected_rows(source: str) -> int:
    import pyarrow.parquet as pq

    return sum(
        pq.read_metadata(os.path.join(source, name)).num_rows
        for name in os.listdir(source)
        if name.endswith(".parquet")
    )


def check_rows(spark: Any, path: str, folder: str, table: str, expected: int) -> None:
    """One row per input row, each id once: a lost or doubled batch fails the scenario."""
    from pyspark.sql import functions as F

    frame = (
        spark.read.parquet(os.path.join(folder, "out"))
        if path == "parquet"
        else spark.table(f"{SPARK_CATALOG}.{table}")
    )
    got = frame.agg(F.count("*").alias("rows"), F.count_distinct("id").alias("ids")).first()
    if (got["rows"], got["ids"]) != (expected, expected):
        raise AssertionError(
            f"{path}: {table} holds {got['rows']:,} rows of {got['ids']:,} ids; the input has "
            f"{expected:,} rows, each id once"
        )


def drop(spark: Any, path: str, folder: str, table: str) -> None:
    """A measured run's output goes at once: 10 M rows a run, a dozen runs."""
    if path != "parquet":
        spark.sql(f"DROP TABLE {SPARK_CATALOG}.{table} PURGE")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)


def throughput(spark: Any, path: str, source: str, folder: str, table: str) -> dict[str, Any]:
    if path != "parquet":
        create_table(spark, table, {})
    began = time.perf_counter()
    query = start(spark, path, source, folder, table)
    finished(query)
    elapsed = time.perf_counter() - began
    check_rows(spark, path, folder, table, expected_rows(source))
    drop(spark, path, folder, table)
    return {"elapsed_s": elapsed, "batches": len(batches_of(query))}


def batches_of(query: Any) -> list[Any]:
    return [p for p in query.recentProgress if p.numInputRows]


def history(spark: Any, path: str, source: str, folder: str, table: str) -> dict[str, Any]:
    create_table(spark, table, HISTORY_PROPERTIES)
    query = start(spark, path, source, folder, table, keep_snapshots=KEEP_SNAPSHOTS)
    finished(query)
    check_rows(spark, path, folder, table, expected_rows(source))
    done = batches_of(query)
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {SPARK_CATALOG}.{table}.snapshots").first()
    return {
        "add_batch_ms": [float(p.durationMs.get("addBatch", 0)) for p in done],
        "trigger_ms": [float(p.durationMs.get("triggerExecution", 0)) for p in done],
        "snapshots": snapshots["n"],
    }


def run(spark: Any, name: str, folder: str) -> dict[str, Any]:
    kind, *rest = name.split(":")
    path = rest[-1]
    assert path in PATHS, name
    table = f"{NAMESPACE}.{name.replace(':', '_').replace('-', '_')}"
    if kind == "warm":
        return throughput(spark, path, setting(spark, "warm_input"), folder, table)
    if kind == "throughput":
        return throughput(spark, path, setting(spark, "input"), folder, table)
    assert kind == "history", name
    return history(spark, path, setting(spark, "small_input"), folder, table)
