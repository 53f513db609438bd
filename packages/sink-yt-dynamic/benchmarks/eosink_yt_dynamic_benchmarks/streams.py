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

from eosink.testing.stream_input import available_now, both_doors, in_every_task
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

    return df.withColumn("tablet_index", F.col("id") % TABLETS).withColumn("row_index", F.col("id"))


def upsert(config: dict[str, Any], path: str) -> Callable[[Iterator[pa.RecordBatch]], int]:
    """A Spark task's bare loop: upsert its rows into ``path``, ``CHUNK`` rows a request."""

    def write(batches: Iterator[pa.RecordBatch]) -> int:
        from eosink_yt_common import yt_rows
        from yt.wrapper import YtClient

        client, rows = YtClient(config=config), 0
        for batch in batches:
            for offset in range(0, batch.num_rows, CHUNK):
                client.insert_rows(path, yt_rows(batch.slice(offset, CHUNK)))
            rows += batch.num_rows
        return rows

    return write


def paths(
    frame: Callable[[], Any], proxy: str, config: dict[str, Any], folder: str, table: str
) -> dict[str, Callable[[], Any]]:
    """name -> start() of each path writing the stream of ``frame()`` into ``table`` + suffix.

    ``frame`` returns the streaming DataFrame (without the coordinates: they are added here);
    ``config`` is the YT client configuration of every side; checkpoints go under ``folder``.
    """

    writer = available_now(lambda: with_coordinates(frame()), folder)

    def bare() -> Any:
        from yt.wrapper import YtClient

        target = f"{table}_bare"
        create_output_table(YtClient(config=config), target, with_coordinates(frame()))
        return writer("bare").foreachBatch(in_every_task(upsert(config, target))).start()

    sink = YtDynamicSink(
        path=f"{table}_fb",
        proxy=proxy,
        proxy_discovery=False,
        client_config=config,
        create_table=True,
    )
    doors = both_doors(
        writer,
        sink,
        {
            "path": f"{table}_ds",
            "proxy": proxy,
            "proxyDiscovery": "false",
            "clientConfig": json.dumps(config),
            "createTable": "true",
        },
    )
    return {DATA_SOURCE: doors["data source"], FOREACH_BATCH: doors["foreachBatch"], BARE: bare}
