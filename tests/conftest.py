"""Shared fixtures of the cross-package tests."""

import pytest

# The standalone cluster and the executor/CLI environments of test_cluster_*.py: defined once
# here, so that one cluster serves the whole test process.
from cluster_helpers import bare_python, wheel_env  # noqa: F401
from eosink.testing.cluster import spark_cluster  # noqa: F401

# The loopback Kafka broker of the Kafka tests (test_jvm_kafka_*.py): one for the session.
from kafka_broker import kafka_broker  # noqa: F401


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()
