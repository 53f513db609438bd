"""Running batches into the files sink without Spark."""

from __future__ import annotations

import pyarrow as pa

from eosink import BatchContext, run_batch
from eosink.testing.local import LocalRunner


def rows(batch_id: int, partition: int = 0, n: int = 4, **columns) -> pa.RecordBatch:
    ids = [batch_id * 1000 + partition * 100 + i for i in range(n)]
    data = {"id": pa.array(ids, pa.int64()), "name": pa.array([f"r{i}" for i in ids])}
    data.update({k: pa.array(v) for k, v in columns.items()})
    return pa.record_batch(data)


def run(sink, batch_id, partitions=None, *, writer="w", kind="stream", mode="append", query="q1"):
    partitions = [[rows(batch_id, p)] for p in range(2)] if partitions is None else partitions
    schema = partitions[0][0].schema
    ctx = BatchContext(
        "files",
        writer,
        batch_id,
        kind=kind,
        mode=mode,
        query_id=query if kind == "stream" else None,
    )
    return run_batch(sink, ctx, schema, LocalRunner(partitions))
