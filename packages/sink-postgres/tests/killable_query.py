"""A streaming query into the postgres sink, run as its own process so a test can kill it (-9).

Usage: EOSINK_TEST_POSTGRES_URL=<database url> python killable_query.py <work folder>
<foreach_batch|data_source>. The URL (it holds the password) comes through the environment,
not the command line, which every user of the machine can read.

The task holding SLOW_ID stalls while ``<work>/armed`` exists, after touching
``<work>/reached``: the other task of that batch has staged its rows by then, so a kill lands
mid-batch.
"""

from __future__ import annotations

import os
import sys
import time

SLOW_ID = 2_150
TABLE = "public.orders"
URL_VARIABLE = "EOSINK_TEST_POSTGRES_URL"


def stall_once(work: str):
    def apply(batches):
        for batch in batches:
            if SLOW_ID in batch.column("id").to_pylist():
                while os.path.exists(os.path.join(work, "armed")):
                    open(os.path.join(work, "reached"), "w").close()
                    time.sleep(0.2)
            yield batch

    return apply


def main(work: str, door: str, url: str) -> None:
    import eosink
    from eosink.testing.spark import local_spark

    spark = local_spark()
    df = (
        spark.readStream.schema("id long, name string")
        .option("maxFilesPerTrigger", 1)
        .json(os.path.join(work, "in"))
        .repartition(2)
    )
    df = df.mapInArrow(stall_once(work), df.schema)
    checkpoint = os.path.join(work, "ckpt")
    if door == "foreach_batch":
        writer = df.writeStream.foreachBatch(
            eosink.foreach_batch(eosink.sink("postgres", url=url, table=TABLE), writer_id="orders")
        )
    else:
        eosink.register_data_sources(spark)
        writer = (
            df.writeStream.format("eosink-postgres")
            .option("writerId", "orders")
            .option("url", url)
            .option("path", TABLE)
        )
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], os.environ[URL_VARIABLE])
