"""End to end on local Spark, through both front doors, against the YT proxy emulator.

A file-source stream (one file per micro-batch, so a replay re-reads the same rows) runs into
a keyed YT static table. Each query is broken twice: mid-batch (an error inside the commit,
after the partitions were written: the query fails and is restarted from its checkpoint),
and after the MainTx commit but before Spark recorded the batch (the checkpoint's commit log
entry is removed, so the restarted query replays a batch the table already holds). The table
must hold exactly the source rows, sorted by the key; no staging table and no transaction
may be left.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest
from yt_static_helpers import keepers, leftovers, open_transactions, read_rows
from pyspark.errors import StreamingQueryException

import eosink

FILES, ROWS_PER_FILE = 3, 120
TABLE = "//home/eosink/e2e"


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    eosink.register_data_sources(session)
    yield session
    session.stop()


def write_file(folder, n):
    os.makedirs(folder, exist_ok=True)
    ids = [n * 1000 + i for i in range(ROWS_PER_FILE)]
    random.Random(n).shuffle(ids)
    with open(os.path.join(folder, f"part-{n}.json"), "w") as f:
        for i in ids:
            f.write(json.dumps({"id": i, "name": f"r{i}"}) + "\n")
    return ids


def source(spark, folder):
    return (
        spark.readStream.schema("id long, name string")
        .option("maxFilesPerTrigger", 1)
        .json(folder)
        .repartition(2)
    )


def sink_options(url):
    return {"proxy": url, "path": TABLE, "proxy_discovery": False, "key_columns": ("id",)}


def break_commits(emulator):
    """Every sort and merge fails with a non-retriable error: the commit fails after the
    writes (the keyed table sorts every batch)."""
    emulator.faults.fail_next(
        "start_operation", kind="error", times=None, message="injected: disk on fire"
    )


def forget_last_batch(checkpoint):
    """Spark died after the sink committed, before it wrote its own commit log entry."""
    commits = os.path.join(checkpoint, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    os.remove(os.path.join(commits, str(last)))
    crc = os.path.join(commits, f".{last}.crc")
    if os.path.exists(crc):
        os.remove(crc)
    return last


def check(yt, expected):
    rows = read_rows(yt, TABLE)
    ids = [r["id"] for r in rows]
    assert sorted(ids) == sorted(expected), "duplicates or losses"
    assert ids == sorted(ids), "the keyed table is not sorted"
    assert leftovers(yt) == []
    assert open_transactions(yt) == []


def scenario(start, folder, checkpoint, yt, emulator):
    expected = write_file(folder, 0)
    start().awaitTermination()  # batch 0
    expected += write_file(folder, 1)
    break_commits(emulator)
    with pytest.raises(StreamingQueryException, match="disk on fire"):
        start().awaitTermination()  # batch 1 fails mid-batch
    emulator.faults.clear()
    assert read_rows(yt, TABLE) and len(read_rows(yt, TABLE)) == ROWS_PER_FILE
    start().awaitTermination()  # batch 1 replayed and committed
    assert forget_last_batch(checkpoint) == 1
    expected += write_file(folder, 2)
    start().awaitTermination()  # batch 1 replayed again (skipped by the sink), then batch 2
    check(yt, expected)


def test_foreach_batch_front_door(spark, tmp_path, yt, yt_emulator):
    folder, checkpoint = str(tmp_path / "in"), str(tmp_path / "ckpt")
    writer = eosink.foreach_batch(
        eosink.sink("yt-static", **sink_options(yt_emulator.url)), writer_id="e2e-fb"
    )

    def start():
        return (
            source(spark, folder)
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )

    scenario(start, folder, checkpoint, yt, yt_emulator)
    assert writer.skipped >= 1


def test_data_source_front_door(spark, tmp_path, yt, yt_emulator):
    folder, checkpoint = str(tmp_path / "in"), str(tmp_path / "ckpt")

    def start():
        return (
            source(spark, folder)
            .writeStream.format("eosink-yt-static")
            .option("writerId", "e2e-ds")
            .option("proxy", yt_emulator.url)
            .option("path", TABLE)
            .option("proxyDiscovery", "false")
            .option("keyColumns", "id")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )

    scenario(start, folder, checkpoint, yt, yt_emulator)


def test_batch_jobs_through_both_front_doors(spark, tmp_path, yt, yt_emulator):
    rows = [(i, f"r{i}") for i in (5, 3, 9, 1)]
    df = spark.createDataFrame(rows, "id long, name string").repartition(2)
    sink = eosink.sink("yt-static", **sink_options(yt_emulator.url))
    assert [o.status for o in eosink.write_batch(df, sink, writer_id="daily", version=7)] == [
        "committed"
    ]
    assert [o.status for o in eosink.write_batch(df, sink, writer_id="daily", version=7)] == [
        "skipped"
    ]
    for _ in range(2):  # the second run of version 3 is skipped
        (
            df.write.format("eosink-yt-static")
            .option("writerId", "other")
            .option("version", 3)
            .option("proxy", yt_emulator.url)
            .option("path", TABLE)
            .option("proxyDiscovery", "false")
            .mode("append")
            .save()
        )
    ids = [r["id"] for r in read_rows(yt, TABLE)]
    assert ids == sorted([1, 3, 5, 9] * 2)
    assert leftovers(yt) == [] and open_transactions(yt) == []


def sleep_first(seconds, partition=None, started=None):
    """A mapInArrow step that sleeps before its first batch (in one partition, or in all),
    touching the file ``started`` first."""

    def run(batches):
        from pyspark import TaskContext

        if started:
            open(started, "a").close()
        if partition is None or TaskContext.get().partitionId() == partition:
            time.sleep(seconds)
        yield from batches

    return run


def end_planning_workers():
    """Do to the data-source planning workers of this test's driver what Spark does to a
    Python worker parked for reuse once it has been idle for a minute (or at once without
    worker reuse): kill it. Returns how many were killed."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            pass

    def ours(pid):
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    killed = 0
    for pid, ppid in parents.items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read()
        except OSError:
            continue
        # A forked worker: its parent is the daemon, with the same command line.
        if b"pyspark.sql.worker.write_into_data_source" in args and ppid in parents and ours(pid):
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                if f.read() == args:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
    return killed


