"""The delta-spark engine on a real Spark with Delta's Spark connector in ``spark.jars`` (the
``delta`` set of 3rdparty/jvm/artifacts.txt, fetched by build-support/jvm-jars), as the
project's notes tell users to hand it."""

from __future__ import annotations

from deltalake import DeltaTable
from eosink_delta import delta_spark as engines
from delta_helpers import txns


def test_jars_in_spark_jars_are_detected(delta_spark):
    """Delta's classes are on Spark's own class loader, not on the JVM's launch classpath:
    the engine must look where Spark looks (where it finds ``format("delta")``)."""
    jvm = delta_spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(engines.DELTA_CLASS)
    except Exception:  # noqa: BLE001 - the launch classpath lacks them: the case of the defect
        pass
    else:
        raise AssertionError("Delta's classes are on the launch classpath: the test shows nothing")
    assert engines.delta_jars_present(delta_spark)
    assert engines.choose_engine(delta_spark, "auto") == "delta-spark"
    assert engines.choose_engine(delta_spark, "delta-spark") == "delta-spark"


def test_auto_engine_with_jars_writes_with_delta_spark(delta_runs, tmp_path):
    target = str(tmp_path / "table")
    df = delta_runs.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    assert engines.write_batch(df, target, writer_id="job", version=7).status == "committed"
    assert engines.write_batch(df, target, writer_id="job", version=7).status == "skipped"
    assert txns(target) == [("job", 7)]
    history = delta_runs.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()
    assert [h["operation"] for h in history] == ["WRITE"]
    assert "eosink.proof" in history[0]["userMetadata"]


def test_seed_002_with_delta_spark(delta_runs, tmp_path):
    target = str(tmp_path / "table")
    df = delta_runs.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, name string")
    statuses = [
        engines.write_batch(df, target, writer_id=w, version=v, engine="delta-spark").status
        for w, v in (("dailyETL", 23424), ("dailyETL", 23422), ("anotherETL", 23424))
    ]
    assert statuses == ["committed", "skipped", "committed"]
    ids = DeltaTable(target).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == [1, 1, 2, 2, 3, 3]


def test_stream_with_delta_spark_records_the_proof(delta_runs, tmp_path):
    target = str(tmp_path / "table")
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    writer = engines.foreach_batch(target, writer_id="orders", engine="delta-spark")
    (
        delta_runs.readStream.schema("id long")
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
