"""Spark's string options map onto typed attrs options, whatever their spelling."""

import attrs
import pytest

from eosink.plugin import ConfigurationError, options_from


@attrs.frozen
class Opts:
    path: str
    partition_by: tuple[str, ...] = ()
    target_file_size: int = 128
    single_writer: bool = False
    ratio: float | None = None


def test_spark_spellings_and_types():
    opts = options_from(
        Opts,
        {"path": "/x", "partitionby": "day, hour", "targetFileSize": "64", "single-writer": "true"},
    )
    assert opts == Opts("/x", ("day", "hour"), 64, True, None)


def test_python_values_pass_through():
    assert options_from(Opts, {"path": "/x", "partition_by": ("a",)}).partition_by == ("a",)


def test_unknown_option_lists_known_ones():
    with pytest.raises(ConfigurationError, match=r"unknown option 'pth'; known options: .*path"):
        options_from(Opts, {"pth": "/x"}, sink="files")


def test_missing_mandatory_option():
    with pytest.raises(ConfigurationError, match="path"):
        options_from(Opts, {}, sink="files")


@pytest.mark.parametrize(
    ("name", "value"), [("target_file_size", "big"), ("single_writer", "maybe")]
)
def test_unreadable_values(name, value):
    with pytest.raises(ConfigurationError, match=name):
        options_from(Opts, {"path": "/x", name: value})


def test_location_is_absolute_or_a_url(tmp_path, monkeypatch):
    from eosink.options import location

    monkeypatch.chdir(tmp_path)
    assert location("out") == str(tmp_path / "out")
    assert location("file:///data/x") == location("file:/data/x") == "/data/x"
    assert location(" s3://bucket/x/ ") == "s3://bucket/x"


@attrs.frozen
class StoreOpts:
    path: str
    storage_options: dict = attrs.field(factory=dict)


def test_storage_prefix_collects_store_options():
    opts = options_from(
        StoreOpts,
        {
            "path": "s3://b/x",
            "storage.endpoint_url": "http://127.0.0.1:9000",
            "STORAGE.client_kwargs.region_name": "eu-west-1",
        },
    )
    assert opts.storage_options == {
        "endpoint_url": "http://127.0.0.1:9000",
        "client_kwargs.region_name": "eu-west-1",
    }
    # Entries given both ways: the prefixed ones win over the dict's.
    opts = options_from(
        StoreOpts,
        {"path": "/x", "storage_options": {"a": "1", "b": "2"}, "storage.b": "3"},
    )
    assert opts.storage_options == {"a": "1", "b": "3"}
    # A class without the field: a prefixed option is an unknown option.
    with pytest.raises(ConfigurationError, match="unknown option 'storage.key'"):
        options_from(Opts, {"path": "/x", "storage.key": "k"})


def test_masked_hides_credentials_at_any_depth():
    from eosink.options import masked, secret_values

    given = {
        "key": "AKIA-ID",
        "secret": "s3cr3t",
        "endpoint_url": "https://user:pw@host:9000",
        "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": "tok"},
        "account_name": "acct",
        "sas_token": "sv=x",
    }
    shown = masked(given)
    assert shown == {
        "key": "***",
        "secret": "***",
        "endpoint_url": "https://***@host:9000",
        "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": "***"},
        "account_name": "acct",
        "sas_token": "***",
    }
    assert sorted(secret_values(given)) == sorted(["AKIA-ID", "s3cr3t", "tok", "sv=x"])
