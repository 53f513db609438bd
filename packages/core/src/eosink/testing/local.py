"""A ``run_writes`` without Spark: partitions are lists of Arrow batches, run in this process.

It behaves like Spark where the protocol can tell: the task and its result cross a pickle
boundary (as they cross process boundaries on a cluster), every task attempt gets an id no
other attempt in the process gets (Spark's ``taskAttemptId``), and a task that fails with
:class:`~eosink.testing.faults.RetryableTaskError` is run again with the next attempt number,
the failed attempt's leftovers staying behind as they would on Spark.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterable
from typing import Any

import attrs
import pyarrow as pa

from eosink.model import BatchContext, BatchOutcome, PartitionResult
from eosink.protocol import WriteTask, run_batch
from eosink.testing.faults import RetryableTaskError, task_attempt

#: Task attempt ids, unique in the process like Spark's ``taskAttemptId`` in an application.
_attempt_ids = itertools.count()


def run_attempt(
    task: WriteTask, partition_id: int, batches: Iterable[pa.RecordBatch], number: int = 0
) -> PartitionResult:
    """Run one attempt of a partition (Spark's ``attemptNumber`` ``number``) with a fresh id."""
    shipped = pickle.loads(pickle.dumps(task))
    with task_attempt(number):
        result = shipped(partition_id, next(_attempt_ids), iter(batches))
    return pickle.loads(pickle.dumps(result))


@attrs.define
class LocalRunner:
    partitions: list[list[pa.RecordBatch]]
    max_attempts: int = 4

    def __call__(self, task: WriteTask) -> list[PartitionResult]:
        results = []
        for partition_id, batches in enumerate(self.partitions):
            for number in range(self.max_attempts):
                try:
                    results.append(run_attempt(task, partition_id, batches, number))
                except RetryableTaskError:
                    if number + 1 == self.max_attempts:
                        raise
                    continue
                break
        return results


def numbered_rows(batch_id: int, n: int = 5, **extra: Any) -> pa.RecordBatch:
    """``n`` rows of batch ``batch_id``: ``id`` (int64) ``batch_id * 1000 + i``, ``name``
    ``r<id>``, then the ``extra`` columns; ids of different batches never meet."""
    ids = [batch_id * 1000 + i for i in range(n)]
    columns = {
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"r{i}" for i in ids], pa.string()),
    }
    columns.update(extra)
    return pa.record_batch(columns)


def run_local(
    sink: Any,
    batch_id: int,
    parts: list[pa.RecordBatch] | None = None,
    *,
    sink_name: str,
    query_id: str | None,
    writer_id: str = "w",
    kind: str = "stream",
    mode: str = "append",
    plugins: tuple = (),
) -> BatchOutcome:
    """Batch ``batch_id`` through the whole protocol in this process, one task per record
    batch of ``parts`` (:func:`numbered_rows` by default); a stream batch of query ``query_id``
    (its checkpoint ``/ckpt/<query_id>``), or a batch job's version (``kind="batch"``).

    A sink's tests bind their sink's name and query once:
    ``run = functools.partial(run_local, sink_name="delta", query_id=QUERY)``."""
    parts = [numbered_rows(batch_id)] if parts is None else parts
    ctx = BatchContext(
        sink=sink_name,
        writer_id=writer_id,
        batch_id=batch_id,
        kind=kind,  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
        query_id=query_id if kind == "stream" else None,
        checkpoint=f"/ckpt/{query_id}" if kind == "stream" else None,
    )
    return run_batch(sink, ctx, parts[0].schema, LocalRunner([[p] for p in parts]), plugins=plugins)
