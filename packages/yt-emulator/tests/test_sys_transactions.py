"""``//sys/transactions`` and ``//sys/topmost_transactions`` through the real YtClient."""

import pytest
from yt.wrapper import YtResponseError
from yt.yson import YsonEntity

NO_SUCH_METHOD = 103


def listed(yt, path="//sys/transactions"):
    return sorted(str(key) for key in yt.list(path))


def test_lists_live_master_transactions(yt_client):
    yt = yt_client
    assert sorted(yt.list("//sys")) == ["topmost_transactions", "transactions"]
    assert yt.get("//sys/transactions/@type") == "transaction_map"
    assert yt.get("//sys/topmost_transactions/@type") == "topmost_transaction_map"
    assert listed(yt) == [] and yt.get("//sys/transactions") == {}
    parent = yt.start_transaction(timeout=60000, attributes={"title": "the parent"})
    child = yt.start_transaction(parent_transaction=parent, timeout=30000)
    assert listed(yt) == sorted([parent, child])
    assert listed(yt, "//sys/topmost_transactions") == [parent]
    assert yt.get("//sys/transactions/@count") == 2
    assert yt.get("//sys/topmost_transactions/@count") == 1
    # an item is the transaction object: an entity with the transaction's attributes
    value = yt.get("//sys/transactions")
    assert sorted(value) == sorted([parent, child])
    assert all(isinstance(v, YsonEntity) for v in value.values())
    with_titles = yt.get("//sys/transactions", attributes=["title"])
    assert with_titles[parent].attributes == {"title": "the parent"}
    assert with_titles[child].attributes == {}
    items = {str(k): k.attributes for k in yt.list("//sys/transactions", attributes=["parent_id"])}
    assert items[child] == {"parent_id": parent}
    attrs = yt.get("//sys/transactions/%s/@" % parent)
    assert attrs["id"] == parent and attrs["type"] == "transaction"
    assert attrs["title"] == "the parent" and attrs["timeout"] == 60000
    assert attrs["nested_transaction_ids"] == [child] and attrs["depth"] == 0
    for name in ("start_time", "last_ping_time", "owner", "state"):
        assert name in attrs, name
    child_attrs = yt.get("//sys/transactions/%s/@" % child)
    assert child_attrs["type"] == "nested_transaction" and child_attrs["parent_id"] == parent
    assert child_attrs["depth"] == 1 and "title" not in child_attrs
    assert yt.get("//sys/transactions/%s/@title" % parent) == "the parent"
    assert yt.get("//sys/transactions/%s/@" % parent) == yt.get("#%s/@" % parent)
    # finished transactions disappear at once
    yt.commit_transaction(child)
    assert listed(yt) == [parent] and not yt.exists("//sys/transactions/" + child)
    yt.abort_transaction(parent)
    assert listed(yt) == [] and listed(yt, "//sys/topmost_transactions") == []


def test_exists_and_missing_children(yt_client):
    yt = yt_client
    tx = yt.start_transaction(attributes={"title": "t"})
    assert yt.exists("//sys/transactions") and yt.exists("//sys/topmost_transactions")
    assert yt.exists("//sys/transactions/" + tx)
    assert yt.exists("//sys/transactions/%s/@title" % tx)
    assert not yt.exists("//sys/transactions/%s/@no_such_attribute" % tx)
    assert not yt.exists("//sys/transactions/%s/child" % tx)
    assert not yt.exists("//sys/transactions/1-2-3-4")
    with pytest.raises(YtResponseError) as e:
        yt.get("//sys/transactions/1-2-3-4/@")
    assert e.value.is_resolve_error()
    with pytest.raises(YtResponseError) as e:
        yt.get("//sys/transactions/%s/@no_such_attribute" % tx)
    assert e.value.is_resolve_error()
    assert "title" in yt.list("//sys/transactions/%s/@" % tx)
    yt.abort_transaction(tx)


def test_expired_transactions_disappear(yt_client, yt_emulator):
    yt = yt_client
    parent = yt.start_transaction()
    child = yt.start_transaction(parent_transaction=parent)
    kept = yt.start_transaction()
    yt_emulator.faults.expire_transaction(parent)
    assert listed(yt) == [kept]
    assert not yt.exists("//sys/transactions/" + child)
    yt.abort_transaction(kept)


def test_tablet_transactions_are_not_listed(yt_client):
    yt = yt_client
    tablet_tx = yt.start_transaction(type="tablet", sticky=True)
    assert listed(yt) == []
    assert not yt.exists("//sys/transactions/" + tablet_tx)
    yt.abort_transaction(tablet_tx)


def test_read_inside_a_transaction_sees_it(yt_client):
    yt = yt_client
    with yt.Transaction() as tx:
        with yt.Transaction() as nested:
            assert listed(yt) == sorted([tx.transaction_id, nested.transaction_id])
    assert listed(yt) == []


def test_writes_are_refused(yt_client):
    yt = yt_client
    tx = yt.start_transaction(attributes={"title": "keep me"})
    item = "//sys/transactions/" + tx
    writes = [
        lambda: yt.set(item + "/@title", "changed"),
        lambda: yt.set(item + "/@custom", 1),
        lambda: yt.set("//sys/transactions/x", 1),
        lambda: yt.set("//sys/transactions/@custom", 1),
        lambda: yt.create("map_node", "//sys/transactions/x"),
        lambda: yt.create("map_node", "//sys/transactions", force=True),
        lambda: yt.remove(item),
        lambda: yt.remove("//sys/transactions"),
        lambda: yt.remove("//sys", recursive=True),
        lambda: yt.copy("//tmp", item + "/x"),
        lambda: yt.copy("//sys", "//tmp/sys"),
        lambda: yt.move("//sys/topmost_transactions", "//tmp/moved"),
    ]
    for write in writes:
        with pytest.raises(YtResponseError) as e:
            write()
        assert e.value.contains_code(NO_SUCH_METHOD), str(e.value)
    with yt.Transaction():
        with pytest.raises(YtResponseError) as e:
            yt.lock("//sys/transactions")
        assert e.value.contains_code(NO_SUCH_METHOD)
    with pytest.raises(YtResponseError) as e:
        yt.list(item)  # a transaction is an object, not a map node
    assert e.value.contains_code(NO_SUCH_METHOD)
    batch = yt.execute_batch(
        [{"command": "set", "parameters": {"path": item + "/@title"}, "input": "x"}]
    )
    assert batch["results"][0]["error"]["code"] == NO_SUCH_METHOD
    # nothing changed
    assert listed(yt) == [tx]
    assert yt.get(item + "/@title") == "keep me" and not yt.exists(item + "/@custom")
    assert not yt.exists("//tmp/sys") and not yt.exists("//tmp/moved")
    assert sorted(yt.list("//sys")) == ["topmost_transactions", "transactions"]
    yt.abort_transaction(tx)
