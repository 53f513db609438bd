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
