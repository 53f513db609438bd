"""The throughput benchmarks' streams: their input, Parquet parts of 5 typed columns; a sink's
queries through both front doors and a bare loop in Spark's tasks beside them; the wall time
of a query.

Every sink's throughput benchmark reads the same stream (``maxFilesPerTrigger`` parts a
micro-batch), so that their figures compare: ids counting up from 0, and a string, a double,
a date and a UTC timestamp column derived from them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: The stream's schema, as Spark's ``readStream.schema`` takes it.
SCHEMA = "id long, name string, amount double, day date, ts timestamp"


def stream_rows(start: int, rows: int) -> pa.Table:
    """``rows`` rows of the stream from id ``start``."""
    return pa.table(
        {
            "id": pa.array(range(start, start + rows), pa.int64()),
            "name": pa.array([f"name-{i % 10_000}" for i in range(start, start + rows)]),
            "amount": pa.array([i * 0.25 for i in range(start, start + rows)], pa.float64()),
            "day": pa.array([19_000 + (i % 30) for i in range(rows)], pa.int32()).cast(pa.date32()),
            "ts": pa.array(
                [1_700_000_000_000_000 + i * 1_000 for i in range(rows)], pa.int64()
            ).cast(pa.timestamp("us", tz="UTC")),
        }
    )


def write_stream_input(folder: str, batches: int, rows: int, files_per_batch: int) -> None:
    """``batches`` micro-batches of ``rows`` rows into the new ``folder``, each batch
    ``files_per_batch`` Parquet parts (``part-000.parquet``, ...; one task per part)."""
    os.makedirs(folder)
    rows //= files_per_batch
    for part in range(batches * files_per_batch):
        table = stream_rows(part * rows, rows)
        pq.write_table(table, os.path.join(folder, f"part-{part:03d}.parquet"))


def timed_query(start: Callable[[], Any]) -> float:
    """Seconds from ``start()`` (which starts a streaming query, e.g. with an ``availableNow``
    trigger) to the query's end; raises if the query failed."""
    began = time.perf_counter()
    query = start()
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(str(query.exception()))
    return time.perf_counter() - began


def available_now(frame: Callable[[], Any], folder: str) -> Callable[[str], Any]:
    """``writer(tag)``: the ``DataStreamWriter`` of ``frame()`` with an ``availableNow`` trigger
    and a checkpoint of its own per ``tag`` under ``folder``, as :func:`both_doors` takes it."""

    def writer(tag: str) -> Any:
        return (
            frame()
            .writeStream.trigger(availableNow=True)
            .option("checkpointLocation", f"{folder}/{tag}-ckpt")
        )

    return writer


def both_doors(
    writer: Callable[[str], Any], sink: Any, spark_options: dict[str, str]
) -> dict[str, Callable[[], Any]]:
    """start() of a query through each front door of ``sink``: ``"data source"``
    (``format("eosink-<name>")`` with ``spark_options``, which must say what the sink's options
    say) and ``"foreachBatch"`` (``eosink.foreach_batch(sink)``). ``writer(tag)`` returns the
    query's ``DataStreamWriter`` (trigger and a checkpoint of its own per ``tag``; see
    :func:`available_now`)."""
    import eosink

    def data_source() -> Any:
        query = writer("ds").format(f"eosink-{sink.name}").option("writerId", "bench")
        return query.options(**spark_options).start()

    def foreach_batch() -> Any:
        return writer("fb").foreachBatch(eosink.foreach_batch(sink, writer_id="bench")).start()

    return {"data source": data_source, "foreachBatch": foreach_batch}


def in_every_task(write: Callable[[Iterator[pa.RecordBatch]], int]) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function that runs ``write(batches)`` in every Spark task of the batch
    on the task's Arrow batches (``mapInArrow``): the bare loop a benchmark sets beside a sink,
    writing from the same tasks with no protocol. ``write`` returns the rows it wrote."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"rows": [write(batches)]})

    def each_batch(df: Any, _batch_id: int) -> None:
        df.mapInArrow(task, "rows long").collect()

    return each_batch
