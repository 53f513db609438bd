"""Shared fixtures of the eosink-files tests."""

from __future__ import annotations

import uuid

import pytest

# The loopback S3 server's fixtures (s3_endpoint, s3_bucket, s3_faults).
from eosink.testing.s3 import s3_bucket, s3_endpoint, s3_faults  # noqa: F401


@pytest.fixture
def memory_url():
    """A fresh folder in fsspec's in-process memory filesystem, removed afterwards."""
    import fsspec

    url = f"memory://eosink-files-tests/{uuid.uuid4().hex}/out"
    yield url
    fs = fsspec.filesystem("memory")
    root = url[len("memory://") :].rsplit("/", 1)[0]
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every Spark test of the session (a JVM start costs ~11 s)."""
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
