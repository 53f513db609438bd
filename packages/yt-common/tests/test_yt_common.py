"""Shared YT code: schema mapping, value conversion, credentials kept out of reprs, unit retries."""

import datetime
import json
import pickle

import attrs
import pyarrow as pa
import pytest
from eosink_yt_common import (
    YtClientOptions,
    YtConnection,
    key_columns,
    retry_unit,
    yt_rows,
    yt_schema,
)
from yt.wrapper.errors import YtTabletTransactionLockConflict

from eosink import ConfigurationError
from eosink.options import options_from


def test_schema_puts_keys_first_and_maps_spark_types():
    schema = pa.schema(
        [
            ("v", pa.float64()),
            ("k", pa.int64()),
            ("s", pa.string()),
            ("d", pa.date32()),
            ("t", pa.timestamp("us", tz="Etc/UTC")),
            ("b", pa.bool_()),
        ]
    )
    converted = yt_schema(schema, ["k"])
    assert [c["name"] for c in converted] == ["k", "v", "s", "d", "t", "b"]
    assert [c["type"] for c in converted] == [
        "int64",
        "double",
        "string",
        "date",
        "timestamp",
        "boolean",
    ]
    assert key_columns(converted) == ["k"]


def test_unmapped_type_and_unknown_key_are_clear_errors():
    with pytest.raises(ConfigurationError, match="cast it"):
        yt_schema(pa.schema([("m", pa.map_(pa.string(), pa.int64()))]))
    with pytest.raises(ConfigurationError, match="key columns"):
        yt_schema(pa.schema([("a", pa.int64())]), ["b"])


def test_rows_carry_microseconds_and_days():
    batch = pa.record_batch(
        {
            "t": pa.array([datetime.datetime(1970, 1, 1, 0, 0, 1)], pa.timestamp("us", tz="UTC")),
            "d": pa.array([datetime.date(1970, 1, 3)], pa.date32()),
            "s": pa.array([None], pa.string()),
        }
    )
    assert yt_rows(batch) == [{"t": 1_000_000, "d": 2, "s": None}]


def test_token_is_never_in_repr_but_survives_pickling():
    connection = YtConnection(proxy="localhost:1", token="AQAD-secret")
    assert "AQAD" not in repr(connection)
    assert pickle.loads(pickle.dumps(connection)).token == "AQAD-secret"


def test_retry_unit_retries_retriable_errors_only():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise YtTabletTransactionLockConflict({"code": 1700, "message": "conflict"})
        return "done"

    assert retry_unit(flaky, what="test", pause_s=0) == "done" and len(calls) == 3
    with pytest.raises(ValueError):
        retry_unit(lambda: (_ for _ in ()).throw(ValueError("bad")), what="test", pause_s=0)


@attrs.frozen(kw_only=True)
class SinkOptions(YtClientOptions):
    path: str


def test_client_options_are_shared_by_subclasses_and_parsed_from_spark_strings():
    options = options_from(
        SinkOptions,
        {
            "proxy": "p",
            "path": "//t",
            "proxyDiscovery": "false",
            "clientConfig": '{"a": 1}',
            "token": "secret-token",
        },
    )
    connection = options.connection(ping_failed_mode="pass")
    assert connection.config == {"ping_failed_mode": "pass", "a": 1}
    assert (connection.proxy, connection.proxy_discovery, connection.token) == (
        "p",
        False,
        "secret-token",
    )
    assert "secret-token" not in repr(options) and "secret-token" not in repr(connection)
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(ConfigurationError, match="JSON object"):
        SinkOptions(proxy="p", path="//t", client_config="{nope")


def test_a_token_given_through_client_config_is_never_in_repr_nor_in_errors():
    """YT's own config keys carry credentials too (``token``, ``oauth_client_secret``): given
    through ``client_config`` they reach the client, never a repr or an error."""
    secret = "AQAD-client-config-secret"
    given = {"token": secret, "oauth_client_secret": secret, "proxy": {"request_timeout": 1000}}
    for options in (
        SinkOptions(proxy="p", path="//t", client_config=given),
        options_from(SinkOptions, {"proxy": "p", "path": "//t", "clientConfig": json.dumps(given)}),
    ):
        connection = options.connection()
        for text in (repr(options), str(options), repr(connection)):
            assert secret not in text, text
            assert "request_timeout" in text, text  # the rest of the config still shows
        assert pickle.loads(pickle.dumps(connection)).config["token"] == secret
        assert connection.client().config["token"] == secret  # the real client gets it
    malformed = json.dumps(given)[:-1] + ",}"
    with pytest.raises(ConfigurationError, match="client_config.*JSON object") as error:
        SinkOptions(proxy="p", path="//t", client_config=malformed)
    assert "AQAD" not in str(error.value)
    with pytest.raises(ConfigurationError, match="client_config") as error:
        options_from(SinkOptions, {"proxy": "p", "path": "//t", "clientConfig": f"[{secret!r}]"})
    assert "AQAD" not in str(error.value)


UTC = datetime.timezone.utc


@pytest.mark.parametrize(
    "column",
    [
        pa.array([datetime.date(1970, 1, 1), datetime.date(1969, 12, 31)], pa.date32()),
        pa.array([datetime.date(2106, 1, 1)], pa.date32()),
        pa.array([datetime.datetime(1969, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us")),
        pa.array([datetime.datetime(2106, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
    ],
)
def test_dates_and_times_yt_cannot_hold_are_clear_errors(column):
    """YT's date and timestamp hold 1970-01-01..2105-12-31 only (Spark's go from year 1 to
    9999): a value outside is refused naming the column and the fix, before any request."""
    batch = pa.record_batch({"id": pa.array(range(len(column)), pa.int64()), "when": column})
    with pytest.raises(ConfigurationError, match=r"column 'when'.*1970-01-01.*2105-12-31.*cast"):
        yt_rows(batch)


def test_the_edges_of_yts_dates_and_times_are_kept():
    last_day = datetime.date(2105, 12, 31)
    batch = pa.record_batch(
        {
            "d": pa.array([datetime.date(1970, 1, 1), last_day, None], pa.date32()),
            "t": pa.array(
                [
                    datetime.datetime(1970, 1, 1),
                    datetime.datetime(2105, 12, 31, 23, 59, 59, 999999),
                    None,
                ],
                pa.timestamp("us"),
            ),
        }
    )
    assert [tuple(r.values()) for r in yt_rows(batch)] == [
        (0, 0),
        (49672, 49673 * 86400 * 10**6 - 1),
        (None, None),
    ]
