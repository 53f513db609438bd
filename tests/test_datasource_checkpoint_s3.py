"""The data source door with its checkpoint on an object store, planned batch after batch.

No JVM here (Spark's own writer cannot reach S3 without the hadoop-aws jars); the data source
is shipped the way Spark ships it: registered from a session (its ``spark.hadoop.fs.s3a.*``
settings, nothing in the environment), pickled with Spark's serializer to the worker that
plans a batch, and that worker reused for the next batch, whose offset another client wrote.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql.types import LongType, StructField, StructType

from eosink.spark.datasource import registered_data_source
from eosink.testing.s3 import S3Bucket, forget_default_credentials

pytest_plugins = ["eosink.testing.s3"]

SCHEMA = StructType([StructField("id", LongType())])
SPARK_PICKLE = CloudPickleSerializer()


class SessionWithS3Settings:
    """What ``register`` reads of a session: ``spark.conf.getAll`` (a property, as in Spark 4)."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.conf = type("Conf", (), {"getAll": property(lambda _: dict(settings))})()


@pytest.fixture
def no_default_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No AWS settings from the environment or ~/.aws: only what eosink passes counts."""
    forget_default_credentials(monkeypatch, tmp_path)


def test_each_batch_is_planned_from_the_store_with_sparks_settings(
    s3_bucket: S3Bucket, no_default_credentials: None, tmp_path: Any
) -> None:
    endpoint = s3_bucket.endpoint
    spark = SessionWithS3Settings(
        {
            "spark.app.name": "orders",
            "spark.hadoop.fs.s3a.endpoint": endpoint.url,
            "spark.hadoop.fs.s3a.access.key": endpoint.access_key,
            "spark.hadoop.fs.s3a.secret.key": endpoint.secret_key,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.azure.account.key.other.dfs.core.windows.net": "b3RoZXI=",
        }
    )
    shipped = SPARK_PICKLE.loads(SPARK_PICKLE.dumps(registered_data_source("sqlite", spark)))
    checkpoint = s3_bucket.uri("ckpt", scheme="s3a")
    source = shipped(
        {"writerId": "w", "path": str(tmp_path / "out.db"), "checkpointLocation": checkpoint}
    )
    client = endpoint.client()
    for batch_id in range(3):  # Spark's driver writes the offset, then plans the batch
        client.put_object(Bucket=s3_bucket.name, Key=f"ckpt/offsets/{batch_id}", Body=b"v1\n")
        planning = SPARK_PICKLE.loads(SPARK_PICKLE.dumps(source))
        writer = planning.streamWriter(SCHEMA, False)
        assert writer.context().batch_id == batch_id
    # the writer (shipped to every executor) holds the checkpoint store's settings alone
    assert "b3RoZXI=" not in repr(vars(writer))
