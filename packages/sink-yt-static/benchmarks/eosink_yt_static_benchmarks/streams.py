"""The paths of a Spark stream into a YT static table, for the report's YT throughput section.

Each path is a streaming query over the same stream into a table of its own, from a fresh
checkpoint:

* ``yt-static, data source``: ``format("eosink-yt-static")``;
* ``yt-static, foreachBatch``: ``foreachBatch(eosink.foreach_batch(YtStaticSink(...)))``;
* ``bare write_table loop``: the anchor, in ``foreachBatch``: every Spark task appends its rows
  to the table with ``write_table`` (``append=true``, which takes a shared lock, so the tasks
  append side by side), converted by the same ``yt_rows`` as the sink's: the same requests with
  no transaction tree, no staging table and no proof.

Both sides write the same rows through the same client over HTTP, so the ratio is the cost of
the protocol (transactions, the staging table, the commit's merge and move).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from eosink.testing.stream_input import available_now, both_doors, in_every_task
from eosink_yt_static.sink import YtStaticSink

DATA_SOURCE = "yt-static, data source"
FOREACH_BATCH = "yt-static, foreachBatch"
BARE = "bare `write_table` loop, foreachBatch"
#: The paths, in the order they run.
NAMES = (DATA_SOURCE, FOREACH_BATCH, BARE)


def append(config: dict[str, Any], path: str) -> Callable[[Iterator[pa.RecordBatch]], int]:
    """A Spark task's bare loop: append its rows to ``path``, one request per Arrow batch."""

    def write(batches: Iterator[pa.RecordBatch]) -> int:
        from eosink_yt_common import yt_rows
        from yt.wrapper import TablePath, YtClient

        client, rows = YtClient(config=config), 0
        for batch in batches:
            if batch.num_rows:
                client.write_table(TablePath(path, append=True), yt_rows(batch))
                rows += batch.num_rows
        return rows

    return write


def paths(
    frame: Callable[[], Any], proxy: str, config: dict[str, Any], folder: str, table: str
) -> dict[str, Callable[[], Any]]:
    """name -> start() of each path writing the stream of ``frame()`` into ``table`` + suffix.

    ``frame`` returns the streaming DataFrame; ``config`` is the YT client configuration of
    every side (the emulator's, with patient request timeouts); checkpoints go under ``folder``.
    """

    writer = available_now(frame, folder)

    def bare() -> Any:
        from yt.wrapper import YtClient

        target = f"{table}_bare"
        YtClient(config=config).create("table", target, ignore_existing=True)
        return writer("bare").foreachBatch(in_every_task(append(config, target))).start()

    sink = YtStaticSink(
        path=f"{table}_fb", proxy=proxy, proxy_discovery=False, client_config=config
    )
    doors = both_doors(
        writer,
        sink,
        {
            "path": f"{table}_ds",
            "proxy": proxy,
            "proxyDiscovery": "false",
            "clientConfig": json.dumps(config),
        },
    )
    return {DATA_SOURCE: doors["data source"], FOREACH_BATCH: doors["foreachBatch"], BARE: bare}
