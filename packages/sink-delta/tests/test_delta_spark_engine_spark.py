"""The engine choice on a Spark without Delta's jars (the project's default session): ``auto``
writes with delta-rs, ``delta-spark`` refuses clearly. The delta-spark engine itself runs
with Delta's jars in test_jvm_delta_spark_engine.py."""

from __future__ import annotations

import pytest
from eosink_delta import delta_spark as engines
from delta_helpers import txns


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()


def test_auto_engine_without_jars_writes_with_delta_rs(spark, tmp_path):
    assert not engines.delta_jars_present(spark)
    target = str(tmp_path / "table")
    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    assert engines.write_batch(df, target, writer_id="job", version=7).status == "committed"
    assert engines.write_batch(df, target, writer_id="job", version=7).status == "skipped"
    assert txns(target) == [("job", 7)]
    with pytest.raises(Exception, match="jars are not on this Spark's classpath"):
        engines.write_batch(df, target, writer_id="job", version=8, engine="delta-spark")
