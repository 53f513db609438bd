"""Running the executor half of a batch on Spark: ``mapInArrow`` over the batch's DataFrame.

Each task calls the :class:`~eosink.protocol.WriteTask` on its partition's Arrow batches and
returns one row holding its pickled :class:`~eosink.model.PartitionResult`; the driver collects
one small row per partition, never the data.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa

from eosink.model import PartitionResult
from eosink.protocol import RunWrites, WriteTask
from eosink.spark.session import session_conf

RESULT_SCHEMA = "result binary"

#: Spark's limit of an Arrow batch handed to Python, in bytes (SQL conf; 64 MB by default).
ARROW_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
#: The one value of :data:`ARROW_BYTES` that turns its check off (Scala's ``Int.MaxValue``).
NO_BYTE_LIMIT = str(2**31 - 1)


@contextmanager
def batches_by_rows(spark: Any) -> Iterator[None]:
    """Cut the Arrow hand-over into batches of ``maxRecordsPerBatch`` rows alone, for one write.

    Spark 4 also cuts at ``maxBytesPerBatch`` bytes (SPARK-51316), and measures that by asking
    every vector of the batch its size after each row: about 40% of the JVM's time of the
    hand-over on a 5-column stream (benchmarks/README.md). Only ``Int.MaxValue`` skips the
    check; that is Spark 3's batching, bounded by the row count. A limit the user set holds.
    The setting is restored after the write (``session_conf``).
    """
    if spark.conf.get(ARROW_BYTES, None) is not None:
        yield
        return
    with session_conf(spark, ARROW_BYTES, NO_BYTE_LIMIT):
        yield


def _task_result(task: WriteTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    context = TaskContext.get()
    partition_id = context.partitionId() if context else 0
    # taskAttemptId, not attemptNumber: a resubmitted stage restarts attemptNumber at 0 while
    # tasks of the old stage attempt may still run, so only the id names an attempt uniquely.
    attempt = context.taskAttemptId() if context else 0
    result = task(partition_id, attempt, batches)
    yield pa.record_batch([pa.array([pickle.dumps(result)], pa.binary())], names=["result"])


def spark_run_writes(df: Any) -> RunWrites:
    """A ``run_writes`` that runs every partition of ``df`` through ``mapInArrow``."""

    def run(task: WriteTask) -> list[PartitionResult]:
        with batches_by_rows(df.sparkSession):
            rows = df.mapInArrow(
                lambda batches: _task_result(task, batches), RESULT_SCHEMA
            ).collect()
        return [pickle.loads(bytes(row.result)) for row in rows]

    return run


def arrow_schema(df: Any) -> pa.Schema:
    """The Arrow schema of a Spark DataFrame, as ``mapInArrow`` will hand its rows."""
    try:
        timezone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    except Exception:  # noqa: BLE001 - a session without the setting: Spark's default
        timezone = None
    return spark_arrow_schema(df.schema, timezone or "UTC")


def spark_arrow_schema(schema: Any, timezone: str) -> pa.Schema:
    """The Arrow schema of Spark's ``schema``, its timestamps (with a time zone) in
    ``timezone``: what Spark hands Python with that session time zone.

    pyspark's ``to_arrow_schema`` takes the zone from Spark 4.2 on; 4.1's writes every such
    timestamp in UTC (``timestamp_utc``), so the zone is set here on every timestamp field,
    nested ones too."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone=timezone)
    except TypeError as exc:
        if "timezone" not in str(exc):
            raise
    utc = to_arrow_schema(schema)
    return pa.schema([f.with_type(_in_zone(f.type, timezone)) for f in utc], utc.metadata)


def _in_zone(kind: pa.DataType, timezone: str) -> pa.DataType:
    if pa.types.is_timestamp(kind):
        return pa.timestamp(kind.unit, tz=timezone) if kind.tz is not None else kind
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_in_zone(f.type, timezone)) for f in kind])
    if pa.types.is_map(kind):
        return pa.map_(
            kind.key_field.with_type(_in_zone(kind.key_type, timezone)),
            kind.item_field.with_type(_in_zone(kind.item_type, timezone)),
        )
    if pa.types.is_large_list(kind):
        return pa.large_list(kind.value_field.with_type(_in_zone(kind.value_type, timezone)))
    if pa.types.is_list(kind):
        return pa.list_(kind.value_field.with_type(_in_zone(kind.value_type, timezone)))
    return kind
