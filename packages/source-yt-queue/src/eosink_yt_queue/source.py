"""The Spark 4 Python streaming data source ``eosink-yt-queue``.

How Spark runs it: ``schema()`` and ``streamReader()`` run on the driver; the reader's
``initialOffset``/``latestOffset``/``partitions``/``commit`` run there too, and every
``InputPartition`` is pickled to an executor, where ``read`` builds its own YT client (clients
do not pickle) and pulls its tablet range. Offsets (a row index per tablet) go into the
checkpoint's offset log before a batch runs, so a restarted query re-reads exactly the same
rows; the checkpoint is the source of truth.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import structlog
from eosink_yt_common.spark_types import arrow_batch, spark_columns
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from eosink import options_from

from eosink_yt_queue import offsets as off
from eosink_yt_queue.options import QueueOptions
from eosink_yt_queue.queue import describe, pull, tablet_counts

log = structlog.get_logger("eosink.yt_queue")

#: SPYT's service columns: the row's ``$tablet_index`` and ``$row_index`` in the queue.
SPYT_TABLET_INDEX = "__spyt_streaming_src_tablet_index"
SPYT_ROW_INDEX = "__spyt_streaming_src_row_index"

NAME = "eosink-yt-queue"


def parse_options(options: Mapping[str, Any]) -> QueueOptions:
    return options_from(QueueOptions, options, sink="yt-queue")


class YtQueuePartition(InputPartition):
    """One task: a tablet range of the queue, and what the executor needs to read it."""

    def __init__(self, options: QueueOptions, schema: list[dict], rng: off.TabletRange) -> None:
        super().__init__(rng)
        self.options = options
        self.schema = schema
        self.rng = rng


class YtQueueStreamReader(DataSourceStreamReader):
    """Plans micro-batches from tablet row counts and reads them with ``pull_queue``."""

    def __init__(self, options: QueueOptions) -> None:
        self.options = options
        self._client = None
        self.attributes = describe(self.client, options.path)

    def __getstate__(self) -> dict:
        # Spark pickles the reader to the executors; a YT client does not pickle.
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.options.connection().client()
        return self._client

    def _counts(self) -> dict[int, off.TabletCounts]:
        return tablet_counts(self.client, self.options.path, int(self.attributes["tablet_count"]))

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        start = off.starting(self.options.starting_offsets, self._counts())
        log.info("yt_queue.start", path=self.options.path, offsets=off.to_json(start))
        return off.to_json(start)

    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        rows = self.options.max_rows_per_trigger
        return ReadAllAvailable() if rows is None else ReadMaxRows(rows)

    def latestOffset(self, start: dict, limit: Any) -> dict:  # noqa: N802
        begin = off.from_json(start)
        counts = self._counts()
        off.check_not_trimmed(self.options.path, begin, counts)
        max_rows = getattr(limit, "max_rows", None)
        end = off.limit_rows(begin, {t: c.total for t, c in counts.items()}, max_rows)
        return off.to_json(end)

    def partitions(self, start: dict, end: dict) -> list[YtQueuePartition]:
        ranges = off.split(
            off.from_json(start), off.from_json(end), self.options.rows_per_partition
        )
        schema = list(self.attributes["schema"])
        return [YtQueuePartition(self.options, schema, r) for r in ranges]

    def read(self, partition: YtQueuePartition) -> Iterator[pa.RecordBatch]:
        options, rng = partition.options, partition.rng
        client = options.connection().client()
        for rows in pull(client, options.path, rng, options.pull_rows):
            extra = {}
            if options.include_service_columns:
                first = rows[0]["$row_index"]
                extra = {
                    SPYT_TABLET_INDEX: pa.array([rng.tablet] * len(rows), pa.int64()),
                    SPYT_ROW_INDEX: pa.array(range(first, first + len(rows)), pa.int64()),
                }
            yield arrow_batch(partition.schema, rows, extra)

    def commit(self, end: dict) -> None:
        log.debug("yt_queue.committed", path=self.options.path, offsets=end)

    def stop(self) -> None:
        self._client = None


class YtQueueDataSource(DataSource):
    """``spark.readStream.format("eosink-yt-queue").option("proxy", ...).load("//queue")``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _options(self) -> QueueOptions:
        return parse_options(self.options)

    def schema(self) -> str:
        options = self._options()
        attributes = describe(options.connection().client(), options.path)
        columns = spark_columns(attributes["schema"])
        if options.include_service_columns:
            columns += [(SPYT_TABLET_INDEX, "long"), (SPYT_ROW_INDEX, "long")]
        return ", ".join(f"`{name}` {kind}" for name, kind in columns)

    def streamReader(self, schema: Any) -> YtQueueStreamReader:  # noqa: N802
        return YtQueueStreamReader(self._options())


def register(spark: Any) -> str:
    """Register the ``eosink-yt-queue`` format with ``spark``; returns its name."""
    spark.dataSource.register(YtQueueDataSource)
    return NAME
