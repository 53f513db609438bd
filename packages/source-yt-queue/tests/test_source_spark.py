"""The source on local Spark against the emulator: exact counts, the row limit under
availableNow, service columns, restart from the checkpoint, trimmed rows, two queues with a queue
id, the consumer, and bad input. The killed end-to-end runs are in test_e2e_killed_spark.py."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from conftest import append, make_queue, source_options

import eosink
from eosink_yt_emulator.kit import sink_options
from eosink_yt_emulator.queue_tables import consumer_offsets, create_consumer
from eosink_yt_queue import SPYT_ROW_INDEX, SPYT_TABLET_INDEX, register

Q = "//q/events"


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark(2)
    register(session)
    eosink.register_data_sources(session)
    return session


def stream_of(spark, emulator, path, **options):
    reader = spark.readStream.format("eosink-yt-queue")
    for key, value in source_options(emulator, **options).items():
        reader = reader.option(key, value)
    return reader.load(path)


def stream(spark, emulator, **options):
    return stream_of(spark, emulator, Q, **options)


# Spark waits a fixed 10 s for the Python worker that plans a Python data source's batches; on a
# loaded machine it may not start in time. That is the machine, not the source: the query is
# started again from its checkpoint, as a job's supervisor would.
WORKER_TIMEOUT = "Python worker failed to connect back"


def run_collecting(df, checkpoint, on_batch=None, starts=3):
    """Run the stream to the end of what is available; the rows and per-batch sizes it got.
    ``on_batch(batch_id, rows)`` runs inside every batch, before it is committed.

    foreachBatch, not the memory sink: the memory sink cannot restart from a checkpoint. Rows are
    kept by batch id, so a batch Spark runs again after a restart replaces its first run."""
    batches = {}

    def collect(batch, batch_id):
        got = batch.collect()
        if on_batch is not None:
            on_batch(batch_id, got)
        batches[batch_id] = got

    for start in range(starts):
        query = (
            df.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(180)
            error = query.exception()
        except StreamingQueryException as failed:
            error = failed
        if error is None:
            break
        if WORKER_TIMEOUT not in str(error) or start == starts - 1:
            raise error
    got = [batches[batch_id] for batch_id in sorted(batches)]
    return [row for rows in got for row in rows], [len(rows) for rows in got]


def test_row_limit_holds_under_available_now_and_a_restart(spark, yt_emulator, tmp_path):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=4)
    for tablet in range(4):
        append(yt, Q, tablet, tablet * 1000, 25 + tablet)  # 25, 26, 27, 28 rows
    df = stream(spark, yt_emulator, includeServiceColumns="true", maxRowsPerTrigger=30)
    assert df.columns == ["id", "name", "amount", SPYT_TABLET_INDEX, SPYT_ROW_INDEX]

    def append_once(batch_id, _rows):
        if batch_id == 0:  # appended after the run started: the next run reads them
            append(yt, Q, 2, 5000, 7)

    rows, sizes = run_collecting(df, tmp_path / "ckpt", on_batch=append_once)
    assert len(rows) == 106 and len({r.id for r in rows}) == 106
    assert {(r[SPYT_TABLET_INDEX], r[SPYT_ROW_INDEX]) for r in rows} == {
        (t, i) for t in range(4) for i in range(25 + t)
    }
    assert all(r.id == r[SPYT_TABLET_INDEX] * 1000 + r[SPYT_ROW_INDEX] for r in rows)
    assert max(sizes) <= 30 and len(sizes) >= 4  # maxRowsPerTrigger under availableNow

    rows, _ = run_collecting(df, tmp_path / "ckpt")
    assert sorted(r.id for r in rows) == list(range(5000, 5007))
    assert {r[SPYT_ROW_INDEX] for r in rows} == set(range(27, 34))


def test_starting_offsets_latest_and_trimmed_rows_fail(spark, yt_emulator, tmp_path):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 10)
    df = stream(spark, yt_emulator, startingOffsets="latest")
    assert run_collecting(df, tmp_path / "ckpt")[0] == []
    append(yt, Q, 1, 100, 3)
    rows, _ = run_collecting(df, tmp_path / "ckpt")
    assert sorted(r.id for r in rows) == [100, 101, 102]

    # Rows the query has not read are trimmed: the query fails, naming what was lost.
    append(yt, Q, 0, 10, 5)  # rows 10..14 of tablet 0
    yt.trim_rows(Q, 0, 12)
    with pytest.raises(Exception, match="trimmed"):
        run_collecting(df, tmp_path / "ckpt")


def test_bad_paths_are_clear_errors(spark, yt_emulator):
    yt = yt_emulator.client()
    yt.create(
        "table",
        "//q/static",
        recursive=True,
        attributes={"schema": [{"name": "a", "type": "int64"}]},
    )
    reader = spark.readStream.format("eosink-yt-queue")
    for key, value in source_options(yt_emulator).items():
        reader = reader.option(key, value)
    with pytest.raises(Exception, match="not a dynamic table"):
        reader.load("//q/static")
    yt.create(
        "table",
        "//q/unmounted",
        attributes={"dynamic": True, "schema": [{"name": "a", "type": "int64"}]},
    )
    with pytest.raises(Exception, match="not mounted"):
        reader.load("//q/unmounted")
    with pytest.raises(Exception, match="does not exist"):
        reader.load("//q/missing")


def test_two_queues_with_a_queue_id_and_a_consumer(spark, yt_emulator, tmp_path):
    """Rows of two queues tagged with their queue; the consumer is registered when the query
    starts and never ahead of a batch that is not committed yet."""
    yt = yt_emulator.client()
    queues = [Q, "//q/other"]
    for n, queue in enumerate(queues):
        make_queue(yt, queue, tablets=2)
        for tablet in range(2):
            append(yt, queue, tablet, n * 100_000 + tablet * 1000, 12)
    consumer = "//q/consumer"
    create_consumer(yt, consumer)
    df = stream_of(
        spark,
        yt_emulator,
        ",".join(queues),
        includeServiceColumns="true",
        queueIdColumn="queue_id",
        maxRowsPerTrigger=20,
        consumerPath=consumer,
        consumerVital="true",
    )
    assert df.columns[-3:] == ["queue_id", SPYT_TABLET_INDEX, SPYT_ROW_INDEX]

    def consumer_behind(_batch_id, rows):
        # While a batch runs, the consumer has not moved past any row of it.
        held = consumer_offsets(yt, consumer)
        for r in rows:
            assert held.get((r.queue_id, r[SPYT_TABLET_INDEX]), 0) <= r[SPYT_ROW_INDEX]

    rows, sizes = run_collecting(df, tmp_path / "ckpt", on_batch=consumer_behind)
    assert max(sizes) <= 20
    keys = [(r.queue_id, r[SPYT_TABLET_INDEX], r[SPYT_ROW_INDEX]) for r in rows]
    assert sorted(keys) == [(q, t, i) for q in sorted(queues) for t in range(2) for i in range(12)]
    registered = yt.list_queue_consumer_registrations(consumer_path=consumer)
    assert sorted(str(r["queue_path"]) for r in registered) == sorted(queues)
    assert all(bool(r["vital"]) for r in registered)
    # Spark commits a batch to the source when it plans the next one: the consumer trails the
    # last batch until new rows arrive, then catches up with it.
    assert all(0 < n <= 12 for n in consumer_offsets(yt, consumer).values())
    for queue in queues:
        for tablet in range(2):
            append(yt, queue, tablet, 900_000 + tablet, 1)
    rows, _ = run_collecting(df, tmp_path / "ckpt", on_batch=consumer_behind)
    assert len(rows) == 4
    assert consumer_offsets(yt, consumer) == {(q, t): 12 for q in queues for t in range(2)}


def test_bad_consumers_and_options_are_clear_errors(spark, yt_emulator):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=1)
    make_queue(yt, "//q/other", tablets=1)
    with pytest.raises(Exception, match="consumer //q/missing does not exist.*treat_as_queue"):
        stream(spark, yt_emulator, consumerPath="//q/missing")
    with pytest.raises(Exception, match="//q/other is not a queue consumer"):
        stream(spark, yt_emulator, consumerPath="//q/other")
    with pytest.raises(Exception, match="Set queueIdColumn"):
        stream_of(spark, yt_emulator, f"{Q},//q/other", includeServiceColumns="true")
    assert yt.list_queue_consumer_registrations() == []


def test_without_service_columns_yt_dynamic_refuses_the_batch(spark, yt_emulator, tmp_path):
    """includeServiceColumns off, written to yt-dynamic keyed by the service columns: the sink
    (which sees the rows that reach it, whatever their source) refuses before writing."""
    from eosink_yt_dynamic import create_output_table

    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 5)
    out = "//out/events"
    create_output_table(
        yt,
        out,
        pa.schema(
            [
                ("tablet_index", pa.int64()),
                ("row_index", pa.int64()),
                ("id", pa.int64()),
                ("name", pa.string()),
                ("amount", pa.float64()),
            ]
        ),
    )
    sink = eosink.sink(
        "yt-dynamic",
        path=out,
        **sink_options(yt_emulator),
    )
    query = (
        stream(spark, yt_emulator)
        .writeStream.foreachBatch(eosink.foreach_batch(sink, writer_id="events"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="include_service_columns"):
        query.awaitTermination(180)
    assert list(yt.select_rows(f"* from [{out}]")) == []


def test_reshard_and_recreation_under_a_checkpointed_query(spark, yt_emulator, tmp_path):
    """Through Spark's offset log: tablets a reshard added are read from row 0 by the next run;
    the queue created again under the path fails the restarted query with the fix."""
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 6)
    df = stream(spark, yt_emulator)
    assert sorted(r.id for r in run_collecting(df, tmp_path / "ckpt")[0]) == list(range(6))

    yt.unmount_table(Q, sync=True)
    yt.reshard_table(Q, tablet_count=3, sync=True)
    yt.mount_table(Q, sync=True)
    append(yt, Q, 2, 200, 4)
    rows, _ = run_collecting(df, tmp_path / "ckpt")
    assert sorted(r.id for r in rows) == [200, 201, 202, 203]

    yt.unmount_table(Q, sync=True)
    yt.remove(Q)
    make_queue(yt, Q, tablets=3)
    append(yt, Q, 0, 1000, 10)  # more rows than tablet 0's offset: only the id tells
    with pytest.raises(Exception, match="id changed.*new checkpoint"):
        run_collecting(df, tmp_path / "ckpt")
