"""GCS and Azure (and S3 at AWS itself): option and URI handling of the delta sink, with no
server. delta-rs takes ``gs://``, ``az://`` and ``abfss://container@account...`` with its own
option names; what reaches it is what the user gave. Only S3 is tested against a server
(``test_s3.py``); see the README for what was and was not tested on a real endpoint."""

from __future__ import annotations

import socket

import pyarrow.fs as pafs
import pytest
from eosink_delta.options import DeltaOptions
from eosink_delta.sink import DeltaSink
from eosink_delta.store import TableStore, delta_options, filesystem

from eosink import ConfigurationError
from eosink.options import options_from

AZURE_KEY = "c2VjcmV0LWF6dXJlLWtleQ=="  # base64, as Azure account keys are
AZURE = {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": AZURE_KEY}
GCS = {"GOOGLE_SERVICE_ACCOUNT_KEY": '{"private_key": "gcs-secret"}', "GOOGLE_PROJECT_ID": "p"}


@pytest.mark.parametrize(
    "path",
    [
        "gs://bucket/tables/orders",
        "az://container/tables/orders",
        "abfss://container@acct.dfs.core.windows.net/tables/orders",
        "s3a://bucket/tables/orders",
    ],
)
def test_object_store_paths_are_kept_as_given(path):
    assert DeltaOptions(path=path + "/", storage_options={"x": "y"}).path == path


def test_spark_storage_options_for_gcs_and_azure():
    gcs = options_from(
        DeltaOptions,
        {"path": "gs://b/t", **{f"storage.{k.lower()}": v for k, v in GCS.items()}},
    )
    assert gcs.storage_options == {k.lower(): v for k, v in GCS.items()}
    assert "gcs-secret" not in repr(gcs) and "'google_project_id': 'p'" in repr(gcs)
    azure = options_from(
        DeltaOptions,
        {"path": "az://c/t", **{f"storage.{k}": v for k, v in AZURE.items()}},
    )
    assert azure.storage_options == AZURE
    assert AZURE_KEY not in repr(azure) and "acct" in repr(azure)
    assert delta_options(azure.storage_options) == AZURE  # as they are: delta-rs' own names


@pytest.mark.parametrize(
    ("uri", "options"),
    [
        ("az://container/t", AZURE),
        ("abfss://container@acct.dfs.core.windows.net/t", {"azure_storage_account_key": AZURE_KEY}),
        ("gs://bucket/t", {"google_skip_signature": "true"}),
    ],
)
def test_delta_rs_client_takes_the_options(uri, options):
    """The executors' file system is delta-rs' client built from the same options (it parses
    them without a request)."""
    fs, base = filesystem(uri, options)
    assert isinstance(fs, pafs.PyFileSystem) and base == ""


def test_conditional_create_is_asked_of_s3_compatible_endpoints_only(monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)

    def asks(uri: str, options: dict) -> bool:
        return TableStore(uri, options, False).asks_conditional_create()

    assert not asks("gs://b/t", GCS)
    assert not asks("az://c/t", AZURE)
    assert not asks("abfss://c@acct.dfs.core.windows.net/t", AZURE)
    assert not asks("s3://b/t", {"AWS_REGION": "eu-west-1"})  # AWS S3 itself honours it
    assert asks("s3://b/t", {"AWS_ENDPOINT_URL": "https://minio.internal:9000"})
    assert asks("s3a://b/t", {"aws_endpoint_url": "https://minio.internal:9000"})
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://minio.internal:9000")
    assert asks("s3://b/t", {})


def test_unreachable_azure_endpoint_is_refused_at_init():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = {**AZURE, "AZURE_STORAGE_ENDPOINT": f"http://127.0.0.1:{port}", "allow_http": "true"}
    sink = DeltaSink(path="az://container/table", storage_options=options)
    with pytest.raises(ConfigurationError, match="could not reach") as info:
        sink.is_committed(None)
    assert AZURE_KEY not in str(info.value) and "\x1b" not in str(info.value)
