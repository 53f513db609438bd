"""Manifest paths are the URIs Spark's Hadoop filesystems resolve, not fsspec's spelling.

Spark reads ``s3a://`` (hadoop-aws), ``gs://`` (the GCS connector) and
``abfss://container@account.dfs.core.windows.net/...`` (hadoop-azure), while fsspec spells
them ``s3://``, ``gcs://`` and ``abfs://container/...`` (adlfs strips the account). The
object-store clients are not installed here, so the end-to-end cases register an in-memory
filesystem under each protocol, resolving paths as the real client does.
"""

from __future__ import annotations

import json
import uuid

import fsspec
import pytest
from eosink_files import committed_files, read_table
from eosink_files.sink import FilesSink
from eosink_files.store import spark_root_uri
from files_helpers import run
from fsspec.implementations.memory import MemoryFileSystem
from fsspec.registry import _registry

from eosink import ConfigurationError


@pytest.mark.parametrize(
    ("location", "options", "expected"),
    [
        ("s3://bucket/out", {}, "s3a://bucket/out"),
        ("s3a://bucket/out", {}, "s3a://bucket/out"),
        ("s3://bucket/my out", {}, "s3a://bucket/my%20out"),
        ("s3://bucket/out", {"scheme": "s3"}, "s3://bucket/out"),  # EMRFS reads s3://
        ("gcs://bucket/out", {}, "gs://bucket/out"),
        ("gs://bucket/out", {}, "gs://bucket/out"),
        (
            "abfss://data@acct.dfs.core.windows.net/out",
            {},
            "abfss://data@acct.dfs.core.windows.net/out",
        ),
        (
            "abfs://data@acct.dfs.core.windows.net/out",
            {},
            "abfss://data@acct.dfs.core.windows.net/out",
        ),
        ("az://data/out", {"account": "acct"}, "abfss://data@acct.dfs.core.windows.net/out"),
        (
            "abfs://data/out",
            {"account": "acct", "scheme": "abfs"},
            "abfs://data@acct.dfs.core.windows.net/out",
        ),
        (
            "abfs://data/out",
            {"account": "acct", "scheme": "wasbs"},
            "wasbs://data@acct.blob.core.windows.net/out",
        ),
    ],
)
def test_spark_uri_of_each_store(location, options, expected):
    assert spark_root_uri(location, **options) == expected


def test_azure_without_an_account_is_refused():
    with pytest.raises(ConfigurationError, match="abfss://<container>@<account>.dfs.core"):
        spark_root_uri("abfs://data/out")


# -- end to end, through fsspec's resolution of each protocol ---------------------------------
class FakeAdlfs(MemoryFileSystem):
    """adlfs's resolution: the account comes from the URL's host and is stripped from paths."""

    protocol = ("abfs", "abfss", "az")

    @classmethod
    def _strip_protocol(cls, path):
        if "://" not in path:
            return path
        rest = path.split("://", 1)[1]
        container, _, inside = rest.partition("/")
        return "/" + container.split("@", 1)[0] + ("/" + inside if inside else "")

    @staticmethod
    def _get_kwargs_from_urls(path):
        netloc = path.split("://", 1)[-1].split("/", 1)[0]
        return {"account_name": netloc.split("@", 1)[1].split(".", 1)[0]} if "@" in netloc else {}

    def __init__(self, *args, account_name=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.account_name = account_name


class FakeObjectStore(MemoryFileSystem):
    protocol = ("s3", "s3a", "gs", "gcs")

    @classmethod
    def _strip_protocol(cls, path):
        return "/" + path.split("://", 1)[-1].strip("/")


@pytest.fixture
def object_stores():
    saved = dict(fsspec.registry)
    for proto in FakeObjectStore.protocol:
        fsspec.register_implementation(proto, FakeObjectStore, clobber=True)
    for proto in FakeAdlfs.protocol:
        fsspec.register_implementation(proto, FakeAdlfs, clobber=True)
    yield
    _registry.clear()
    _registry.update(saved)


@pytest.mark.parametrize(
    ("scheme", "host", "spark_prefix"),
    [
        ("s3", "bucket", "s3a://bucket"),
        ("gcs", "bucket", "gs://bucket"),
        ("abfs", "data@acct.dfs.core.windows.net", "abfss://data@acct.dfs.core.windows.net"),
    ],
)
def test_manifest_lists_the_uris_spark_resolves(object_stores, scheme, host, spark_prefix):
    folder = f"eosink-{uuid.uuid4().hex}/out"
    url = f"{scheme}://{host}/{folder}"
    sink = FilesSink(path=url)
    assert run(sink, 0).status == "committed"
    fs = fsspec.filesystem(scheme)
    root = fs._strip_protocol(url)
    lines = fs.cat_file(f"{root}/_spark_metadata/0").decode().splitlines()
    paths = [json.loads(line)["path"] for line in lines[1:]]
    assert paths and all(p.startswith(f"{spark_prefix}/{folder}/") for p in paths)
    # the reader maps Spark's URIs back to the folder
    assert len(committed_files(url)) == 2
    assert read_table(url).num_rows == 8
    assert run(FilesSink(path=url), 0).status == "skipped"
