"""A streaming query into the iceberg sink, run as its own process so a test can kill it (-9).

Usage: python killable_query.py <work folder> <foreach_batch|data_source>. The task holding
SLOW_ID stalls while ``<work>/armed`` exists, after touching ``<work>/reached``: the other
task of that batch has written its Parquet file by then, so a kill lands mid-batch. The
catalog is a SQL catalog on SQLite in ``<work>``; the table ``lake.orders``.
"""

from __future__ import annotations

import os
import sys
import time

SLOW_ID = 2_150
TABLE = "lake.orders"


def catalog(work: str) -> dict[str, str]:
    os.makedirs(os.path.join(work, "warehouse"), exist_ok=True)
    return {
        "type": "sql",
        "uri": f"sqlite:///{work}/catalog.db",
        "warehouse": f"file://{work}/warehouse",
    }


def stall_once(work: str):
    def apply(batches):
        for batch in batches:
            if SLOW_ID in batch.column("id").to_pylist():
                while os.path.exists(os.path.join(work, "armed")):
                    open(os.path.join(work, "reached"), "w").close()
                    time.sleep(0.2)
            yield batch

    return apply


def main(work: str, door: str) -> None:
    import eosink
    from eosink.testing.spark import local_spark

    spark = local_spark()
    df = (
        spark.readStream.schema("id long, name string, ts timestamp")
        .option("maxFilesPerTrigger", 1)
        .json(os.path.join(work, "in"))
        .repartition(2)
    )
    df = df.mapInArrow(stall_once(work), df.schema)
    checkpoint = os.path.join(work, "ckpt")
    if door == "foreach_batch":
        sink = eosink.sink(
            "iceberg",
            table=TABLE,
            catalog=catalog(work),
            create_namespace=True,
            partition_by=["day(ts)", "bucket(4, id)"],
        )
        writer = df.writeStream.foreachBatch(eosink.foreach_batch(sink, writer_id="orders"))
    else:
        eosink.register_data_sources(spark)
        writer = (
            df.writeStream.format("eosink-iceberg")
            .option("writerId", "orders")
            .option("path", TABLE)
            .option("createNamespace", "true")
            .option("partitionBy", "day(ts), bucket(4, id)")
        )
        for key, value in catalog(work).items():
            writer = writer.option(f"catalog.{key}", value)
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
