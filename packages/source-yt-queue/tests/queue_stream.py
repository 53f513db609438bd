"""The source of the killed end-to-end tests (killed_e2e.py): YT queues read by the
``eosink-yt-queue`` data source, a select and a withColumn. Named by the tests' job as its
``stream`` (``queue_stream:stream``), it runs in the query's own process
(:mod:`eosink.testing.killable_query`); the job's ``params`` hold the emulator's address, its
client config, the queues and ``maxRowsPerTrigger``.
"""

from __future__ import annotations

import json
from typing import Any


def stream(spark: Any, job: Any) -> Any:
    from pyspark.sql.functions import col

    import eosink_yt_queue

    params = job.params
    eosink_yt_queue.register(spark)
    reader = (
        spark.readStream.format("eosink-yt-queue")
        .option("proxy", params["url"])
        .option("proxyDiscovery", "false")
        .option("clientConfig", json.dumps(params["client_config"]))
        .option("includeServiceColumns", "true")
        .option("maxRowsPerTrigger", params["max_rows"])
    )
    if len(params["queues"]) > 1:
        reader = reader.option("queueIdColumn", "queue_id")
    return (
        reader.load(",".join(params["queues"]))
        .withColumnRenamed("__spyt_streaming_src_tablet_index", "tablet_index")
        .withColumnRenamed("__spyt_streaming_src_row_index", "row_index")
        .withColumn("amount", col("amount") * 2)
        .drop("name")
    )
