"""A ``run_writes`` without Spark: partitions are lists of Arrow batches, run in this process.

It behaves like Spark where the protocol can tell: the task and its result cross a pickle
boundary (as they cross process boundaries on a cluster), and a task that fails with
:class:`~eosink.testing.faults.RetryableTaskError` is run again with the next attempt number,
the failed attempt's leftovers staying behind as they would on Spark.
"""

from __future__ import annotations

import pickle

import attrs
import pyarrow as pa

from eosink.model import PartitionResult
from eosink.protocol import WriteTask
from eosink.testing.faults import RetryableTaskError


@attrs.define
class LocalRunner:
    partitions: list[list[pa.RecordBatch]]
    max_attempts: int = 4

    def __call__(self, task: WriteTask) -> list[PartitionResult]:
        results = []
        for partition_id, batches in enumerate(self.partitions):
            for attempt in range(self.max_attempts):
                shipped = pickle.loads(pickle.dumps(task))
                try:
                    result = shipped(partition_id, attempt, iter(batches))
                except RetryableTaskError:
                    if attempt + 1 == self.max_attempts:
                        raise
                    continue
                results.append(pickle.loads(pickle.dumps(result)))
                break
        return results
