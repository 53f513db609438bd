"""Front door 1: a ``foreachBatch`` function, and the batch-job API.

``foreach_batch(sink("files", path=...), writer_id="orders")`` returns the function to hand to
``DataStreamWriter.foreachBatch``; with several sinks each is exactly-once on its own (fan-out):
a failure in the second leaves the first committed, and the replay skips it there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

import attrs
import structlog

from eosink.errors import ConfigurationError, MissingWriterIdError
from eosink.model import BatchContext, BatchOutcome, OutputMode
from eosink.protocol import FingerprintMode, run_batch
from eosink.spark.executor_env import check_executors
from eosink.spark.executors import arrow_schema, spark_run_writes

log = structlog.get_logger("eosink")


def _query_identity(df: Any) -> tuple[str | None, str | None]:
    """The running query's id and checkpoint root, when this Spark tells them (classic does)."""
    try:
        spark = df.sparkSession
        query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return None, None
    checkpoint = None
    for query in spark.streams.active:
        if query.id == query_id:
            try:
                checkpoint = query._jsq.streamingQuery().resolvedCheckpointRoot()
            except Exception:  # noqa: BLE001 - internal API; the query id is what matters
                checkpoint = None
    return query_id, checkpoint


@attrs.define
class ForeachBatchWriter:
    """The ``foreachBatch`` function: runs every micro-batch into each sink exactly once."""

    sinks: tuple[Any, ...]
    writer_id: str
    mode: OutputMode = "append"
    fingerprint: FingerprintMode = "off"
    plugins: tuple[Any, ...] = ()
    executor_plugins: tuple[Any, ...] = ()
    #: The most recent outcomes (bounded: a stream runs for ever), and counts of all of them.
    outcomes: deque[BatchOutcome] = attrs.field(factory=lambda: deque(maxlen=1000))
    counts: dict[str, int] = attrs.field(factory=lambda: {"committed": 0, "skipped": 0})

    def __call__(self, df: Any, batch_id: int) -> None:
        check_executors(df.sparkSession, self.sinks)
        query_id, checkpoint = _query_identity(df)
        schema = arrow_schema(df)
        fan_out = len(self.sinks) > 1
        if fan_out:  # every sink reads the batch: compute it once
            df = df.persist()
        try:
            self._run(df, int(batch_id), schema, query_id, checkpoint)
        finally:
            if fan_out:
                df.unpersist()

    def _run(self, df: Any, batch_id: int, schema: Any, query_id: Any, checkpoint: Any) -> None:
        for sink in self.sinks:
            ctx = BatchContext(
                sink=sink.name,
                writer_id=self.writer_id,
                batch_id=batch_id,
                kind="stream",
                mode=self.mode,
                query_id=query_id,
                checkpoint=checkpoint,
            )
            outcome = run_batch(
                sink,
                ctx,
                schema,
                spark_run_writes(df),
                plugins=self.plugins,
                executor_plugins=self.executor_plugins,
                fingerprint=self.fingerprint,
                df=df,
            )
            self.outcomes.append(outcome)
            self.counts[outcome.status] += 1

    @property
    def skipped(self) -> int:
        return self.counts["skipped"]

    @property
    def committed(self) -> int:
        return self.counts["committed"]


def _checked(sinks: Iterable[Any], writer_id: str | None) -> tuple[Any, ...]:
    sinks = tuple(sinks)
    if not sinks:
        raise ConfigurationError("give at least one sink, e.g. eosink.sink('files', path=...)")
    if len({id(s) for s in sinks}) != len(sinks):
        raise ConfigurationError("the same sink instance is given twice")
    if not writer_id:
        raise MissingWriterIdError(", ".join(s.name for s in sinks))
    return sinks


def foreach_batch(
    *sinks: Any,
    writer_id: str | None = None,
    mode: OutputMode = "append",
    fingerprint: FingerprintMode = "off",
    plugins: Iterable[Any] = (),
    executor_plugins: Iterable[Any] = (),
) -> ForeachBatchWriter:
    """The function for ``df.writeStream.foreachBatch(...)`` that writes into ``sinks``.

    ``writer_id`` is required and must stay the same across restarts of the query: the skip
    rule is "batch <= last committed batch of this writer". ``mode="complete"`` replaces the
    target's content with each batch (for sinks that support it). ``fingerprint="error"`` (or
    ``"warn"``) stores a row count and hash with each proof and checks replays against it.
    """
    return ForeachBatchWriter(
        sinks=_checked(sinks, writer_id),
        writer_id=str(writer_id),
        mode=mode,
        fingerprint=fingerprint,
        plugins=tuple(plugins),
        executor_plugins=tuple(executor_plugins),
    )


def write_batch(
    df: Any,
    *sinks: Any,
    writer_id: str | None = None,
    version: int | None = None,
    mode: OutputMode = "append",
    fingerprint: FingerprintMode = "off",
    plugins: Iterable[Any] = (),
) -> list[BatchOutcome]:
    """Write a batch DataFrame exactly once per (writer id, version), like Delta's txnVersion.

    A version at or below the last one committed by ``writer_id`` is skipped (and logged);
    another writer id writes independently. Returns one outcome per sink.
    """
    sinks = _checked(sinks, writer_id)
    if version is None or int(version) < 0:
        raise ConfigurationError(
            "write_batch needs version=<non-negative int>: the number that orders this job's "
            "runs (e.g. the run date as 20261122); a version at or below the last committed "
            "one is skipped"
        )
    check_executors(df.sparkSession, sinks)
    schema = arrow_schema(df)
    outcomes = []
    for sink in sinks:
        ctx = BatchContext(
            sink=sink.name,
            writer_id=str(writer_id),
            batch_id=int(version),
            kind="batch",
            mode=mode,
        )
        outcomes.append(
            run_batch(
                sink,
                ctx,
                schema,
                spark_run_writes(df),
                plugins=plugins,
                fingerprint=fingerprint,
                df=df,
            )
        )
    return outcomes
