"""A streaming checkpoint on an object store is read from the store, with Spark's credentials.

The data source learns the batch id from ``<checkpoint>/offsets``. Spark reuses its Python
workers across batches and fsspec keeps one filesystem (and its listings cache) per process: a
listing cached at batch N-1 must not plan batch N. The offsets here are written by another
client (boto3, as Spark's driver is another process) between two reads, on the loopback S3
server. Spark reaches the checkpoint with its Hadoop settings (``spark.hadoop.fs.s3a.*``): eosink
must read it with those, or say which one to set.
"""

from __future__ import annotations

import pytest

from eosink.errors import ConfigurationError
from eosink.spark.checkpoint import hadoop_storage_options, stream_position
from eosink.testing.s3 import S3Bucket, S3Endpoint, forget_default_credentials, s3_server

pytest_plugins = ["eosink.testing.s3"]


def spark_conf(endpoint: S3Endpoint, **extra: str) -> dict[str, str]:
    """The Spark settings a user's job sets for ``s3a://`` on an S3-compatible store."""
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint.url,
        "spark.hadoop.fs.s3a.access.key": endpoint.access_key,
        "spark.hadoop.fs.s3a.secret.key": endpoint.secret_key,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        **extra,
    }


@pytest.fixture
def no_default_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """No AWS settings from the environment or ~/.aws: only what eosink passes counts."""
    forget_default_credentials(monkeypatch, tmp_path)


def write_offset(bucket: S3Bucket, batch_id: int) -> None:
    """What Spark's driver does before it runs a batch (another process: another client)."""
    client = bucket.endpoint.client()
    client.put_object(Bucket=bucket.name, Key=f"ckpt/offsets/{batch_id}", Body=b"v1\n{}\n")


def test_offsets_written_by_another_client_between_two_calls_are_seen(
    s3_bucket: S3Bucket, no_default_credentials: None
) -> None:
    s3_bucket.endpoint.client().put_object(
        Bucket=s3_bucket.name, Key="ckpt/metadata", Body=b'{"id":"q-1"}'
    )
    write_offset(s3_bucket, 0)
    conf = spark_conf(s3_bucket.endpoint)
    checkpoint = s3_bucket.uri("ckpt", scheme="s3a")
    assert stream_position(checkpoint, hadoop_storage_options(checkpoint, conf)) == (0, "q-1")
    write_offset(s3_bucket, 1)
    assert stream_position(checkpoint, hadoop_storage_options(checkpoint, conf)) == (1, "q-1")
    write_offset(s3_bucket, 2)
    assert stream_position(checkpoint, hadoop_storage_options(checkpoint, conf)) == (2, "q-1")


def test_a_checkpoint_eosink_cannot_read_names_the_setting() -> None:
    with s3_server(auth=True) as endpoint:
        bucket = endpoint.create_bucket()
        endpoint.client().put_object(Bucket=bucket, Key="ckpt/offsets/0", Body=b"v1\n")
        checkpoint = f"s3a://{bucket}/ckpt"
        conf = spark_conf(endpoint, **{"spark.hadoop.fs.s3a.secret.key": "not-the-secret"})
        with pytest.raises(ConfigurationError) as info:
            stream_position(checkpoint, hadoop_storage_options(checkpoint, conf))
        assert "spark.hadoop.fs.s3a.access.key" in str(info.value)
        assert "not-the-secret" not in str(info.value)
        assert stream_position(
            checkpoint, hadoop_storage_options(checkpoint, spark_conf(endpoint))
        ) == (0, None)


@pytest.mark.parametrize(
    ("checkpoint", "conf", "expected"),
    [
        (
            "s3a://b/ckpt",
            {
                "spark.hadoop.fs.s3a.endpoint": "minio:9000",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
                "spark.hadoop.fs.s3a.access.key": "AK",
                "spark.hadoop.fs.s3a.secret.key": "SK",
                "spark.hadoop.fs.s3a.bucket.b.secret.key": "SK-b",
                "spark.hadoop.fs.s3a.bucket.other.secret.key": "SK-other",
            },
            {
                "key": "AK",
                "secret": "SK-b",
                "client_kwargs": {"endpoint_url": "http://minio:9000"},
            },
        ),
        (
            "abfss://c@acct.dfs.core.windows.net/ckpt",
            {
                "spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net": "a2V5",
                "spark.hadoop.fs.azure.account.key.other.dfs.core.windows.net": "b3RoZXI=",
            },
            {"account_name": "acct", "account_key": "a2V5"},
        ),
        (
            "gs://b/ckpt",
            {
                "spark.hadoop.fs.gs.auth.service.account.json.keyfile": "/keys/sa.json",
                "spark.hadoop.fs.gs.project.id": "p",
            },
            {"token": "/keys/sa.json", "project": "p"},
        ),
        ("/local/ckpt", {"spark.hadoop.fs.s3a.access.key": "AK"}, {}),
    ],
    ids=["s3a", "abfss", "gs", "local"],
)
def test_spark_settings_map_to_the_filesystem_options(checkpoint, conf, expected) -> None:
    assert hadoop_storage_options(checkpoint, conf) == expected
