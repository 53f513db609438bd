"""End to end on local Spark: both front doors, a query killed mid-batch and restarted.

A file-source stream (one file per micro-batch, so a replay re-reads the same rows) goes
through a transformation that crashes once inside a batch while other tasks of that batch
already wrote. The restarted query replays the batch; the sqlite example's table must then hold
exactly the source rows.
"""

from __future__ import annotations

import json

import pytest
from eosink_sqlite.sink import read_rows
from pyspark.errors import StreamingQueryException

import eosink
from eosink.testing.e2e import SparkEndToEnd
from eosink.testing.replay import grouped_counts, write_json_source

ROWS_PER_FILE = 200  # FILES files; the crash (CRASH_ID) hits the third micro-batch


def write_source(folder):
    return write_json_source(folder, rows_per_file=ROWS_PER_FILE)


class TestSqliteEndToEnd(SparkEndToEnd):
    """The shared scenarios on the sqlite example, read back with the ``sqlite3`` module."""

    sink_name = "sqlite"
    rows_per_file = ROWS_PER_FILE

    def target(self, tmp_path):
        return str(tmp_path / "out.db")

    def read_ids(self, target):
        return [r["id"] for r in read_rows(target)]

    def assert_batches_recorded(self, target, writer_id, batches):
        proofs = read_rows(target, "_eosink_commits")
        assert sorted(p["batch_id"] for p in proofs if p["writer_id"] == writer_id) == batches


def test_data_source_without_writer_id_fails_clearly(spark, tmp_path):
    write_source(str(tmp_path / "in"))
    eosink.register_data_sources(spark)
    query = (
        spark.readStream.schema("id long, name string")
        .json(str(tmp_path / "in"))
        .writeStream.format("eosink-sqlite")
        .option("path", str(tmp_path / "out.db"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException, match="no writer id given"):
        query.awaitTermination()
    assert read_rows(str(tmp_path / "out.db")) == []


def test_new_checkpoint_on_old_output_fails_clearly(spark, tmp_path):
    write_source(str(tmp_path / "in"))
    target = str(tmp_path / "out.db")
    writer = eosink.foreach_batch(eosink.sink("sqlite", path=target), writer_id="orders")

    def start(checkpoint):
        return (
            spark.readStream.schema("id long, name string")
            .json(str(tmp_path / "in"))
            .writeStream.foreachBatch(writer)
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    start("ckpt-1").awaitTermination()
    with pytest.raises(StreamingQueryException, match="new writer id") as error:
        start("ckpt-2").awaitTermination()
    # both checkpoints named: the proof records the query's checkpoint root
    assert "ckpt-1" in str(error.value) and "ckpt-2" in str(error.value)


@pytest.mark.parametrize("front_door", ["data_source", "foreach_batch"])
def test_replay_with_other_data_is_detected_through_both_front_doors(spark, tmp_path, front_door):
    """fingerprint=error: Spark replays batch 0 (its commit log entry is gone) over a source
    file that changed meanwhile; both front doors must refuse the replay, not skip it."""
    source = tmp_path / "in"
    source.mkdir()
    rows = [json.dumps({"id": i, "name": "x"}) for i in range(5)]
    (source / "a.json").write_text("\n".join(rows) + "\n")
    target = str(tmp_path / "out.db")
    checkpoint = tmp_path / "ckpt"
    eosink.register_data_sources(spark)
    writer = eosink.foreach_batch(
        eosink.sink("sqlite", path=target), writer_id="orders", fingerprint="error"
    )

    def start():
        stream = spark.readStream.schema("id long, name string").json(str(source)).writeStream
        if front_door == "data_source":
            stream = (
                stream.format("eosink-sqlite")
                .option("writerId", "orders")
                .option("path", target)
                .option("fingerprint", "error")
            )
        else:
            stream = stream.foreachBatch(writer)
        return (
            stream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
        )

    start().awaitTermination()
    for name in ("0", ".0.crc"):  # as if the driver died before Spark recorded batch 0
        (checkpoint / "commits" / name).unlink()
    (source / "a.json").write_text(json.dumps({"id": 99, "name": "changed"}) + "\n")
    with pytest.raises(StreamingQueryException, match="replayed batch differs"):
        start().awaitTermination()
    assert sorted(r["id"] for r in read_rows(target)) == list(range(5))


@pytest.mark.parametrize("output_mode", ["complete", "update"])
def test_foreach_batch_refuses_an_output_mode_it_would_duplicate(spark, tmp_path, output_mode):
    """An aggregation in complete (or update) mode hands every batch the result table (or its
    changed rows): appending them, the default, would duplicate rows batch after batch."""
    write_source(str(tmp_path / "in"))
    target = str(tmp_path / "out.db")
    counts = grouped_counts(spark, tmp_path / "in")

    def start(writer, checkpoint):
        return (
            counts.writeStream.outputMode(output_mode)
            .foreachBatch(writer)
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    appending = eosink.foreach_batch(eosink.sink("sqlite", path=target), writer_id="counts")
    with pytest.raises(StreamingQueryException, match=f"outputMode\\('{output_mode}'\\)"):
        start(appending, "ckpt-1").awaitTermination()
    assert read_rows(target) == []
    if output_mode == "complete":  # the fix the error names
        replacing = eosink.foreach_batch(
            eosink.sink("sqlite", path=target), writer_id="counts", mode="complete"
        )
        start(replacing, "ckpt-2").awaitTermination()
        held = sorted((r["k"], r["count"]) for r in read_rows(target))
        assert held == [(0, 267), (1, 267), (2, 266)]


def test_the_data_source_door_takes_no_update_mode(spark, tmp_path):
    """Spark's Python data sources write append and complete only (``PythonWriteBuilder``
    has no update-as-append): Spark refuses an update-mode query before eosink's writer is
    asked, so eosink cannot name its fix there; the README does (foreachBatch with a keyed
    sink). If Spark starts taking update mode here, this fails: then eosink must refuse it for
    sinks without a key itself."""
    write_source(str(tmp_path / "in"))
    eosink.register_data_sources(spark)
    query = (
        grouped_counts(spark, tmp_path / "in")
        .writeStream.format("eosink-sqlite")
        .option("writerId", "counts")
        .option("path", str(tmp_path / "out.db"))
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException, match="does not support Update mode"):
        query.awaitTermination()
    assert not (tmp_path / "out.db").exists() or read_rows(str(tmp_path / "out.db")) == []


def test_data_sources_carry_the_sessions_object_store_settings(spark):
    """``register`` reads the session's Hadoop settings (where a job may set ``fs.s3a.*`` at
    run time) into the data source it registers: the workers that read the checkpoint have no
    session to ask."""
    from eosink.spark.datasource import registered_data_source

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {
        "fs.s3a.endpoint": "http://127.0.0.1:9",
        "fs.azure.account.key.acct.dfs.core.windows.net": "a2V5",
    }
    for key, value in settings.items():
        hadoop.set(key, value)
    try:
        carried = registered_data_source("sqlite", spark).store_settings
    finally:
        for key in settings:
            hadoop.unset(key)
    assert {k: carried.get(f"spark.hadoop.{k}") for k in settings} == settings
    assert not any(k.startswith("spark.hadoop.fs.file.") for k in carried)
