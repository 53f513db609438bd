"""The source of the Kafka end-to-end tests (kafka_e2e.py): a Kafka topic read by Spark's Kafka
source. Named by the tests' job as its ``stream`` (``kafka_stream:stream``), it runs in the
query's own process (:mod:`eosink.testing.killable_query`); the job's ``params`` hold the
broker's address, the topic, ``maxOffsetsPerTrigger`` and the Spark version the connector is
built for.

Each record becomes one row: its key and value as text, its partition and offset (the columns
the stalled row is picked by, and that tell a replayed record from a new one).
"""

from __future__ import annotations

from typing import Any


def stream(spark: Any, job: Any) -> Any:
    params = job.params
    if spark.version != params["spark"]:
        raise RuntimeError(
            f"Spark's Kafka connector of the kafka-spark jars is built for Spark {params['spark']}"
            f", this query runs Spark {spark.version} (the test puts pyspark {params['spark']} "
            "first on the query process's path)"
        )
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", params["bootstrap"])
        .option("subscribe", params["topic"])
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", params["max_offsets"])
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
            "partition AS kafka_partition",
            "offset AS kafka_offset",
        )
    )
