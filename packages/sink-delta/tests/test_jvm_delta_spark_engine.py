"""The delta-spark engine on a real Spark: runs only where Delta's Spark jars are present.

They cannot be had on the machines this project is built on (``spark.jars.packages`` needs a
Maven repository), so the tests that need them skip with that reason; the engine's shared parts
are tested without Spark in ``test_engines.py``.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from eosink_delta import delta_spark as engines
from delta_helpers import txns


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


@pytest.fixture
def needs_delta_jars(spark):
    if not engines.delta_jars_present(spark):
        pytest.skip(f"delta-spark engine: {engines.NO_JARS}")


def test_auto_engine_without_jars_writes_with_delta_rs(spark, tmp_path):
    if engines.delta_jars_present(spark):
        pytest.skip("Delta's jars are present: auto picks delta-spark here")
    target = str(tmp_path / "table")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    assert engines.write_batch(df, target, writer_id="job", version=7).status == "committed"
    assert engines.write_batch(df, target, writer_id="job", version=7).status == "skipped"
    assert txns(target) == [("job", 7)]
    with pytest.raises(Exception, match="jars are not on this Spark's classpath"):
        engines.write_batch(df, target, writer_id="job", version=8, engine="delta-spark")


def test_seed_002_with_delta_spark(spark, tmp_path, needs_delta_jars):
    target = str(tmp_path / "table")
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string")
    statuses = [
        engines.write_batch(df, target, writer_id=w, version=v, engine="delta-spark").status
        for w, v in (("dailyETL", 23424), ("dailyETL", 23422), ("anotherETL", 23424))
    ]
    assert statuses == ["committed", "skipped", "committed"]
    ids = DeltaTable(target).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == [1, 1, 2, 2, 3, 3]


def test_stream_with_delta_spark_records_the_proof(spark, tmp_path, needs_delta_jars):
    target = str(tmp_path / "table")
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    writer = engines.foreach_batch(target, writer_id="orders", engine="delta-spark")
    (
        spark.readStream.schema("id long")
        .json(str(source))
        .writeStream.foreachBatch(writer)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    assert writer.engine == "delta-spark"
    assert txns(target) == [("orders", 0)]
    proof = engines.DeltaSink(path=target).is_committed(
        ctx=engines.BatchContext(sink="delta", writer_id="orders", batch_id=0)
    )
    assert proof is not None and proof.query_id
