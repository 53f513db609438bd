"""The yt-static sink's options, configuration errors and cleanup policies."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from conftest import TABLE
from yt_static_helpers import leftovers, open_transactions, read_rows

import eosink
from eosink.plugin import BatchContext, ConfigurationError
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner
from eosink_yt_static.sink import PROOFS_ATTR, YtStaticSink
from eosink_yt_static.tx import node_key

PROXY = "http://localhost:1"


def batch(ids, name="n"):
    return pa.record_batch(
        {"id": pa.array(ids, pa.int64()), "name": pa.array([f"{name}{i}" for i in ids])}
    )


def run(sink, batch_id, *parts, writer="w", mode="append"):
    ctx = BatchContext(sink="yt-static", writer_id=writer, batch_id=batch_id, mode=mode)
    return run_batch(sink, ctx, parts[0].schema, LocalRunner([[p] for p in parts]))


# -- options -----------------------------------------------------------------------------------
def test_options_from_spark_strings():
    sink = YtStaticSink.from_options(
        {
            "proxy": PROXY,
            "path": TABLE,
            "proxyDiscovery": "false",
            "keyColumns": "a, b",
            "cleanup": "Truncate",
            "mainTxTimeoutS": "90",
            "clientConfig": '{"proxy": {"x": 1}}',
        }
    )
    o = sink.options
    assert (o.proxy_discovery, o.key_columns, o.cleanup, o.main_tx_timeout_s) == (
        False,
        ("a", "b"),
        "truncate",
        90.0,
    )
    assert o.client_config == {"proxy": {"x": 1}}
    assert pickle.loads(pickle.dumps(sink)).options == o


def test_the_entry_point_finds_the_sink():
    assert isinstance(eosink.sink("yt-static", proxy=PROXY, path=TABLE), YtStaticSink)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"path": "home/t"}, "absolute Cypress path"),
        ({"cleanup": "wipe"}, "'disabled'.*'truncate'.*'drop'"),
        ({"client_config": "{nope"}, "JSON object"),
        ({"main_tx_timeout_s": 0}, "positive"),
        ({"pathh": "//t"}, "known options"),
    ],
)
def test_bad_options_name_the_fix(options, match):
    with pytest.raises(ConfigurationError, match=match):
        YtStaticSink(**{"proxy": PROXY, "path": TABLE, **options})


def test_token_never_shows():
    sink = YtStaticSink(proxy=PROXY, path=TABLE, token="secret-token")
    assert "secret-token" not in repr(sink) and "secret-token" not in repr(sink.options)


def test_writer_ids_become_safe_node_names():
    assert node_key("orders-to-lake_1.v2") == "orders-to-lake_1.v2"
    assert "/" not in node_key("a/b@c") and node_key("a/b") != node_key("a_b")


# -- configuration errors against the target ---------------------------------------------------
def test_dynamic_target_is_refused_naming_the_dynamic_sink(make_sink, yt):
    yt.create(
        "table",
        TABLE,
        recursive=True,
        attributes={
            "dynamic": True,
            "schema": [
                {"name": "id", "type": "int64", "sort_order": "ascending"},
                {"name": "name", "type": "string"},
            ],
        },
    )
    with pytest.raises(ConfigurationError, match="yt-dynamic"):
        run(make_sink(), 0, batch([1]))


def test_columns_that_differ_from_the_table_are_refused(make_sink, yt):
    run(make_sink(), 0, batch([1]))
    other = pa.record_batch({"id": pa.array([2], pa.int64()), "title": pa.array(["x"])})
    with pytest.raises(ConfigurationError, match="select the table's columns"):
        run(make_sink(), 1, other)
    wrong_type = pa.record_batch({"id": pa.array(["2"]), "name": pa.array(["x"])})
    with pytest.raises(ConfigurationError, match="cast it in the query"):
        run(make_sink(), 1, wrong_type)
    assert [r["id"] for r in read_rows(yt, TABLE)] == [1]
    assert leftovers(yt) == []


def test_key_columns_that_disagree_with_the_table_are_refused(make_sink):
    run(make_sink(key_columns=("id",)), 0, batch([1]))
    with pytest.raises(ConfigurationError, match="keyed by"):
        run(make_sink(key_columns=("name",)), 1, batch([2]))


# -- cleanup policies --------------------------------------------------------------------------
def test_append_keeps_rows_sorted_and_all_writers_proofs(make_sink, yt):
    run(make_sink(key_columns=("id",)), 0, batch([5, 1]), batch([3]), writer="a")
    run(make_sink(), 0, batch([4, 2]), writer="b")
    run(make_sink(), 1, batch([0]), writer="a")
    assert [r["id"] for r in read_rows(yt, TABLE)] == [0, 1, 2, 3, 4, 5]
    assert yt.get(f"{TABLE}/@sorted_by") == ["id"]
    assert set(yt.get(f"{TABLE}/@{PROOFS_ATTR}")) == {"a", "b"}
    assert leftovers(yt) == [] and open_transactions(yt) == []


def test_truncate_replaces_rows_keeps_the_table(make_sink, yt):
    run(make_sink(), 0, batch([1, 2]))
    yt.set(f"{TABLE}/@owner_note", "keep me")
    node_id = yt.get(f"{TABLE}/@id")
    run(make_sink(cleanup="truncate"), 1, batch([3]))
    assert [r["id"] for r in read_rows(yt, TABLE)] == [3]
    assert yt.get(f"{TABLE}/@id") == node_id and yt.get(f"{TABLE}/@owner_note") == "keep me"
    assert make_sink().is_committed(BatchContext("yt-static", "w", 1)) is not None


def test_drop_replaces_the_table_and_its_schema(make_sink, yt):
    run(make_sink(), 0, batch([1, 2]))
    wider = pa.record_batch({"id": pa.array([7], pa.int64()), "score": pa.array([0.5])})
    run(make_sink(cleanup="drop"), 1, wider)
    assert read_rows(yt, TABLE) == [{"id": 7, "score": 0.5}]
    assert [c["name"] for c in yt.get(f"{TABLE}/@schema")] == ["id", "score"]
    assert make_sink().is_committed(BatchContext("yt-static", "w", 0)) is not None


def test_complete_mode_replaces_the_content(make_sink, yt):
    run(make_sink(), 0, batch([1, 2]), mode="complete")
    run(make_sink(), 1, batch([3]), mode="complete")
    assert [r["id"] for r in read_rows(yt, TABLE)] == [3]


def test_staging_tables_inherit_the_tables_codecs(make_sink, yt):
    run(make_sink(), 0, batch([1]))
    yt.set(f"{TABLE}/@compression_codec", "zstd_3")
    run(make_sink(), 1, batch([2]))
    assert yt.get(f"{TABLE}/@compression_codec") == "zstd_3"
