"""The child of :mod:`eosink_delta_benchmarks.upsert_spark`: keyed upserts of a change feed on
Spark 4.2 with Delta's own jars (``eosink.testing.spark_child`` runs it), three paths:

* **Delta's MERGE in foreachBatch**, as Delta's documentation writes an idempotent one: the
  batch's ``MERGE INTO`` with ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` set in
  the session around the statement (the anchor users write today);
* **eosink-delta, delta-spark engine**: ``delta_spark.foreach_batch(..., mode="upsert",
  engine="delta-spark")``, Delta's MERGE with the txn scoped to that statement;
* **eosink-delta, delta-rs engine**: the same call with ``engine="delta-rs"``: eosink's own
  commit (files touched rewritten, the batch added, the txn) in delta-rs.

The feed (``eosink.testing.change_feed``, one Parquet file per batch) streams through each
path in turn (one query each, ``maxFilesPerTrigger=1``); each batch's cost is Spark's
``addBatch`` time of the query's progress. At the end the three tables must hold the same rows.
"""

from __future__ import annotations

import os
from typing import Any

#: Progress of every batch: a run has more batches than Spark's default 100 kept.
CONF = {"spark.sql.streaming.numRecentProgressUpdates": "100000"}
SCHEMA = "id long, batch long, name string, amount long, score double"
ANCHOR = "Delta's MERGE in foreachBatch, txnAppId/txnVersion"
SPARK_ENGINE = "eosink-delta, mode=upsert, delta-spark engine"
RS_ENGINE = "eosink-delta, mode=upsert, delta-rs engine"
#: Each path's table, a folder of the scenario's.
FOLDERS = {ANCHOR: "merge-txn", SPARK_ENGINE: "delta-spark-engine", RS_ENGINE: "delta-rs-engine"}


def write_feed(folder: str, batches: int, rows: int) -> None:
    """One Parquet file a batch, named and timed in batch order (Spark's file source takes
    files in order of their modification times)."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    from eosink.testing.change_feed import change_feed

    os.makedirs(folder)
    for batch in range(batches):
        path = os.path.join(folder, f"{batch:05d}.parquet")
        pq.write_table(pa.Table.from_batches([change_feed(batch, rows)]), path)
        stamp = time.time() - 100_000 + batch
        os.utime(path, (stamp, stamp))


def anchor(table: str, writer_id: str) -> Any:
    """Delta's documented idempotent MERGE in foreachBatch."""

    def merge(df: Any, batch_id: int) -> None:
        spark = df.sparkSession
        df.createOrReplaceTempView("updates")
        spark.conf.set("spark.databricks.delta.write.txnAppId", writer_id)
        spark.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        try:
            spark.sql(
                f"MERGE INTO delta.`{table}` t USING updates s ON t.id = s.id "
                "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
            )
        finally:
            spark.conf.unset("spark.databricks.delta.write.txnAppId")
            spark.conf.unset("spark.databricks.delta.write.txnVersion")

    return merge


def run(spark: Any, name: str, folder: str) -> dict[str, Any]:
    from eosink_delta import delta_spark

    batches, rows = (int(n) for n in name.split(":")[1:3])
    feed = os.path.join(folder, "feed")
    write_feed(feed, batches, rows)
    tables = {p: os.path.join(folder, name) for p, name in FOLDERS.items()}
    # the anchor's MERGE needs a table to merge into: an empty one of the feed's schema
    spark.createDataFrame([], SCHEMA).write.format("delta").save(tables[ANCHOR])
    writers = {
        ANCHOR: anchor(tables[ANCHOR], "bench"),
        SPARK_ENGINE: delta_spark.foreach_batch(
            tables[SPARK_ENGINE],
            writer_id="bench",
            mode="upsert",
            key=["id"],
            engine="delta-spark",
        ),
        RS_ENGINE: delta_spark.foreach_batch(
            tables[RS_ENGINE], writer_id="bench", mode="upsert", key=["id"], engine="delta-rs"
        ),
    }
    seconds: dict[str, list[float]] = {}
    for path, writer in writers.items():
        query = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .parquet(feed)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", os.path.join(folder, f"ckpt-{len(seconds)}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        ran = [p for p in query.recentProgress if p.numInputRows]
        assert len(ran) == batches, (path, len(ran), batches)
        seconds[path] = [p.durationMs["addBatch"] / 1000 for p in ran]
    held = {
        path: [tuple(r) for r in spark.read.format("delta").load(t).orderBy("id").collect()]
        for path, t in tables.items()
    }
    first = held[ANCHOR]
    for path, rows_held in held.items():
        assert rows_held == first, f"{path} holds other rows than {ANCHOR}"
    return {"batch_seconds": seconds, "rows": len(first)}
