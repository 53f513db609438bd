"""Master transactions through the real YtClient."""

import time

import pytest
import yt.wrapper as yw
from yt.wrapper import YtResponseError


def test_nested_commit_merges_into_parent(yt_client, yt_emulator):
    yt = yt_client
    outside = yt_emulator.client()
    outer = yt.start_transaction()
    inner = yt.start_transaction(parent_transaction=outer)
    assert yt.get("#%s/@parent_id" % inner) == outer
    assert yt.get("#%s/@nested_transaction_ids" % outer) == [inner]
    with yt.Transaction(transaction_id=inner, ping=False):
        yt.create("map_node", "//tmp/x")
        yt.set("//tmp/x/@a", 1)
    # invisible to the parent and to everybody else until the child commits
    with yt.Transaction(transaction_id=outer, ping=False):
        assert not yt.exists("//tmp/x")
    assert not outside.exists("//tmp/x")
    yt.commit_transaction(inner)
    with yt.Transaction(transaction_id=outer, ping=False):
        assert yt.get("//tmp/x/@a") == 1
    assert not outside.exists("//tmp/x")
    yt.commit_transaction(outer)
    assert outside.get("//tmp/x/@a") == 1


def test_commit_refused_with_active_children_and_abort_cascades(yt_client):
    yt = yt_client
    parent = yt.start_transaction()
    child = yt.start_transaction(parent_transaction=parent)
    grandchild = yt.start_transaction(parent_transaction=child)
    with pytest.raises(YtResponseError) as e:
        yt.commit_transaction(parent)
    assert "active nested transaction" in str(e.value)
    with yt.Transaction(transaction_id=grandchild, ping=False):
        yt.create("table", "//tmp/t")
    yt.abort_transaction(parent)
    for tx in (parent, child, grandchild):
        assert not yt.exists("#" + tx)
        with pytest.raises(YtResponseError) as e:
            yt.ping_transaction(tx)
        assert e.value.is_no_such_transaction()
    assert not yt.exists("//tmp/t")


def test_abort_discards_changes(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t")
    yt.write_table("//tmp/t", [{"a": 1}])
    with pytest.raises(RuntimeError):
        with yt.Transaction():
            yt.write_table("//tmp/t", [{"a": 2}])
            yt.set("//tmp/t/@attr", 1)
            raise RuntimeError("boom")
    assert list(yt.read_table("//tmp/t")) == [{"a": 1}]
    assert not yt.exists("//tmp/t/@attr")


def test_timeout_counts_from_last_ping(yt_client):
    yt = yt_client
    tx = yt.start_transaction(timeout=600)
    for _ in range(3):
        time.sleep(0.3)
        yt.ping_transaction(tx)  # each ping extends the lifetime
    assert yt.exists("#" + tx)
    time.sleep(0.8)
    assert not yt.exists("#" + tx)
    with pytest.raises(YtResponseError) as e:
        yt.commit_transaction(tx)
    assert e.value.is_no_such_transaction()


def test_expired_parent_takes_children(yt_client):
    yt = yt_client
    parent = yt.start_transaction(timeout=300)
    child = yt.start_transaction(parent_transaction=parent, timeout=60000)
    time.sleep(0.5)
    with pytest.raises(YtResponseError) as e:
        yt.ping_transaction(child)
    assert e.value.is_no_such_transaction()


def test_ping_ancestors(yt_client):
    yt = yt_client
    parent = yt.start_transaction(timeout=700)
    child = yt.start_transaction(parent_transaction=parent, timeout=60000)
    with yt.Transaction(transaction_id=child, ping=False, ping_ancestor_transactions=True):
        for _ in range(3):
            time.sleep(0.3)
            yt.ping_transaction(child)
    assert yt.exists("#" + parent)
    yt.abort_transaction(parent)


def test_sibling_appends_both_survive(yt_client, yt_emulator):
    yt = yt_client
    yt.create("table", "//tmp/t", attributes={"schema": [{"name": "x", "type": "int64"}]})
    main = yt.start_transaction()
    a = yt.start_transaction(parent_transaction=main)
    b = yt.start_transaction(parent_transaction=main)
    other = yt_emulator.client()
    with yt.Transaction(transaction_id=a, ping=False):
        yt.write_table(yw.TablePath("//tmp/t", append=True), [{"x": 1}])
    with other.Transaction(transaction_id=b, ping=False):
        other.write_table(yw.TablePath("//tmp/t", append=True), [{"x": 2}])
        # overwrite needs an exclusive lock: conflicts with the sibling's shared lock
        with pytest.raises(YtResponseError) as e:
            other.write_table("//tmp/t", [{"x": 3}])
        assert e.value.is_concurrent_transaction_lock_conflict()
    yt.commit_transaction(a)
    yt.commit_transaction(b)
    with yt.Transaction(transaction_id=main, ping=False):
        assert sorted(r["x"] for r in yt.read_table("//tmp/t")) == [1, 2]
    assert list(yt.read_table("//tmp/t")) == []
    yt.commit_transaction(main)
    assert sorted(r["x"] for r in yt.read_table("//tmp/t")) == [1, 2]


def test_sibling_children_of_one_map_node(yt_client):
    yt = yt_client
    yt.create("map_node", "//tmp/dir")
    a = yt.start_transaction()
    b = yt.start_transaction()
    with yt.Transaction(transaction_id=a, ping=False):
        yt.create("map_node", "//tmp/dir/a")
        yt.set("//tmp/dir/@attr_a", 1)
    with yt.Transaction(transaction_id=b, ping=False):
        yt.create("map_node", "//tmp/dir/b")
        yt.set("//tmp/dir/@attr_b", 2)
        with pytest.raises(YtResponseError):
            yt.create("map_node", "//tmp/dir/a")  # same child key: shared lock conflict
    yt.commit_transaction(b)
    yt.commit_transaction(a)
    assert sorted(yt.list("//tmp/dir")) == ["a", "b"]
    assert yt.get("//tmp/dir/@attr_a") == 1 and yt.get("//tmp/dir/@attr_b") == 2


def test_transaction_attributes_and_title(yt_client):
    yt = yt_client
    tx = yt.start_transaction(timeout=5000, attributes={"title": "my title"})
    assert yt.get("#%s/@title" % tx) == "my title"
    assert yt.get("#%s/@timeout" % tx) == 5000
    assert yt.get("#%s/@type" % tx) == "transaction"
    yt.abort_transaction(tx)
