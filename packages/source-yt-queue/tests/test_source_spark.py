"""The source on local Spark against the emulator: exact counts, the row limit, service columns,
restart from the checkpoint, trimmed rows; and end to end into yt-dynamic through foreachBatch."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import append, make_queue, source_options

import eosink
from eosink_yt_queue import SPYT_ROW_INDEX, SPYT_TABLET_INDEX, register

Q = "//q/events"


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark(2)
    register(session)
    eosink.register_data_sources(session)
    return session


def stream(spark, emulator, **options):
    reader = spark.readStream.format("eosink-yt-queue")
    for key, value in source_options(emulator, **options).items():
        reader = reader.option(key, value)
    return reader.load(Q)


def run_collecting(df, checkpoint):
    """Run the stream to the end of what is available; the rows and per-batch sizes it got.

    foreachBatch, not the memory sink: the memory sink cannot restart from a checkpoint."""
    rows, sizes = [], []

    def collect(batch, _batch_id):
        got = batch.collect()
        rows.extend(got)
        sizes.append(len(got))

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    if query.exception():
        raise query.exception()
    return rows, sizes


def test_four_tablets_counted_exactly_and_a_restart(spark, yt_emulator, tmp_path):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=4)
    for tablet in range(4):
        append(yt, Q, tablet, tablet * 1000, 25 + tablet)  # 25, 26, 27, 28 rows
    df = stream(spark, yt_emulator, includeServiceColumns="true", maxRowsPerTrigger=30)
    assert df.columns == ["id", "name", "amount", SPYT_TABLET_INDEX, SPYT_ROW_INDEX]

    rows, sizes = run_collecting(df, tmp_path / "ckpt")
    assert len(rows) == 106 and len({r.id for r in rows}) == 106
    assert {(r[SPYT_TABLET_INDEX], r[SPYT_ROW_INDEX]) for r in rows} == {
        (t, i) for t in range(4) for i in range(25 + t)
    }
    assert all(r.id == r[SPYT_TABLET_INDEX] * 1000 + r[SPYT_ROW_INDEX] for r in rows)
    # Under availableNow Spark 4.3 plans this Python source with ReadAllAvailable (one batch
    # of 106), so maxRowsPerTrigger is checked by test_offsets only, not here.
    assert sum(sizes) == 106

    # New rows, same checkpoint: only they are read.
    append(yt, Q, 2, 5000, 7)
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


def test_e2e_queue_to_yt_dynamic_through_foreach_batch(spark, yt_emulator, tmp_path):
    from eosink_yt_dynamic import create_output_table, read_table
    from pyspark.sql.functions import col

    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=4)
    for tablet in range(4):
        append(yt, Q, tablet, tablet * 1000, 40)
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
        proxy=yt_emulator.url,
        path=out,
        proxy_discovery=False,
        client_config=yt_emulator.client_config(),
    )
    df = (
        stream(spark, yt_emulator, includeServiceColumns="true", maxRowsPerTrigger=64)
        .withColumnRenamed(SPYT_TABLET_INDEX, "tablet_index")
        .withColumnRenamed(SPYT_ROW_INDEX, "row_index")
        .withColumn("amount", col("amount") * 2)
        .select("tablet_index", "row_index", "id", "name", "amount")
    )
    query = (
        df.writeStream.foreachBatch(eosink.foreach_batch(sink, writer_id="events"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    held = read_table(yt, out)
    assert len(held) == 160
    assert sorted(r["id"] for r in held) == sorted(
        t * 1000 + i for t in range(4) for i in range(40)
    )
    assert all(r["amount"] == r["id"] / 2 for r in held)
