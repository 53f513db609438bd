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

from eosink.logs import get_logger
from eosink.errors import ConfigurationError, MissingWriterIdError
from eosink.model import BatchContext, BatchOutcome, OutputMode
from eosink.protocol import FingerprintMode, run_batch
from eosink.registry import upsert_key
from eosink.spark.checkpoint import hadoop_storage_options, query_id_of, spark_store_settings
from eosink.spark.executor_env import check_executors
from eosink.spark.executors import arrow_schema, spark_run_writes

log = get_logger("eosink")


@attrs.frozen
class RunningQuery:
    """What classic Spark tells a ``foreachBatch`` function about the query that calls it.

    Spark Connect tells none of it: there the function runs in a Python worker of the server
    that holds only a Connect session, so every field stays ``None``.
    """

    id: str | None = None
    checkpoint: str | None = None
    output_mode: str | None = None  # "append", "complete" or "update"
    connect: bool = False  # a Spark Connect session: nothing above is known


def running_query(df: Any) -> RunningQuery:
    """The id, checkpoint root and output mode of the streaming query that hands over ``df``."""
    try:
        spark = df.sparkSession
        query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return RunningQuery(connect=True)
    query = _find_query(spark, query_id) if query_id else None
    if query is None:
        return RunningQuery(query_id)
    try:
        execution = query._jsq.streamingQuery()  # internal API; the query id is what matters
        return RunningQuery(
            query_id, str(execution.resolvedCheckpointRoot()), str(execution.outputMode()).lower()
        )
    except Exception:  # noqa: BLE001
        return RunningQuery(query_id)


def _query_identity(df: Any) -> tuple[str | None, str | None]:
    """The running query's id and checkpoint root (kept for ``eosink_delta.delta_spark``)."""
    query = running_query(df)
    return query.id, query.checkpoint


def declared_query(checkpoint: str | None, writer_id: str, spark: Any = None) -> RunningQuery:
    """The query identity a ``foreachBatch`` on Spark Connect is told: its checkpoint's.

    Connect does not hand the query's id to the function, and without it a new checkpoint
    pointed at this writer's output would silently skip every batch up to the old one. The
    checkpoint's ``metadata`` holds the id; the function runs next to Spark's driver, which
    wrote it, so it can read it, with the session's store settings (``spark``).
    """
    if not checkpoint:
        raise ConfigurationError(
            f"writer {writer_id!r}: on Spark Connect eosink cannot see which query runs the "
            "batch, so it could not tell a new checkpoint pointed at this output from a "
            "restart. Pass the query's checkpoint: foreach_batch(..., checkpoint=<the "
            "checkpointLocation of the query>)"
        )
    settings = spark_store_settings(spark) if spark is not None else {}
    query_id = query_id_of(checkpoint, hadoop_storage_options(checkpoint, settings))
    if query_id is None:
        raise ConfigurationError(
            f"writer {writer_id!r}: checkpoint {checkpoint!r} holds no query metadata; pass the "
            "checkpointLocation the query runs with"
        )
    return RunningQuery(query_id, checkpoint)


def _find_query(spark: Any, query_id: str) -> Any:
    """The query by id. The batch's session is the query's clone, whose query manager is empty:
    the query is registered with the session that started it."""
    from pyspark.sql import SparkSession

    for session in (spark, SparkSession.getActiveSession(), SparkSession._instantiatedSession):
        query = session.streams.get(query_id) if session is not None else None
        if query is not None:
            return query
    return None


def check_output_mode(query_mode: str | None, mode: OutputMode, keyed: bool = False) -> None:
    """Refuse an output mode whose batches the sinks would duplicate or lose.

    ``keyed``: every sink replaces rows by a key (its ``upsert_key``). Spark's ``update`` mode
    needs exactly that: its batches hold the changed rows of the result table, which a keyed
    sink puts in place of the rows they change.
    """
    if query_mode == "update" and keyed and mode == "append":
        return
    if query_mode is None or query_mode == mode:
        return
    if query_mode == "complete":
        why = (
            "every batch is the whole result table, and mode='append' appends it again each "
            "batch (duplicates). Pass foreach_batch(..., mode='complete') to replace the "
            "target's content with each batch"
        )
    elif query_mode == "update":
        why = (
            "every batch holds the changed rows of the result table: appended, older versions "
            "of a row stay; replacing the target with them loses the unchanged rows. Write "
            "them into sinks keyed by the result's key, which replace each changed row (e.g. "
            "sink('postgres', ..., mode='upsert', key=[...]): each sink's README says whether "
            "it upserts); or use outputMode('complete') with foreach_batch(..., "
            "mode='complete'), or outputMode('append')"
        )
    else:
        why = (
            "every batch holds only new rows, and mode='complete' replaces the target's content "
            "with them (earlier batches are lost). Use mode='append', or outputMode('complete')"
        )
    raise ConfigurationError(
        f"the query runs with outputMode('{query_mode}') but eosink writes with mode={mode!r}"
        f"{' into sinks without a key' if query_mode == 'update' else ''}: {why}."
    )


