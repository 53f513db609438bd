"""Delta's own streaming sink and eosink-delta streaming into one table, on the Spark Delta's
connector is built for, in a process of its own (one JVM for every scenario): the child of
``test_jvm_delta_streaming_beside.py``.

It runs on Spark 4.2 (``eosink.testing.spark_child``: pyspark 4.2 from
``build-support/spark-env``, eosink and the rest from the parent's path), its ``run`` called
per scenario in one session with Delta's jars, :data:`delta_spark_process.DELTA_CONF` and
this module's ``CONF``.

Each scenario drives file-source queries (one JSON file per micro-batch, so a batch and its
replay hold the same rows) and reports, as plain JSON values, what it saw: the queries' ids,
the table's version around each replay, the eosink writer's outcomes, Delta's own reads. The
parent judges, and reads the tables again with delta-rs.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from eosink.testing.spark_child import error_of

SCHEMA = "id long, src string, batch int"
TRIGGER = "250 milliseconds"
#: Rows per input file (one file, one micro-batch).
ROWS = 3
#: The ids of a writer's rows start here: one range per writer, so a doubled or lost row names
#: its writer and its file.
BASE = {"D": 0, "E": 100_000, "S": 200_000, "M": 300_000}
#: The scenario's steps and their seconds, in the order they ran (for a slow run's report).
TIMES: list[tuple[str, float]] = []


class Feed:
    """One writer's input folder: each :meth:`drop` adds one file of ``ROWS`` new rows."""

    def __init__(self, root: str, name: str) -> None:
        self.name = name
        self.folder = os.path.join(root, f"in-{name}")
        self.files = 0
        self.expected: list[int] = []
        os.makedirs(self.folder)

    def drop(self) -> None:
        n = self.files
        ids = [BASE[self.name] + n * 100 + i for i in range(ROWS)]
        records = [{"id": i, "src": self.name, "batch": n} for i in ids]
        path = os.path.join(self.folder, f"{n:04d}.json")
        with open(path + ".tmp", "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
        os.rename(path + ".tmp", path)
        # Spark's file source takes files in order of their times: one second apart, in order.
        stamp = time.time() - 1000 + n
        os.utime(path, (stamp, stamp))
        self.files += 1
        self.expected.extend(ids)


def replay_last_batch(ckpt: str) -> int:
    """Drop the last batch's entry from the checkpoint's commit log, as a crash after the
    sink's commit and before Spark's leaves it: the restarted query runs that batch again,
    with the same batch id and the same offsets. The batch id."""
    commits = os.path.join(ckpt, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        if os.path.exists(os.path.join(commits, name)):
            os.remove(os.path.join(commits, name))
    return last


class Writer:
    """A streaming query over one feed into the table: Delta's own sink (``kind="delta"``) or
    eosink-delta through ``foreachBatch`` (``"foreach_batch"``) or its data source
    (``"data_source"``). :meth:`start` (again after :meth:`stop`) resumes from its checkpoint."""

    def __init__(
        self,
        spark: Any,
        root: str,
        feed: Feed,
        table: str,
        kind: str,
        writer_id: str | None = None,
    ) -> None:
        self.spark, self.feed, self.table, self.kind = spark, feed, table, kind
        self.ckpt = os.path.join(root, f"ckpt-{feed.name}")
        self.writer_id = writer_id or f"eosink-{feed.name}"
        self.query: Any = None
        self.eosink_writer: Any = None
        if kind == "foreach_batch":
            import eosink

            self.eosink_writer = eosink.foreach_batch(
                eosink.sink("delta", path=table), writer_id=self.writer_id
            )

    def start(self) -> None:
        stream = (
            self.spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(self.feed.folder)
            .writeStream.option("checkpointLocation", self.ckpt)
            # Not the default's back-to-back triggers: an idle query would poll its folder
            # without a pause, and two of them starve the batches of the other.
            .trigger(processingTime=TRIGGER)
        )
        if self.kind == "delta":
            self.query = stream.format("delta").outputMode("append").start(self.table)
        elif self.kind == "foreach_batch":
            self.query = stream.foreachBatch(self.eosink_writer).start()
        else:
            stream = stream.format("eosink-delta").option("writerId", self.writer_id)
            self.query = stream.option("path", self.table).start()

    def batch(self) -> None:
        """One new input file, and the query runs it."""
        started = time.monotonic()
        self.feed.drop()
        self.query.processAllAvailable()
        TIMES.append((f"batch {self.kind}-{self.feed.name}", round(time.monotonic() - started, 2)))

    def stop(self) -> None:
        self.query.stop()
        self.query = None

    def replay(self) -> dict[str, Any]:
        """Stop, forget the last batch's commit, start: the query runs that batch again. The
        table's version before and after, and the batch id replayed."""
        self.stop()
        return self.replay_after_crash()

    def replay_after_crash(self) -> dict[str, Any]:
        """:meth:`replay` of a stopped query (this writer's, or another sink's on the same
        checkpoint)."""
        before = version(self.spark, self.table)
        batch_id = replay_last_batch(self.ckpt)
        started = time.monotonic()
        self.start()
        self.query.processAllAvailable()
        TIMES.append((f"replay {self.kind}-{self.feed.name}", round(time.monotonic() - started, 2)))
        return {
            "writer": self.feed.name,
            "kind": self.kind,
            "batch_id": batch_id,
            "version_before": before,
            "version_after": version(self.spark, self.table),
            "last_batch_id": self.query.lastProgress["batchId"]
            if self.query.lastProgress
            else None,
        }

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "query_id": self.query.id if self.query else query_id(self.ckpt),
            "writer_id": self.writer_id,
            "expected": self.feed.expected,
        }
        if self.eosink_writer is not None:
            out["outcomes"] = [[o.ctx.batch_id, o.status] for o in self.eosink_writer.outcomes]
        return out


def query_id(ckpt: str) -> str:
    with open(os.path.join(ckpt, "metadata")) as f:
        return json.loads(f.readline())["id"]


def version(spark: Any, table: str) -> int:
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}` LIMIT 1")
    return int(history.collect()[0]["version"])


def maintain(spark: Any, table: str, step: str) -> str:
    """delta-spark's own table maintenance between batches."""
    started = time.monotonic()
    t = f"delta.`{table}`"
    statement = {
        "optimize": f"OPTIMIZE {t}",
        "retention": f"ALTER TABLE {t} SET TBLPROPERTIES "
        "('delta.setTransactionRetentionDuration' = 'interval 30 days')",
        "vacuum": f"VACUUM {t} RETAIN 0 HOURS",
        "checkpoint": f"ALTER TABLE {t} SET TBLPROPERTIES ('delta.checkpointInterval' = '1')",
    }[step]
    spark.sql(statement).collect()
    TIMES.append((step, round(time.monotonic() - started, 2)))
    return step


def reads(spark: Any, table: str) -> dict[str, Any]:
    """Delta's own reads of the table: every id, and the ids of each writer's filtered read."""
    frame = spark.read.format("delta").load(table)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").orderBy("version")
    return {
        "ids": [r["id"] for r in frame.select("id").collect()],
        "filtered": {
            src: [r["id"] for r in frame.where(f"src = '{src}'").select("id").collect()]
            for src in sorted(BASE)
        },
        "ranged": [r["id"] for r in frame.where("id >= 100000 AND id < 200000").collect()],
        "operations": [r["operation"] for r in history.collect()],
        "checkpoints": sorted(
            n for n in os.listdir(os.path.join(table, "_delta_log")) if ".checkpoint" in n
        ),
    }


# -- scenarios ------------------------------------------------------------------------------------

#: Between the rounds of the side-by-side run, in turn: delta-spark's maintenance.
MAINTENANCE = ("optimize", "retention", "vacuum")


def writers(spark: Any, root: str, table: str) -> dict[str, Writer]:
    """Delta's own sink (D), eosink-delta through ``foreachBatch`` (E) and through its data
    source (S): each on its own input, with its own checkpoint."""
    kinds = {"D": "delta", "E": "foreach_batch", "S": "data_source"}
    return {n: Writer(spark, root, Feed(root, n), table, k) for n, k in kinds.items()}


def finish(spark: Any, table: str, ws: dict[str, Writer], **out: Any) -> dict[str, Any]:
    out["writers"] = {n: w.report() for n, w in ws.items()}
    for w in ws.values():
        if w.query is not None:
            w.stop()
    return {"table": table, **out, **reads(spark, table)}


def beside(spark: Any, root: str) -> dict[str, Any]:
    """A table delta-spark creates (a checkpoint every commit, whoever commits); D, E and S
    run at the same time, their batches taking turns, with delta-spark's maintenance between
    the rounds; then each replays its last batch (a restart after a crash before Spark's
    commit) and runs one more."""
    table = os.path.join(root, "table")
    spark.sql(
        f"CREATE TABLE delta.`{table}` (id BIGINT, src STRING, batch INT) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '1')"
    )
    ws = writers(spark, root, table)
    for w in ws.values():
        w.start()
    for step in MAINTENANCE:
        for w in ws.values():
            w.batch()
        maintain(spark, table, step)
    replays = [w.replay() for w in ws.values()]
    for w in ws.values():
        w.batch()
    maintain(spark, table, "optimize")
    maintain(spark, table, "vacuum")
    return finish(spark, table, ws, replays=replays)


def one_after_other(spark: Any, root: str) -> dict[str, Any]:
    """One writer at a time. S makes the table (no CREATE TABLE): two batches, a replay of
    the last, one more, stop; D continues alike, then E; then each comes back for a batch
    and a replay of it. Delta's sink follows eosink and eosink follows Delta's sink, through
    either door."""
    table = os.path.join(root, "table")
    ws = writers(spark, root, table)
    order = [ws["S"], ws["D"], ws["E"]]
    replays = []
    for w in order:
        w.start()
        w.batch()
        w.batch()
        replays.append(w.replay())
        w.batch()
        w.stop()
        maintain(spark, table, "optimize")
        if w is order[0]:
            maintain(spark, table, "checkpoint")
    for w in order:
        w.start()
        w.batch()
        replays.append(w.replay())
        w.stop()
    maintain(spark, table, "vacuum")
    return finish(spark, table, ws, replays=replays)


def sink_swapped(spark: Any, root: str) -> dict[str, Any]:
    """One query, one checkpoint, its sink swapped between runs. Delta's sink writes two
    batches and the query crashes after the sink's commit of the second, before Spark's; the
    user restarts it with eosink (``foreachBatch``) under the query's id, the app id Delta's
    sink wrote its txns under: what happens. Then the query's Delta sink runs again (it skips
    the batch), stops cleanly, and eosink takes over under a writer id of its own: two
    batches and a replay; then the data-source door one batch, and Delta's sink one more."""
    table = os.path.join(root, "table")
    feed = Feed(root, "M")
    delta = Writer(spark, root, feed, table, "delta")
    delta.start()
    delta.batch()
    delta.batch()
    delta.stop()
    app_id = query_id(delta.ckpt)
    adopted = Writer(spark, root, feed, table, "foreach_batch", writer_id=app_id)
    try:
        adopted.replay_after_crash()
        adoption: dict[str, Any] = {"outcomes": adopted.report()["outcomes"]}
    except Exception as error:  # noqa: BLE001 - the parent judges it
        adoption = {"error": error_of(error)}
        adopted.stop()
    replays = [delta_rerun(delta, batch_id=1)]
    own = Writer(spark, root, feed, table, "foreach_batch")
    own.start()
    own.batch()
    own.batch()
    replays.append(own.replay())
    own.stop()
    for kind in ("data_source", "delta"):
        w = Writer(spark, root, feed, table, kind, writer_id=own.writer_id)
        w.start()
        w.batch()
        w.stop()
    return {
        "table": table,
        "app_id": app_id,
        "writer_id": own.writer_id,
        "adoption": adoption,
        "replays": replays,
        "outcomes": own.report()["outcomes"],
        "expected": feed.expected,
        **reads(spark, table),
    }


def delta_rerun(delta: Writer, batch_id: int) -> dict[str, Any]:
    """Delta's sink back on its checkpoint, whose batch ``batch_id`` Spark has not
    committed: it runs the batch again (and skips it), then stops."""
    before = version(delta.spark, delta.table)
    delta.start()
    delta.query.processAllAvailable()
    out = {
        "writer": delta.feed.name,
        "kind": delta.kind,
        "batch_id": batch_id,
        "version_before": before,
        "version_after": version(delta.spark, delta.table),
        "last_batch_id": delta.query.lastProgress["batchId"],
    }
    delta.stop()
    return out


def named_query(spark: Any, root: str) -> dict[str, Any]:
    """A query named with ``queryName`` (Spark hands the name to the sink among the options),
    through the ``eosink-delta`` data source: one batch."""
    table = os.path.join(root, "table")
    feed = Feed(root, "E")
    feed.drop()
    query = (
        spark.readStream.schema(SCHEMA)
        .json(feed.folder)
        .writeStream.format("eosink-delta")
        .queryName("orders")
        .option("writerId", "orders")
        .option("path", table)
        .option("checkpointLocation", os.path.join(root, "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        error = None
    except Exception as failure:  # noqa: BLE001 - the parent judges it
        error = error_of(failure)
    query.stop()
    ids = None
    if error is None:
        ids = [r["id"] for r in spark.read.format("delta").load(table).collect()]
    return {"error": error, "ids": ids, "expected": feed.expected}


SCENARIOS: dict[str, Callable[[Any, str], dict[str, Any]]] = {
    "beside": beside,
    "one_after_other": one_after_other,
    "sink_swapped": sink_swapped,
    "named_query": named_query,
}


def run(spark: Any, name: str, folder: str) -> dict[str, Any]:
    TIMES.clear()
    result = SCENARIOS[name](spark, folder)
    result["times"] = list(TIMES)
    return result


#: VACUUM RETAIN 0 HOURS between batches (no write is in flight then), and its file listing
#: in 2 tasks, not Spark's 10,000 (30-40 s a VACUUM in a local session otherwise).
CONF = {
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}