def test_data_source_batch_outlives_the_transaction_timeouts(spark, tmp_path, yt, yt_emulator):
    """Through the data-source door, init runs in a planning worker that Spark ends after
    planning, and commit in another one; between them a straggler task takes several
    transaction timeouts (1 s here), after an upstream stage as long (which, with adaptive
    execution, runs before the write is planned), and still the batch commits exactly once,
    leaving no process behind."""
    folder, checkpoint = str(tmp_path / "in"), str(tmp_path / "ckpt")
    started = str(tmp_path / "write-stage-started")
    expected = write_file(folder, 0)
    schema = "id long, name string"
    query = (
        spark.readStream.schema(schema)
        .json(folder)
        .mapInArrow(sleep_first(4), schema)  # an upstream stage of four timeouts
        .repartition(2)
        .mapInArrow(sleep_first(5, partition=1, started=started), schema)  # a straggler
        .writeStream.format("eosink-yt-static")
        .option("writerId", "e2e-long")
        .option("proxy", yt_emulator.url)
        .option("path", TABLE)
        .option("proxyDiscovery", "false")
        .option("keyColumns", "id")
        .option("mainTxTimeoutS", "1")
        .option("partTxTimeoutS", "1")
        .option("subTxTimeoutS", "1")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    deadline = time.monotonic() + 120
    while not os.path.exists(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert end_planning_workers() >= 1, "no planning worker found"
    query.awaitTermination()
    check(yt, expected)
    deadline = time.monotonic() + 10
    while keepers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert keepers() == [], "a batch keeper outlived its batch"