def check_keys(sinks: tuple[Any, ...], mode: OutputMode) -> bool:
    """Whether every sink is keyed (an ``update`` query needs that); refuse
    ``mode='complete'`` with a keyed sink.

    A keyed sink replaces the rows of the keys a batch carries and keeps every other key: a
    complete-mode batch is the whole result, whose vanished keys an upsert would keep. Keyed
    and plain sinks may share an append query (a change feed upserted into one table and
    appended to a log beside it).
    """
    keys = {sink.name: upsert_key(sink) for sink in sinks}
    keyed = [name for name, key in keys.items() if key]
    if keyed and mode == "complete":
        raise ConfigurationError(
            f"sink {keyed[0]} upserts by key {keys[keyed[0]]}, and mode='complete' replaces "
            "the target's whole content with each batch: choose one (drop the sink's key for "
            "complete mode, or use outputMode('update') with the key)"
        )
    return len(keyed) == len(sinks)


@attrs.define
class ForeachBatchWriter:
    """The ``foreachBatch`` function: runs every micro-batch into each sink exactly once."""

    sinks: tuple[Any, ...]
    writer_id: str
    mode: OutputMode = "append"
    fingerprint: FingerprintMode = "off"
    plugins: tuple[Any, ...] = ()
    executor_plugins: tuple[Any, ...] = ()
    #: the query's checkpointLocation; read only on Spark Connect, which does not tell the query
    checkpoint: str | None = None
    #: The most recent outcomes (bounded: a stream runs for ever), and counts of all of them.
    outcomes: deque[BatchOutcome] = attrs.field(factory=lambda: deque(maxlen=1000))
    counts: dict[str, int] = attrs.field(factory=lambda: {"committed": 0, "skipped": 0})
    #: every sink replaces rows by a key (:func:`check_keys`)
    keyed: bool = False

    def __call__(self, df: Any, batch_id: int) -> None:
        query = running_query(df)
        if query.connect:
            query = declared_query(self.checkpoint, self.writer_id, df.sparkSession)
        check_output_mode(query.output_mode, self.mode, self.keyed)
        check_executors(df.sparkSession, self.sinks)  # after the cheap checks of the query
        schema = arrow_schema(df)
        fan_out = len(self.sinks) > 1
        if fan_out:  # every sink reads the batch: compute it once
            df = df.persist()
        try:
            self._run(df, int(batch_id), schema, query)
        finally:
            if fan_out:
                df.unpersist()

    def _run(self, df: Any, batch_id: int, schema: Any, query: RunningQuery) -> None:
        for sink in self.sinks:
            ctx = BatchContext(
                sink=sink.name,
                writer_id=self.writer_id,
                batch_id=batch_id,
                kind="stream",
                mode=self.mode,
                query_id=query.id,
                checkpoint=query.checkpoint,
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
    checkpoint: str | None = None,
) -> ForeachBatchWriter:
    """The function for ``df.writeStream.foreachBatch(...)`` that writes into ``sinks``.

    ``writer_id`` is required and must stay the same across restarts of the query: the skip
    rule is "batch <= last committed batch of this writer". ``mode="complete"`` replaces the
    target's content with each batch (for sinks that support it); it must match the query's
    ``outputMode`` ("append" or "complete"), which classic Spark lets eosink check. An
    ``update`` query is accepted when every sink is keyed (``mode="upsert"`` with ``key``:
    each batch's changed rows replace the rows of their keys) and refused otherwise. Spark
    Connect does not tell the output mode: there the ``mode`` given here is trusted. Nor
    does it tell the query's id, which eosink records with every proof to refuse a new
    checkpoint pointed at old output: on Connect pass ``checkpoint=`` (the query's
    ``checkpointLocation``), where eosink reads the id.
    ``fingerprint="error"`` (or ``"warn"``) stores a row count and hash with each proof and
    checks replays against it.
    """
    checked = _checked(sinks, writer_id)
    return ForeachBatchWriter(
        sinks=checked,
        writer_id=str(writer_id),
        mode=mode,
        keyed=check_keys(checked, mode),
        fingerprint=fingerprint,
        plugins=tuple(plugins),
        executor_plugins=tuple(executor_plugins),
        checkpoint=checkpoint,
    )


def write_batch(
    df: Any,
    *sinks: Any,
    writer_id: str | None = None,
    version: int | None = None,
    mode: OutputMode = "append",
    fingerprint: FingerprintMode = "off",
    plugins: Iterable[Any] = (),
    executor_plugins: Iterable[Any] = (),
) -> list[BatchOutcome]:
    """Write a batch DataFrame exactly once per (writer id, version), like Delta's txnVersion.

    A version at or below the last one committed by ``writer_id`` is skipped (and logged);
    another writer id writes independently. Returns one outcome per sink. ``plugins`` wrap the
    driver's phases, ``executor_plugins`` (picklable) every write task, as in ``foreach_batch``.
    """
    sinks = _checked(sinks, writer_id)
    check_keys(sinks, mode)
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
                executor_plugins=executor_plugins,
                fingerprint=fingerprint,
                df=df,
            )
        )
    return outcomes
