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

import attrs
import pyarrow as pa

from eosink.model import PartitionResult
from eosink.protocol import WriteTask
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
