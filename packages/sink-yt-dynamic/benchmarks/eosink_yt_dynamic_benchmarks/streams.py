"""The paths of a Spark stream into a YT sorted dynamic table, for the report's YT throughput
section.

The stream carries its source coordinates as a queue's would: ``tablet_index`` and
``row_index`` (here derived from the row id: 8 tablets), the table's key. Each path is a
streaming query over the same stream into a table of its own, from a fresh checkpoint:

* ``yt-dynamic, data source``: ``format("eosink-yt-dynamic")``;
* ``yt-dynamic, foreachBatch``: ``foreachBatch(eosink.foreach_batch(YtDynamicSink(...)))``;
* ``bare insert_rows loop``: the anchor, in ``foreachBatch``: every Spark task upserts its
  rows with ``insert_rows`` in chunks of ``rows_per_transaction``, converted by the same
  ``yt_rows``: the same upserts with no duplicate check, no key runs and no proof.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

import eosink
from eosink_yt_dynamic.sink import YtDynamicSink
from eosink_yt_dynamic.tables import create_output_table

DATA_SOURCE = "yt-dynamic, data source"
FOREACH_BATCH = "yt-dynamic, foreachBatch"
BARE = "bare `insert_rows` loop, foreachBatch"
#: The paths, in the order they run.
NAMES = (DATA_SOURCE, FOREACH_BATCH, BARE)
TABLETS = 8
#: Rows per ``insert_rows`` of the bare loop: the sink's default ``rows_per_transaction``.
CHUNK = 50_000


def with_coordinates(df: Any) -> Any:
    """The stream with the source coordinates a queue would give each row."""
    from pyspark.sql import functions as F

    return df.withColumn("tablet_index", F.col("id") % TABLETS).withColumn(
        "row_index", F.col("id")
    )


def insert_partition(
    config: dict[str, Any], path: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` function: upsert the task's rows into ``path``; yields its row count."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from eosink_yt_common import yt_rows
        from yt.wrapper import YtClient

        client = YtClient(config=config)
        rows = 0
        for batch in batches:
            for offset in range(0, batch.num_rows, CHUNK):
                client.insert_rows(path, yt_rows(batch.slice(offset, CHUNK)))
            rows += batch.num_rows
        yield pa.RecordBatch.from_pydict({"rows": [rows]})

    return run


def paths(
    frame: Callable[[], Any], proxy: str, config: dict[str, Any], folder: str, table: str
) -> dict[str, Callable[[], Any]]:
    """name -> start() of each path writing the stream of ``frame()`` into ``table`` + suffix.

    ``frame`` returns the streaming DataFrame (without the coordinates: they are added here);
    ``config`` is the YT client configuration of every side; checkpoints go under ``folder``.
    """

    def writer(name: str) -> Any:
        return (
            with_coordinates(frame())
            .writeStream.trigger(availableNow=True)
            .option("checkpointLocation", f"{folder}/{name}-ckpt")
        )

    def data_source() -> Any:
        return (
            writer("ds")
            .format("eosink-yt-dynamic")
            .option("writerId", "bench")
            .option("proxy", proxy)
            .option("proxyDiscovery", "false")
            .option("clientConfig", json.dumps(config))
            .option("createTable", "true")
            .option("path", f"{table}_ds")
            .start()
        )

    def foreach_batch() -> Any:
        sink = YtDynamicSink(
            proxy=proxy,
            proxy_discovery=False,
            client_config=config,
            create_table=True,
            path=f"{table}_fb",
        )
        return writer("fb").foreachBatch(eosink.foreach_batch(sink, writer_id="bench")).start()

    def bare() -> Any:
        from yt.wrapper import YtClient

        target = f"{table}_bare"
        create_output_table(YtClient(config=config), target, with_coordinates(frame()))
        upsert = insert_partition(config, target)

        def each_batch(df: Any, _batch_id: int) -> None:
            df.mapInArrow(upsert, "rows long").collect()

        return writer("bare").foreachBatch(each_batch).start()

    return {DATA_SOURCE: data_source, FOREACH_BATCH: foreach_batch, BARE: bare}
