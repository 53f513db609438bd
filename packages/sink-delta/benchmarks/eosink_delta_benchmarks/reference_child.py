"""Delta's own streaming sink beside eosink-delta, in one Spark 4.2 session: the child of
:mod:`eosink_delta_benchmarks.reference`.

Delta 4.4's connector runs on Spark 4.2, not on the project's pyspark, so these runs happen in
a process of their own (``eosink.testing.spark_child``: pyspark 4.2, eosink and the rest from
the parent's path, Delta's jars), which calls :func:`run` once per scenario. A scenario's name
carries its sizes and Delta's snapshot partitions (0: Delta's default), e.g.
``throughput:batches=5:rows=2000000:repeat=3:warm=1:snapshot_partitions=1`` or
``history:batches=200:warm=1:snapshot_partitions=1``; what comes back is plain JSON values,
which the parent turns into the report's tables.

* ``throughput``: the report's stream (``eosink_files_benchmarks.throughput``: one Parquet file
  per micro-batch, ``availableNow``) into Spark's parquet sink, Delta's streaming sink,
  eosink-delta's data source and its ``foreachBatch`` (the sink's defaults); every path warmed
  once on a small copy of the stream, then ``repeat`` interleaved rounds. Every output is read
  back (delta-spark reads the Delta tables) and must hold each row exactly once.
* ``history``: a stream of tiny micro-batches (one file of :data:`SMALL_ROWS` rows each) into
  Delta's streaming sink and both of eosink-delta's doors; per batch, Spark's own timing of the
  sink (``durationMs["addBatch"]`` of the query's progress) and of the whole trigger.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import Any


#: Delta's session as its documentation sets one up (the SQL extension and its catalog), every
#: other Delta setting at its default (but the snapshot's partitions, which the scenario names:
#: see ``reference.SNAPSHOT_PARTITIONS``). The report's Arrow batch size of
#: section 1, and room for every batch's progress of the history run (Spark keeps 100).
CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.sql.streaming.numRecentProgressUpdates": "100000",
    "spark.ui.showConsoleProgress": "false",
}

SPARK = "Spark's parquet sink"
DELTA = "Delta's streaming sink"
DATA_SOURCE = "eosink-delta, data source"
FOREACH_BATCH = "eosink-delta, foreachBatch"
#: Each path's output folder (the data source's is the name of its format).
FOLDERS = {
    SPARK: "spark-parquet",
    DELTA: "delta",
    DATA_SOURCE: "eosink-delta",
    FOREACH_BATCH: "eosink-delta-fb",
}
#: The warm-up's stream: as section 1's (two files of at most this many rows).
WARM_ROWS = 200_000
#: Delta's partitions of a table's snapshot (the state of its log): 50 by default.
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
#: Rows of one micro-batch of the history run.
SMALL_ROWS = 5
#: The history run's warm-up: this many tiny batches of every path, into tables of their own.
WARM_BATCHES = 3


def sizes(name: str) -> tuple[str, dict[str, int]]:
    """The scenario's kind and its sizes: ``kind:key=value:...``."""
    kind, *pairs = name.split(":")
    return kind, {k: int(v) for k, v in (p.split("=") for p in pairs)}


