"""End to end on local Spark: both front doors, a query crashed mid-batch and restarted.

A file-source stream (one file per micro-batch, so a replay re-reads the same rows) goes through
a transformation that fails once inside a batch, after other tasks of that batch wrote their
Parquet files. The restarted query replays the batch; the table, read back by delta-rs, must
hold exactly the source rows, and the Delta log exactly one ``txn`` per committed batch.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from delta_helpers import log_actions, txns

import eosink
from eosink.testing.e2e import SparkEndToEnd
from eosink.testing.replay import (
    FILES,
    ROWS_PER_FILE,
    crash_once,
    grouped_counts,
    json_stream,
    run_twice,
    write_json_source,
)
from eosink.testing.replay import assert_exactly as assert_exactly_once


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


SCHEMA = "id long, name string, ts timestamp"


def timestamped(n, i):
    return {"id": n * 1000 + i, "name": f"r{n}-{i}", "ts": f"2024-0{n + 1}-01T10:00:0{i % 10}Z"}


def write_source(folder):
    return write_json_source(folder, row=timestamped)


def stream(spark, source, marker):
    return json_stream(spark, source, crash_once(marker), schema=SCHEMA)


class TestDeltaEndToEnd(SparkEndToEnd):
    """The shared scenarios on Delta, with a timestamp column, read back by delta-rs; every
    committed batch must leave exactly one ``txn`` in the log."""

    sink_name = "delta"
    schema = SCHEMA

    def row(self, n, i):
        return timestamped(n, i)

    def target(self, tmp_path):
        return str(tmp_path / "table")

    def data_source_options(self):
        return {"partitionBy": "name"}

    def read_ids(self, target):
        return DeltaTable(target).to_pyarrow_table().column("id").to_pylist()

    def assert_batches_recorded(self, target, writer_id, batches):
        assert txns(target) == [(writer_id, b) for b in batches]
        for _version, action in log_actions(target):
            if "commitInfo" in action and "eosink.proof" in action["commitInfo"]:
                proof = json.loads(action["commitInfo"]["eosink.proof"])
                assert proof["query_id"], "the proof records the query id"

    @pytest.fixture
    def session_settings(self, spark):
        """Spark's session zone as many clusters have it: 'Etc/UTC' (delta-rs wants 'UTC')."""
        spark.conf.set("spark.sql.session.timeZone", "Etc/UTC")
        yield
        spark.conf.set("spark.sql.session.timeZone", "UTC")

    def check_foreach_batch(self, target):
        ts = DeltaTable(target).to_pyarrow_table().sort_by("id").column("ts")
        assert ts.type == pa.timestamp("us", tz="UTC")
        assert str(ts[0].as_py()) == "2024-01-01 10:00:00+00:00"

    def check_data_source(self, target):
        assert DeltaTable(target).metadata().partition_columns == ["name"]

    def check_batch_versions(self, target):
        assert txns(target) == [("dailyETL", 23424), ("anotherETL", 23424)]


def test_complete_mode_through_the_data_source(spark, tmp_path):
    write_source(str(tmp_path / "in"))
    target = str(tmp_path / "table")
    eosink.register_data_sources(spark)
    counts = grouped_counts(spark, tmp_path / "in", schema=SCHEMA, key="bucket")
    (
        counts.writeStream.format("eosink-delta")
        .outputMode("complete")
        .option("writerId", "counts")
        .option("path", target)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    got = {r["bucket"]: r["count"] for r in DeltaTable(target).to_pyarrow_table().to_pylist()}
    assert sum(got.values()) == FILES * ROWS_PER_FILE and len(got) == 3
    assert txns(target) == [("counts", b) for b in range(FILES)]


def test_schema_mismatch_through_spark_fails_clearly(spark, tmp_path):
    target = str(tmp_path / "table")
    delta = eosink.sink("delta", path=target)
    df = spark.createDataFrame([(1, "a")], "id long, name string")
    eosink.write_batch(df, delta, writer_id="job", version=1)
    bad = spark.createDataFrame([("x", "a")], "id string, name string")
    with pytest.raises(eosink.ConfigurationError, match="cast it in the query"):
        eosink.write_batch(bad, delta, writer_id="job", version=2)
    assert DeltaTable(target).version() == 1


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_crashed_mid_batch_and_restarted_on_s3(spark, tmp_path, s3_bucket, door):
    """The same on S3 (the loopback server), storage options given as a dict and as Spark's
    ``storage.<key>`` options; read back, txn and proofs included, by delta-rs over S3."""
    expected = write_source(str(tmp_path / "in"))
    marker = tmp_path / "armed"
    marker.touch()
    target, storage = s3_bucket.uri("table"), s3_bucket.endpoint.object_store_options()
    writer = eosink.foreach_batch(
        eosink.sink("delta", path=target, storage_options=storage), writer_id="orders"
    )
    eosink.register_data_sources(spark)

    def start():
        query = stream(spark, str(tmp_path / "in"), str(marker)).writeStream
        if door == "foreach_batch":
            query = query.foreachBatch(writer)
        else:
            query = query.format("eosink-delta").option("writerId", "orders")
            query = query.option("path", target).options(
                **{f"storage.{k}": v for k, v in storage.items()}
            )
        query = query.option("checkpointLocation", str(tmp_path / "ckpt"))
        return query.trigger(availableNow=True).start()

    run_twice(start)
    table = DeltaTable(target, storage_options=storage)
    assert_exactly_once(table.to_pyarrow_table().column("id").to_pylist(), expected)
    assert table.transaction_version("orders") == FILES - 1
    proofs = [json.loads(c["eosink.proof"]) for c in table.history() if "eosink.proof" in c]
    assert sorted(p["batch_id"] for p in proofs) == list(range(FILES))
    assert all(u.startswith(f"s3://{s3_bucket.name}/table/") for u in table.file_uris())
