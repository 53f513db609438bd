"""A query from YT queues into yt-dynamic, run as its own process so a test can kill it (-9).

Usage: python -m killable_query <work folder>; ``<work>/job.json`` says which door
(``foreach_batch`` or ``data_source``), the emulator's address, the queues and the output. The
task that holds row STALL_ROW of tablet 0 of the first queue stalls while ``<work>/armed``
exists, after touching ``<work>/reached``: the batch's other tasks write their rows meanwhile,
so a kill lands mid-batch with part of the batch in the output table.
"""

from __future__ import annotations

import json
import os
import sys
import time

STALL_ROW = 20


def stall_once(work: str, first_queue: str):
    def apply(batches):
        for batch in batches:
            rows = batch.to_pylist()
            if any(
                r["tablet_index"] == 0
                and r["row_index"] == STALL_ROW
                and r.get("queue_id", first_queue) == first_queue
                for r in rows
            ):
                while os.path.exists(os.path.join(work, "armed")):
                    open(os.path.join(work, "reached"), "w").close()
                    time.sleep(0.2)
            yield batch

    return apply


def main(work: str) -> None:
    from pyspark.sql.functions import col

    import eosink
    import eosink_yt_queue
    from eosink.testing.spark import local_spark

    job = json.load(open(os.path.join(work, "job.json")))
    spark = local_spark()
    eosink_yt_queue.register(spark)
    reader = (
        spark.readStream.format("eosink-yt-queue")
        .option("proxy", job["url"])
        .option("proxyDiscovery", "false")
        .option("clientConfig", json.dumps(job["client_config"]))
        .option("includeServiceColumns", "true")
        .option("maxRowsPerTrigger", job["max_rows"])
    )
    if len(job["queues"]) > 1:
        reader = reader.option("queueIdColumn", "queue_id")
    df = (
        reader.load(",".join(job["queues"]))
        .withColumnRenamed("__spyt_streaming_src_tablet_index", "tablet_index")
        .withColumnRenamed("__spyt_streaming_src_row_index", "row_index")
        .withColumn("amount", col("amount") * 2)
        .drop("name")
    )
    df = df.mapInArrow(stall_once(work, job["queues"][0]), df.schema)
    connection = {"proxy": job["url"], "path": job["out"], "proxy_discovery": False}
    if job["door"] == "foreach_batch":
        sink = eosink.sink("yt-dynamic", **connection, client_config=job["client_config"])
        writer = df.writeStream.foreachBatch(eosink.foreach_batch(sink, writer_id="events"))
    else:
        eosink.register_data_sources(spark)
        writer = df.writeStream.format("eosink-yt-dynamic").option("writerId", "events")
        for key, value in connection.items():
            writer = writer.option(key, str(value).lower() if value is False else value)
        writer = writer.option("clientConfig", json.dumps(job["client_config"]))
    checkpoint = os.path.join(work, "ckpt")
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
