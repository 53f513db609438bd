"""The Spark 4 Python streaming data source ``eosink-yt-queue``.

How Spark runs it: ``schema()`` and ``streamReader()`` run on the driver; the reader's
``initialOffset``/``latestOffset``/``partitions``/``commit`` run there too, and every
``InputPartition`` is pickled to an executor, where ``read`` builds its own YT client (clients
do not pickle) and pulls its tablet range. Offsets (a row index per tablet) go into the
checkpoint's offset log before a batch runs, so a restarted query re-reads exactly the same
rows; the checkpoint is the source of truth. Spark calls ``commit(end)`` only after the batch
is committed: the one place this source moves the YT consumer (the offsets name the consumer,
so eosink-yt-dynamic's transactional mode moves it earlier, in the batch's transaction).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from eosink_yt_common.spark_types import arrow_batch, spark_columns
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from eosink.plugin import ConfigurationError, options_from
from eosink.logs import get_logger

from eosink_yt_queue import consumer
from eosink_yt_queue import offsets as off
from eosink_yt_queue.options import QueueOptions
from eosink_yt_queue.queue import describe, node_id, pull, tablet_counts

log = get_logger("eosink.yt_queue")

#: SPYT's service columns: the row's ``$tablet_index`` and ``$row_index`` in the queue.
SPYT_TABLET_INDEX = "__spyt_streaming_src_tablet_index"
SPYT_ROW_INDEX = "__spyt_streaming_src_row_index"

NAME = "eosink-yt-queue"


def parse_options(options: Mapping[str, Any]) -> QueueOptions:
    return options_from(QueueOptions, options, sink="yt-queue")


class YtQueuePartition(InputPartition):
    """One task: a tablet range of a queue, and what the executor needs to read it."""

    def __init__(
        self,
        options: QueueOptions,
        schema: list[dict],
        rng: off.TabletRange,
        queue_id: str | None = None,
    ) -> None:
        super().__init__(rng)
        self.options = options
        self.schema = schema
        self.rng = rng
        #: The node id of the queue the batch's offsets were taken from (None for offsets of
        #: checkpoints written before offsets carried it): rows are read from that queue only.
        self.queue_id = queue_id


def describe_all(client: Any, options: QueueOptions) -> dict[str, dict[str, Any]]:
    """Every queue's attributes; the queues must have the same columns (one DataFrame)."""
    attributes = {q: describe(client, q) for q in options.queues}
    first, *others = options.queues
    columns = spark_columns(attributes[first]["schema"])
    for queue in others:
        if spark_columns(attributes[queue]["schema"]) != columns:
            raise ConfigurationError(
                f"queues {first} and {queue} have different columns "
                f"({spark_columns(attributes[queue]['schema'])} vs {columns}); queues read by "
                "one query need the same data columns in the same order"
            )
    return attributes


class YtQueueStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches from tablet row counts and reads them with ``pull_queue``."""

    def __init__(self, options: QueueOptions) -> None:
        self.options = options
        self._client = None
        self.attributes = describe_all(self.client, options)
        #: The end fixed by ``trigger(availableNow=True)``: rows appended later wait.
        self._target: off.Offsets | None = None
        #: What the consumer was last advanced to by this reader.
        self._advanced: off.Offsets = {}
        if options.consumer_path:
            consumer.check(self.client, options.consumer_path)
            consumer.register(
                self.client, options.consumer_path, options.queues, options.consumer_vital
            )

    def __getstate__(self) -> dict:
        # Spark pickles the reader to the executors; a YT client does not pickle.
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self.options.connection().client()
        return self._client

    def _counts(self) -> dict[off.Tablet, off.TabletCounts]:
        """Every tablet's row counts, the queues' attributes read again first: a reshard
        changes ``tablet_count`` while the query runs, and a queue created again under the same
        path has another ``id``."""
        before = {q: int(a["tablet_count"]) for q, a in self.attributes.items()}
        self.attributes = describe_all(self.client, self.options)
        counts = {}
        for queue, attributes in self.attributes.items():
            tablets = int(attributes["tablet_count"])
            if tablets != before.get(queue, tablets):
                log.info(
                    "yt_queue.tablet_count_changed", queue=queue, before=before[queue], now=tablets
                )
            counts.update(tablet_counts(self.client, queue, tablets))
        return counts

    @property
    def ids(self) -> dict[str, str]:
        """The queues' node ids as last read (recorded with every offset)."""
        return {q: str(a["id"]) for q, a in self.attributes.items() if a.get("id")}

    def _json(self, offsets: off.Offsets) -> dict:
        """The offset JSON Spark logs: with the queues' ids, and the consumer (and its
        cluster's proxy) for a sink that moves it with the batch's rows."""
        return off.to_json(offsets, self.ids, self.options.consumer_path, self.options.proxy)

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        start = off.starting(self.options.starting_offsets, self._counts())
        log.info("yt_queue.start", queues=self.options.queues, offsets=off.to_json(start))
        return self._json(start)

    def getDefaultReadLimit(self) -> Any:  # noqa: N802
        rows = self.options.max_rows_per_trigger
        return ReadAllAvailable() if rows is None else ReadMaxRows(rows)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        """Spark calls this once when a query starts with ``trigger(availableNow=True)``: the
        rows there now are the query's target; batches still respect ``maxRowsPerTrigger``."""
        self._target = {t: c.total for t, c in self._counts().items()}

    def latestOffset(self, start: dict, limit: Any) -> dict:  # noqa: N802
        begin = off.from_json(start)
        counts = self._counts()
        off.check_same_queues(begin, off.ids_from_json(start), counts, self.ids)
        off.check_not_trimmed(begin, counts)
        latest = off.cap({t: c.total for t, c in counts.items()}, self._target)
        max_rows = getattr(limit, "max_rows", None)
        return self._json(off.limit_rows(begin, latest, max_rows))

    def partitions(self, start: dict, end: dict) -> list[YtQueuePartition]:
        """The tasks of the batch ``[start, end)``. Spark also calls this (without
        ``latestOffset``) to replay an unfinished batch from the offset log after a restart,
        so the queues' ids recorded with ``end`` are checked here and by every task."""
        ranges = off.split(
            off.from_json(start), off.from_json(end), self.options.rows_per_partition
        )
        recorded = {**off.ids_from_json(start), **off.ids_from_json(end)}
        off.check_same_ids(recorded, {q: self.ids.get(q) for q in {r.queue for r in ranges}})
        return [
            YtQueuePartition(
                self.options, list(self.attributes[r.queue]["schema"]), r, recorded.get(r.queue)
            )
            for r in ranges
        ]

    def read(self, partition: YtQueuePartition) -> Iterator[pa.RecordBatch]:
        """The rows of the partition's range, each request's rows given to Spark only after
        the queue's id was read again: the rows came from the queue the offsets name, not
        from one created again under its path since the batch was planned."""
        options, rng = partition.options, partition.rng
        client = options.connection().client()

        def check_queue() -> None:
            if partition.queue_id is not None:
                now = {rng.queue: node_id(client, rng.queue)}
                off.check_same_ids({rng.queue: partition.queue_id}, now)

        check_queue()
        for rows in pull(client, rng, options.pull_rows):
            check_queue()
            extra = {}
            if options.queue_id_column:
                extra[options.queue_id_column] = pa.array([rng.queue] * len(rows), pa.string())
            if options.include_service_columns:
                first = rows[0]["$row_index"]
                extra[SPYT_TABLET_INDEX] = pa.array([rng.tablet] * len(rows), pa.int64())
                extra[SPYT_ROW_INDEX] = pa.array(range(first, first + len(rows)), pa.int64())
            yield arrow_batch(partition.schema, rows, extra)

    def commit(self, end: dict) -> None:
        """Spark calls this after the batch ending at ``end`` is committed (its sink done and
        the commit log written): only now may the consumer move. A failed advance is logged
        and tried again at the next commit; the checkpoint, not the consumer, says what a
        replay reads."""
        path = self.options.consumer_path
        if not path:
            return
        moved = {t: n for t, n in off.from_json(end).items() if self._advanced.get(t) != n}
        try:
            consumer.advance(self.client, path, moved)
        except Exception as exc:  # noqa: BLE001 - progress for YT only; the query goes on
            log.warning("yt_queue.consumer_advance_failed", consumer=path, error=str(exc))
            return
        self._advanced.update(moved)
        log.debug("yt_queue.consumer_advanced", consumer=path, tablets=len(moved))

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
        client = options.connection().client()
        attributes = describe_all(client, options)
        if options.consumer_path:
            consumer.check(client, options.consumer_path)
        columns = spark_columns(attributes[options.queues[0]]["schema"])
        if options.queue_id_column:
            columns.append((options.queue_id_column, "string"))
        if options.include_service_columns:
            columns += [(SPYT_TABLET_INDEX, "long"), (SPYT_ROW_INDEX, "long")]
        return ", ".join(f"`{name}` {kind}" for name, kind in columns)

    def streamReader(self, schema: Any) -> YtQueueStreamReader:  # noqa: N802
        return YtQueueStreamReader(self._options())


def register(spark: Any) -> str:
    """Register the ``eosink-yt-queue`` format with ``spark``; returns its name."""
    spark.dataSource.register(YtQueueDataSource)
    return NAME
