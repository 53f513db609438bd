"""The killed end-to-end tests (test_e2e_killed_*_spark.py): end to end with a real kill:
queues being appended to, read by the source, a select and a
withColumn, written by yt-dynamic through both front doors; the driver process gets SIGKILL in
the middle of a batch and is started again from the same checkpoint. The output, read back with
the YT client, holds exactly one row per queue row, with the values of that row.

Two tests, one file each (each file gets its own test timeout), keep the cost small: the
foreachBatch door with one 4-tablet queue, and the data source door with two 4-tablet queues and
a queue id.
"""

from __future__ import annotations

import json
import threading

import attrs
import pyarrow as pa
import queue_stream  # the query's source, run in the query's own process
from conftest import make_queue

from eosink.testing.killed_query import QueryJob, QueryProcesses

TABLETS, PRELOADED = 4, 40
#: The task holding this row of tablet 0 of the first queue stalls.
STALL_ROW = 20


def add_rows(yt, queues, first, count):
    """``count`` rows on every tablet of every queue; ids unique across queues."""
    for n, queue in enumerate(queues):
        yt.insert_rows(
            queue,
            [
                {
                    "$tablet_index": t,
                    "id": n * 10**7 + t * 10**6 + i,
                    "name": "x",
                    "amount": float(i),
                }
                for t in range(TABLETS)
                for i in range(first, first + count)
            ],
        )


class Producer(threading.Thread):
    """Appends to every tablet while the query runs, until stopped."""

    def __init__(self, yt, queues):
        super().__init__(daemon=True)
        self.yt, self.queues, self.next = yt, queues, PRELOADED
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(0.3):
            add_rows(self.yt, self.queues, self.next, 2)
            self.next += 2

    def stop(self):
        self.stopped.set()
        self.join()


def killed_mid_batch_and_restarted(yt_emulator, tmp_path, door, queues):
    from eosink_yt_dynamic import create_output_table

    yt = yt_emulator.client()
    for queue in queues:
        make_queue(yt, queue, tablets=TABLETS)
    add_rows(yt, queues, 0, PRELOADED)
    out = "//out/events"
    columns = [("id", pa.int64()), ("amount", pa.float64())]
    if len(queues) > 1:
        columns.append(("queue_id", pa.string()))
    columns += [("tablet_index", pa.int64()), ("row_index", pa.int64())]
    create_output_table(yt, out, pa.schema(columns), queue_id=len(queues) > 1)
    connection = {"proxy": yt_emulator.url, "path": out, "proxy_discovery": False}
    job = QueryJob(
        sink="yt-dynamic",
        door=door,
        writer_id="events",
        sink_options={**connection, "client_config": yt_emulator.client_config()},
        source_options={
            **{k: str(v).lower() if v is False else v for k, v in connection.items()},
            "clientConfig": json.dumps(yt_emulator.client_config()),
        },
        stall={"tablet_index": 0, "row_index": STALL_ROW, "queue_id": queues[0]},
        stream=f"{queue_stream.__name__}:stream",
        params={
            "url": yt_emulator.url,
            "client_config": yt_emulator.client_config(),
            "queues": queues,
            "max_rows": 16 * TABLETS,
        },
    )

    producer = Producer(yt, queues)
    producer.start()
    with QueryProcesses(tmp_path) as queries:
        try:
            queries.kill_mid_batch(job)
        finally:
            producer.stop()
        written_before_restart = len(list(yt.select_rows(f"id from [{out}]")))
        assert written_before_restart > 0
        # The restart replays the killed batch from the offset log, then reads the rest in one
        # batch (a new maxRowsPerTrigger applies to new batches only).
        queries.restart(
            attrs.evolve(job, params={**job.params, "max_rows": 10**6}), timeout_s=600
        )

    expected = sorted(
        (queue, r["$tablet_index"], r["$row_index"], r["id"])
        for queue in queues
        for r in yt.select_rows(f"[$tablet_index], [$row_index], id from [{queue}]")
    )
    assert len(expected) > TABLETS * PRELOADED * len(queues)  # the producer's rows too
    held = list(yt.select_rows(f"* from [{out}]"))
    got = sorted(
        (r.get("queue_id", queues[0]), r["tablet_index"], r["row_index"], r["id"]) for r in held
    )
    assert got == expected  # exactly one row per queue row, no loss, no duplicate
    assert all(r["amount"] == 2 * (r["id"] % 10**6) for r in held)
