"""The streaming job of the quickstart, run as a child process so that it can be killed.

A file source (``input/``, one file per micro-batch) is written through eosink's
``foreach_batch`` into the ``files`` sink (``output/``, Parquet with a Spark manifest log).
``--kill mid-write:N`` freezes the job in the middle of batch N (part files on disk, manifest
entry not yet written) and ``--kill after-commit:N`` right after batch N is committed but
before Spark records it in its checkpoint; the parent then kills the process group (the JVM
included) with SIGKILL. Every batch outcome is appended to ``events.jsonl``; ``--read-back``
counts what Spark's own reader sees in the output and writes ``readback.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import structlog

import eosink
from eosink.plugin import hookimpl
from eosink_files.sink import FilesSink

WRITER_ID = "quickstart"
SCHEMA = "id long, user string, amount double, ts timestamp"


class FreezeInWrite:
    """Executor plugin: partition 1 of batch N writes its files, then freezes (never returns)."""

    def __init__(self, batch: int, marker: str) -> None:
        self.batch, self.marker = batch, marker

    @hookimpl(wrapper=True)
    def write(self, ctx, partition_id):
        message = yield
        if ctx.batch_id == self.batch and partition_id == 1:
            open(self.marker, "w").close()
            time.sleep(3600)
        return message


class FreezeAfterCommit:
    """Driver plugin: batch N is committed, then the job freezes before Spark records it."""

    def __init__(self, batch: int, marker: str, events: str) -> None:
        self.batch, self.marker, self.events = batch, marker, events

    @hookimpl(wrapper=True)
    def commit(self, ctx, proof):
        result = yield
        if ctx.batch_id == self.batch:
            with open(self.events, "a") as f:
                f.write(
                    json.dumps({"batch": ctx.batch_id, "status": "committed", "rows": proof.rows})
                    + "\n"
                )
            open(self.marker, "w").close()
            time.sleep(3600)
        return result


def spark_session(workdir: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    scratch = os.path.join(workdir, "spark-tmp")
    os.makedirs(scratch, exist_ok=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("eosink-quickstart")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", scratch)
        .config("spark.driver.extraJavaOptions", f"-Duser.home={scratch}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(workdir: str, kill: str | None, read_back: bool) -> None:
    structlog.configure(
        processors=[
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.JSONRenderer(),
        ]
    )
    source, out = os.path.join(workdir, "input"), os.path.join(workdir, "output")
    checkpoint = os.path.join(workdir, "checkpoint")
    plugins, executor_plugins = [], []
    if kill:
        point, batch = kill.split(":")
        marker = os.path.join(workdir, f"frozen-{point}-{batch}")
        if point == "mid-write":
            executor_plugins.append(FreezeInWrite(int(batch), marker))
        else:
            plugins.append(
                FreezeAfterCommit(int(batch), marker, os.path.join(workdir, "events.jsonl"))
            )
    spark = spark_session(workdir)
    writer = eosink.foreach_batch(
        FilesSink(path=out),
        writer_id=WRITER_ID,
        plugins=plugins,
        executor_plugins=executor_plugins,
    )

    def each_batch(df, batch_id):
        before = writer.committed + writer.skipped
        try:
            writer(df, batch_id)
        finally:
            new = writer.committed + writer.skipped - before
            with open(os.path.join(workdir, "events.jsonl"), "a") as f:
                for o in list(writer.outcomes)[len(writer.outcomes) - new :]:
                    f.write(
                        json.dumps({"batch": o.ctx.batch_id, "status": o.status, "rows": o.rows})
                        + "\n"
                    )

    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .repartition(2)
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if read_back:
        from pyspark.sql import functions as F

        written = spark.read.parquet(out)  # Spark's own reader: it reads through the manifest
        source_ids = spark.read.parquet(source).select("id")
        stats = written.agg(F.count("*").alias("rows"), F.countDistinct("id").alias("ids")).first()
        result = {
            "rows_in": source_ids.count(),
            "rows_read": stats["rows"],
            "duplicates": stats["rows"] - stats["ids"],
            "lost": source_ids.subtract(written.select("id")).count(),
        }
        with open(os.path.join(workdir, "readback.json"), "w") as f:
            json.dump(result, f)
    spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quickstart.job")
    parser.add_argument("workdir")
    parser.add_argument("--kill", help="mid-write:N or after-commit:N")
    parser.add_argument("--read-back", action="store_true")
    args = parser.parse_args(argv)
    run(args.workdir, args.kill, args.read_back)
    return 0


if __name__ == "__main__":
    sys.exit(main())