def starts(
    spark: Any, source: str, out: Callable[[str], tuple[str, str]], small: bool = False
) -> dict[str, Callable[[], Any]]:
    """name -> start() of each path over ``source``; ``out(name)``: a fresh (output,
    checkpoint). ``small``: the history run's stream, one tiny file a batch."""
    from eosink_delta_benchmarks import throughput as delta_throughput

    import eosink

    def stream() -> Any:
        if small:
            reader = spark.readStream.schema("id long, batch int").option("maxFilesPerTrigger", 1)
            frame = reader.parquet(source)
        else:
            from eosink_files_benchmarks import throughput as files_throughput

            frame = files_throughput.stream(spark, source)
        return frame.writeStream.trigger(availableNow=True)

    def into(format_: str, name: str) -> Callable[[], Any]:
        def start() -> Any:
            target, ckpt = out(FOLDERS[name])
            return stream().format(format_).option("checkpointLocation", ckpt).start(target)

        return start

    def foreach_batch() -> Any:
        target, ckpt = out(FOLDERS[FOREACH_BATCH])
        writer = eosink.foreach_batch(eosink.sink("delta", path=target), writer_id="bench")
        return stream().foreachBatch(writer).option("checkpointLocation", ckpt).start()

    paths = {
        DELTA: into("delta", DELTA),
        DATA_SOURCE: delta_throughput.data_source(stream, out, FOLDERS[DATA_SOURCE]),
        FOREACH_BATCH: foreach_batch,
    }
    return paths if small else {SPARK: into("parquet", SPARK), **paths}


def outputs(folder: str) -> Callable[[str], tuple[str, str]]:
    """out(name): the output and checkpoint folders ``name`` under ``folder``."""

    def out(name: str) -> tuple[str, str]:
        return os.path.join(folder, name), os.path.join(folder, name + "-ckpt")

    return out


def finished(name: str, query: Any) -> None:
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(f"{name}: {query.exception()}")


def check(spark: Any, name: str, path: str, total: int, distinct: bool = True) -> None:
    """The output holds every row of the stream exactly once: as many rows as distinct ids as
    the stream had (``distinct`` False: as many rows; a path's later runs, whose first run
    counted its distinct ids: ~7 s each at the full size). Spark's parquet sink is read
    through its manifest, the Delta tables by delta-spark, its snapshot made in one task."""
    from pyspark.sql import functions as F

    before = spark.conf.get(SNAPSHOT_PARTITIONS, None)
    spark.conf.set(SNAPSHOT_PARTITIONS, "1")
    try:
        frame = spark.read.parquet(path) if name == SPARK else spark.read.format("delta").load(path)
        if distinct:
            rows, ids = frame.agg(F.count("*"), F.countDistinct("id")).first()
        else:
            rows = ids = frame.count()
    finally:
        if before is None:
            spark.conf.unset(SNAPSHOT_PARTITIONS)
        else:
            spark.conf.set(SNAPSHOT_PARTITIONS, before)
    if rows != total or ids != total:
        raise AssertionError(f"{name}: {rows} rows, {ids} distinct ids; the stream had {total}")


def timed(
    spark: Any, name: str, source: str, folder: str, total: int, distinct: bool = True
) -> tuple[float, float]:
    """One run of path ``name`` over ``source`` into a folder of its own (Delta keeps a table's
    log by its path for the session: a path is never written twice), checked, then removed:
    the run's seconds and the check's."""
    start = starts(spark, source, outputs(folder))[name]
    began = time.perf_counter()
    finished(name, start())
    seconds = time.perf_counter() - began
    began = time.perf_counter()
    check(spark, name, os.path.join(folder, FOLDERS[name]), total, distinct)
    checked = time.perf_counter() - began
    shutil.rmtree(folder, ignore_errors=True)
    return seconds, checked


def throughput(spark: Any, folder: str, batches: int, rows: int, repeat: int, warm: int) -> dict:
    """Seconds of every run of every path (start to the end of the last batch)."""
    from eosink_files_benchmarks import throughput as files_throughput

    source, warm_source = os.path.join(folder, "in"), os.path.join(folder, "in-warm")
    began = time.monotonic()
    files_throughput.make_input(source, batches, rows)
    if warm:
        files_throughput.make_input(warm_source, 2, min(rows, WARM_ROWS))
    input_s = time.monotonic() - began
    names = list(FOLDERS)
    warmed: dict[str, float] = {}
    for n, name in enumerate(names if warm else ()):
        warm_total = 2 * min(rows, WARM_ROWS)
        warmed[name] = timed(spark, name, warm_source, f"{folder}/warm-{n}", warm_total)[0]
    seconds: dict[str, list[float]] = {name: [] for name in names}
    checks: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeat):
        for n, name in enumerate(names):  # interleaved: a burst of load spreads over all
            run_folder, first = f"{folder}/r{round_}-{n}", round_ == 0
            spent, checked = timed(spark, name, source, run_folder, batches * rows, first)
            seconds[name].append(spent)
            checks[name].append(round(checked, 1))
    shutil.rmtree(folder, ignore_errors=True)
    return {"runs": seconds, "warm_runs": warmed, "input_s": input_s, "checks_s": checks}


