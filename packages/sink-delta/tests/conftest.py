"""Shared fixtures of the eosink-delta tests."""

# The loopback S3 server's fixtures (s3_endpoint, s3_bucket, s3_faults): one server for the
# session.
from eosink.testing.s3 import s3_bucket, s3_endpoint, s3_faults  # noqa: F401


import pytest  # noqa: E402

#: A session as Delta's documentation sets one up: its SQL extension and catalog.
DELTA_SQL = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


@pytest.fixture(scope="session")
def delta_spark():
    """A local session with Delta's Spark connector in ``spark.jars`` (the jars of
    3rdparty/jvm/artifacts.txt's ``delta`` set, fetched on first use), for test_jvm_*.py files
    (one process each: a JVM's ``spark.jars`` are fixed when it starts)."""
    from eosink.testing.jvm import spark_jars
    from eosink.testing.spark import local_spark

    session = local_spark(**spark_jars("delta"), **DELTA_SQL)
    yield session
    session.stop()


#: The Spark line Delta's Spark connector of the ``delta`` set is built for (Delta 4.4: 4.2).
DELTA_SPARK_LINE = "4.2"


@pytest.fixture
def delta_runs(delta_spark):
    """``delta_spark``, for tests that run Delta's own code (its reads, writes, checkpoints).

    Delta's jars load on another Spark line (so the engine's detection is tested on every
    Spark), but their code is binary-compatible with the line they are built for only: on
    pyspark 4.3 Delta 4.4's own reads fail with ``NoSuchMethodError`` (``LogicalRDD.<init>``).
    Such tests run where pyspark is of that line, and are skipped, saying why, elsewhere."""
    import pyspark

    if not pyspark.__version__.startswith(DELTA_SPARK_LINE + "."):
        pytest.skip(
            f"Delta's Spark connector (3rdparty/jvm/artifacts.txt, set 'delta') is built for "
            f"Spark {DELTA_SPARK_LINE}; this environment has pyspark {pyspark.__version__}"
        )
    return delta_spark
