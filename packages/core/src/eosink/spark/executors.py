"""Running the executor half of a batch on Spark: ``mapInArrow`` over the batch's DataFrame.

Each task calls the :class:`~eosink.protocol.WriteTask` on its partition's Arrow batches and
returns one row holding its pickled :class:`~eosink.model.PartitionResult`; the driver collects
one small row per partition, never the data.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from eosink.model import PartitionResult
from eosink.protocol import RunWrites, WriteTask

RESULT_SCHEMA = "result binary"


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
        rows = df.mapInArrow(lambda batches: _task_result(task, batches), RESULT_SCHEMA).collect()
        return [pickle.loads(bytes(row.result)) for row in rows]

    return run


def arrow_schema(df: Any) -> pa.Schema:
    """The Arrow schema of a Spark DataFrame, as ``mapInArrow`` will hand its rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        timezone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    except Exception:  # noqa: BLE001 - a session without the setting: Spark's default
        timezone = None
    return to_arrow_schema(df.schema, timezone=timezone or "UTC")
