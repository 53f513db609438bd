"""Store options of the files sink: their shapes, where they go, and URIs of GCS and Azure.

No GCS or Azure server runs here: these tests check the options and URIs handed to gcsfs and
adlfs, whose filesystems are built but never reach the network.
"""

from __future__ import annotations

import pytest
from eosink_files.options import FilesOptions, fsspec_options
from eosink_files.sink import FilesSink

from eosink import ConfigurationError


def test_spark_options_with_the_storage_prefix():
    sink = FilesSink.from_options(
        {
            "path": "s3://bucket/out",
            "storage.key": "AKIA-ID",
            "storage.secret": "s3cr3t",
            "storage.client_kwargs.endpoint_url": "http://127.0.0.1:9000",
            "storage.client_kwargs.region_name": "eu-west-1",
            "storage.anon": "false",
        }
    )
    assert fsspec_options(sink.options.storage_options) == {
        "key": "AKIA-ID",
        "secret": "s3cr3t",
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
        "anon": False,
    }
    assert "s3cr3t" not in repr(sink) and "AKIA-ID" not in repr(sink)
    assert "client_kwargs.region_name': 'eu-west-1'" in repr(sink)


def test_python_dict_and_json_text():
    opts = FilesOptions(path="s3://b/x", storage_options={"client_kwargs": {"region_name": "r"}})
    assert fsspec_options(opts.storage_options) == {"client_kwargs": {"region_name": "r"}}
    from_json = FilesSink.from_options({"path": "s3://b/x", "storage_options": '{"anon": true}'})
    assert from_json.options.storage_options == {"anon": True}
    with pytest.raises(ConfigurationError, match="storage_options: give a dict"):
        FilesOptions(path="s3://b/x", storage_options="not json")


def test_storage_options_on_a_local_path_are_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="storage_options.*object store.*local"):
        FilesOptions(path=str(tmp_path), storage_options={"key": "k"})


def test_gcs_options_reach_gcsfs():
    sink = FilesSink(
        path="gs://bucket/out",
        storage_options={"token": "anon", "project": "p", "endpoint_url": "http://127.0.0.1:1"},
    )
    store = sink._store()
    assert store.root_uri == "gs://bucket/out"
    assert store.fs.project == "p" and store.atomic_publish()
    assert "anon" not in repr(sink)  # a token, whatever it says


def test_azure_options_reach_adlfs():
    sink = FilesSink(
        path="abfss://container@acct.dfs.core.windows.net/out",
        storage_options={"account_name": "acct", "account_key": "a2V5"},
    )
    store = sink._store()
    assert store.fs.account_name == "acct"
    assert store.root_uri == "abfss://container@acct.dfs.core.windows.net/out"
    assert store.uri("part-0.parquet").endswith("/out/part-0.parquet")
    assert "a2V5" not in repr(sink) and store.atomic_publish()
    # Spark's form with the account only in the options: the manifest still names it.
    sink = FilesSink(
        path="abfs://container/out", storage_options={"account_name": "acct2", "anon": True}
    )
    assert sink._store().root_uri == "abfss://container@acct2.dfs.core.windows.net/out"
