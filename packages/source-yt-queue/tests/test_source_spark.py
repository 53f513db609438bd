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


def run_into_memory(df, name, checkpoint):
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    if query.exception():
        raise query.exception()
    return query


def test_four_tablets_counted_exactly_with_a_row_limit_and_a_restart(spark, yt_emulator, tmp_path):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=4)
    for tablet in range(4):
        append(yt, Q, tablet, tablet * 1000, 25 + tablet)  # 25, 26, 27, 28 rows
    df = stream(spark, yt_emulator, includeServiceColumns="true", maxRowsPerTrigger=30)
    assert df.columns == ["id", "name", "amount", SPYT_TABLET_INDEX, SPYT_ROW_INDEX]

    query = run_into_memory(df, "q1", tmp_path / "ckpt")
    rows = spark.sql("select * from q1").collect()
    assert len(rows) == 106 and len({r.id for r in rows}) == 106
    assert {(r[SPYT_TABLET_INDEX], r[SPYT_ROW_INDEX]) for r in rows} == {
        (t, i) for t in range(4) for i in range(25 + t)
    }
    assert all(r.id == r[SPYT_TABLET_INDEX] * 1000 + r[SPYT_ROW_INDEX] for r in rows)
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(batches) <= 30 and sum(batches) == 106

    # New rows, same checkpoint: only they are read.
    append(yt, Q, 2, 5000, 7)
    run_into_memory(df, "q2", tmp_path / "ckpt")
    rows = spark.sql("select * from q2").collect()
    assert sorted(r.id for r in rows) == list(range(5000, 5007))
    assert {r[SPYT_ROW_INDEX] for r in rows} == set(range(27, 34))


def test_starting_offsets_latest_and_trimmed_rows_fail(spark, yt_emulator, tmp_path):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 10)
    df = stream(spark, yt_emulator, startingOffsets="latest")
    run_into_memory(df, "latest0", tmp_path / "ckpt")
    assert spark.sql("select * from latest0").count() == 0
    append(yt, Q, 1, 100, 3)
    run_into_memory(df, "latest1", tmp_path / "ckpt")
    assert sorted(r.id for r in spark.sql("select * from latest1").collect()) == [100, 101, 102]

    # Rows the query has not read are trimmed: the query fails, naming what was lost.
    append(yt, Q, 0, 10, 5)  # rows 10..14 of tablet 0
    yt.trim_rows(Q, 0, 12)
    with pytest.raises(Exception, match="trimmed"):
        run_into_memory(df, "latest2", tmp_path / "ckpt")


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
