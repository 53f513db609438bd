"""The query a test kills: ``python -m eosink.testing.killable_query <job file>``.

Runs the :class:`QueryJob` in the file (written by
:class:`~eosink.testing.killed_query.QueryProcesses`) to its end (trigger ``availableNow``) on a
local Spark. The job's folder is the file's folder: its ``armed`` marker
makes the task holding the stall row touch ``reached`` and wait; the checkpoint is ``ckpt``
there unless the job names one (an ``s3a://`` URI, say).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from typing import Any, Literal

import attrs

from eosink.testing.replay import (
    CRASH_ID,
    SCHEMA,
    grouped_totals,
    json_stream,
    totals_stall,
)

Door = Literal["foreach_batch", "data_source"]
#: The query's JVM lives for a few small batches: compiled with C1 only and collected serially,
#: it costs ~20% less CPU (the tests share two cores).
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@attrs.frozen
class QueryJob:
    """One streaming query: its source, the row it stalls on, its sink and front door.

    ``sink_options`` are the keyword arguments of ``eosink.sink(sink, ...)`` (the foreachBatch
    door); ``source_options`` the options of ``format("eosink-<sink>")`` (the data source door).
    The source is the JSON folder ``<work>/in`` with ``schema``, unless ``stream`` names a
    ``module:function`` that builds the streaming DataFrame from ``(spark, job)``; ``params``
    is free for that function. A row stalls when it holds every value of ``stall`` for the
    columns the batch has. ``totals``: the JSON source aggregated by
    :func:`~eosink.testing.replay.grouped_totals` instead, written with ``output_mode``
    ``update`` (into a keyed sink). ``checkpoint``: the query's checkpoint location
    (``<work>/ckpt`` when ``None``); ``spark``: settings of the query's Spark session (jars,
    ``spark.hadoop.*``), in the job file rather than on a command line since they may hold keys.
    """

    sink: str
    door: Door
    writer_id: str = "orders"
    sink_options: dict[str, Any] = attrs.field(factory=dict)
    source_options: dict[str, str] = attrs.field(factory=dict)
    schema: str = SCHEMA
    stall: dict[str, Any] = attrs.field(factory=lambda: {"id": CRASH_ID})
    stream: str | None = None
    params: dict[str, Any] = attrs.field(factory=dict)
    totals: bool = False
    output_mode: str = "append"
    checkpoint: str | None = None
    spark: dict[str, str] = attrs.field(factory=dict)

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> QueryJob:
        return cls(**json.loads(text))


def totals_job(sink: str, sink_options: dict[str, Any], source: str | os.PathLike[str]) -> QueryJob:
    """The keyed sinks' killed update-mode query: :func:`~eosink.testing.replay.grouped_totals`
    of the JSON folder ``source`` (``write_json_source``) through foreachBatch in update mode,
    stalled in its third batch (:func:`~eosink.testing.replay.totals_stall`)."""
    return QueryJob(
        sink=sink,
        door="foreach_batch",
        writer_id="totals",
        sink_options=sink_options,
        schema="id long, name string",
        stall=totals_stall(source),
        totals=True,
        output_mode="update",
    )


def holds(batch: Any, stall: dict[str, Any]) -> bool:
    """Whether a row of ``batch`` holds every value of ``stall`` for the columns it has."""
    columns = [c for c in stall if c in batch.schema.names]
    if not columns:
        return False
    return any(
        all(row[c] == stall[c] for c in columns) for row in batch.select(columns).to_pylist()
    )


def stall_while_armed(work: str, stall: dict[str, Any]):
    """A ``mapInArrow`` function: the task holding the stall row waits while ``<work>/armed``
    exists, touching ``<work>/reached`` (the test's signal to kill)."""

    def apply(batches):
        for batch in batches:
            if holds(batch, stall):
                while os.path.exists(os.path.join(work, "armed")):
                    open(os.path.join(work, "reached"), "w").close()
                    time.sleep(0.2)
            yield batch

    return apply


def source(spark: Any, work: str, job: QueryJob) -> Any:
    if job.totals:
        return grouped_totals(spark, os.path.join(work, "in"), schema=job.schema)
    if job.stream is None:
        return json_stream(spark, os.path.join(work, "in"), schema=job.schema)
    module, _, function = job.stream.partition(":")
    return getattr(importlib.import_module(module), function)(spark, job)


def writer(df: Any, spark: Any, job: QueryJob) -> Any:
    import eosink

    if job.door == "foreach_batch":
        sink = eosink.sink(job.sink, **job.sink_options)
        return df.writeStream.foreachBatch(eosink.foreach_batch(sink, writer_id=job.writer_id))
    eosink.register_data_sources(spark)
    return (
        df.writeStream.format(f"eosink-{job.sink}")
        .option("writerId", job.writer_id)
        .options(**job.source_options)
    )


def main(job_file: str) -> None:
    from eosink.testing.spark import local_spark

    work = os.path.dirname(os.path.abspath(job_file))
    with open(job_file) as f:
        job = QueryJob.from_json(f.read())
    spark = local_spark(java_options=SHORT_LIVED_JVM, **job.spark)
    df = source(spark, work, job)
    df = df.mapInArrow(stall_while_armed(work, job.stall), df.schema)
    query = (
        writer(df, spark, job)
        .outputMode(job.output_mode)
        .option("checkpointLocation", job.checkpoint or os.path.join(work, "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    # Through the module's own name: the Spark tasks then unpickle its functions by reference.
    from eosink.testing import killable_query

    killable_query.main(sys.argv[1])