def small_input(folder: str, batches: int) -> None:
    """``batches`` Parquet files of :data:`SMALL_ROWS` rows, their times one second apart
    (Spark's file source takes files in the order of their times)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder)
    now = time.time() - batches - 10
    for n in range(batches):
        ids = list(range(n * SMALL_ROWS, (n + 1) * SMALL_ROWS))
        table = pa.table({"id": pa.array(ids, pa.int64()), "batch": pa.array([n] * SMALL_ROWS)})
        path = os.path.join(folder, f"in-{n:05d}.parquet")
        pq.write_table(table.cast(pa.schema([("id", pa.int64()), ("batch", pa.int32())])), path)
        os.utime(path, (now + n, now + n))


def history(spark: Any, folder: str, batches: int, warm: int) -> dict:
    """Per path: Spark's ``addBatch`` and whole-trigger milliseconds of every batch, in batch
    order, and the Delta checkpoints its table has at the end. ``warm``: each path first runs
    a few tiny batches into a table of its own."""
    source = os.path.join(folder, "in")
    small_input(source, batches)
    if warm:
        small_input(os.path.join(folder, "in-warm"), WARM_BATCHES)
        warming = starts(spark, os.path.join(folder, "in-warm"), outputs(folder + "/warm"), True)
        for name, start in warming.items():
            finished(name, start())
    written = os.path.join(folder, "out")
    found: dict[str, Any] = {}
    for name, start in starts(spark, source, outputs(written), small=True).items():
        began = time.perf_counter()
        query = start()
        finished(name, query)
        seconds = time.perf_counter() - began
        progress = sorted(
            (p for p in query.recentProgress if p.numInputRows and "addBatch" in p.durationMs),
            key=lambda p: p.batchId,
        )
        if len(progress) != batches:
            raise AssertionError(f"{name}: {len(progress)} batches with rows, expected {batches}")
        table = os.path.join(written, FOLDERS[name])
        check(spark, name, table, batches * SMALL_ROWS)
        found[name] = {
            "add_batch_ms": [p.durationMs["addBatch"] for p in progress],
            "trigger_ms": [p.durationMs.get("triggerExecution", 0) for p in progress],
            "seconds": round(seconds, 1),
            "checkpoints": checkpoints(table),
        }
    shutil.rmtree(folder, ignore_errors=True)
    return found


def checkpoints(table: str) -> int:
    """The checkpoints in the table's log (their files, not their checksums)."""
    names = os.listdir(os.path.join(table, "_delta_log"))
    return sum(".checkpoint." in n and not n.endswith(".crc") for n in names)


def run(spark: Any, name: str, folder: str) -> dict[str, Any]:
    kind, n = sizes(name)
    if n.get("snapshot_partitions"):  # 0: Delta's default
        spark.conf.set(SNAPSHOT_PARTITIONS, str(n["snapshot_partitions"]))
    else:
        spark.conf.unset(SNAPSHOT_PARTITIONS)
    if kind == "throughput":
        return throughput(spark, folder, n["batches"], n["rows"], n["repeat"], n["warm"])
    if kind == "history":
        return {"paths": history(spark, folder, n["batches"], n["warm"])}
    raise ValueError(f"unknown scenario {name!r}")
