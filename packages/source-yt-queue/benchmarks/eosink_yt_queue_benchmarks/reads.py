"""Benchmark: rows/s the source reads from the emulator's queue into Spark's ``noop`` sink vs a
bare ``pull_queue`` loop over the same rows with the client (the ceiling).

    ./pants run packages/source-yt-queue/benchmarks:reads -- [rows] [tablets] [repeat]

Defaults: 200,000 rows in 4 tablets, best of 3. The emulator runs in this process; both sides
read it over HTTP with the real client, 10,000 rows per ``pull_queue`` request. The bare loop
pulls every tablet in turn in this process and keeps the rows (as Python dicts, no Arrow); the
source runs a streaming query with ``trigger(availableNow=True)`` and a fresh checkpoint into
``format("noop")`` on local[2], so its time includes planning, the offset and commit logs, one
task per tablet, the rows turned into Arrow, and Spark's Python worker round trips. A warm-up
query starts the JVM and the Python workers first. Runs are interleaved and the best of
``repeat`` is kept per side, to damp the noise of a shared machine. Prints a table.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from eosink_yt_emulator.queue_tables import create_queue

PULL = 10_000
SCHEMA = [
    {"name": "id", "type": "int64"},
    {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"},
]


def make_queue(client, path: str, rows: int, tablets: int) -> None:
    create_queue(client, path, SCHEMA, tablets)
    per = rows // tablets
    for t in range(tablets):
        for lo in range(0, per, 50_000):
            client.insert_rows(
                path,
                [
                    {
                        "$tablet_index": t,
                        "id": t * 10**9 + i,
                        "name": f"n{i % 1000}",
                        "amount": i / 4,
                    }
                    for i in range(lo, min(lo + 50_000, per))
                ],
            )


def bare(client, path: str, rows: int, tablets: int) -> int:
    got = 0
    for t in range(tablets):
        offset, end = 0, rows // tablets
        while offset < end:
            batch = list(
                client.pull_queue(path, offset=offset, partition_index=t, max_row_count=PULL)
            )
            offset += len(batch)
            got += len(batch)
    return got


def source(spark, emu, path: str) -> None:
    reader = spark.readStream.format("eosink-yt-queue")
    for key, value in {
        "proxy": emu.url,
        "proxyDiscovery": "false",
        "clientConfig": json.dumps(emu.client_config()),
        "pullRows": str(PULL),
    }.items():
        reader = reader.option(key, value)
    query = (
        reader.load(path)
        .writeStream.format("noop")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="bench-ckpt-"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None, query.exception()


def main() -> None:
    import logging

    import structlog

    import eosink_yt_queue
    from eosink.testing.spark import local_spark
    from eosink_yt_emulator.server import YtEmulator

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    tablets = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    total -= total % tablets
    emu = YtEmulator().start()
    client = emu.client()
    make_queue(client, "//bench/q", total, tablets)
    make_queue(client, "//bench/warm", 1_000, tablets)
    # Spark's Python workers get this process's import path: under `./pants run` the sources
    # are on sys.path but in no installed location the workers' interpreter would search.
    path = os.pathsep.join(os.path.abspath(p) for p in sys.path if p)
    spark = local_spark(2, **{"spark.executorEnv.PYTHONPATH": path})
    eosink_yt_queue.register(spark)
    source(spark, emu, "//bench/warm")
    best = {"bare": 1e9, "source": 1e9}
    for _ in range(repeat):
        started = time.perf_counter()
        assert bare(client, "//bench/q", total, tablets) == total
        best["bare"] = min(best["bare"], time.perf_counter() - started)
        started = time.perf_counter()
        source(spark, emu, "//bench/q")
        best["source"] = min(best["source"], time.perf_counter() - started)
    spark.stop()
    emu.stop()
    print(f"{total:,} rows in {tablets} tablets, {PULL:,} rows per pull_queue, best of {repeat}:\n")
    print("| side | rows/s | time | vs bare loop |")
    print("|---|---|---|---|")
    for name, label in (("bare", "bare `pull_queue` loop"), ("source", "source into `noop`")):
        ratio = "" if name == "bare" else f"{best['bare'] / best[name]:.2f}x"
        print(f"| {label} | {total / best[name]:,.0f} | {best[name]:.1f} s | {ratio} |")


if __name__ == "__main__":
    main()
