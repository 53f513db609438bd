"""Cypress commands through the real YtClient."""

import pytest
import yt.wrapper as yw
from yt.wrapper import YtResponseError


def test_map_nodes_and_documents(yt_client):
    yt = yt_client
    yt.create("map_node", "//tmp/a/b/c", recursive=True)
    assert yt.list("//tmp/a") == ["b"]
    assert yt.exists("//tmp/a/b/c")
    assert not yt.exists("//tmp/a/x")
    with pytest.raises(YtResponseError) as e:
        yt.create("map_node", "//tmp/x/y")
    assert e.value.is_resolve_error()
    with pytest.raises(YtResponseError) as e:
        yt.create("map_node", "//tmp/a")
    assert e.value.is_already_exists()
    yt.create("map_node", "//tmp/a", ignore_existing=True)
    with pytest.raises(YtResponseError):
        yt.create("table", "//tmp/a", ignore_existing=True)  # type mismatch
    yt.create("document", "//tmp/doc", attributes={"value": {"k": [1, 2, {"z": "s"}]}})
    assert yt.get("//tmp/doc") == {"k": [1, 2, {"z": "s"}]}
    assert yt.get("//tmp/doc/k/2/z") == "s"
    yt.set("//tmp/doc/k/0", 10)
    assert yt.get("//tmp/doc/k") == [10, 2, {"z": "s"}]
    yt.set("//tmp/scalar", 5)
    assert yt.get("//tmp/scalar/@type") == "int64_node"
    yt.set("//tmp/m", {"x": 1, "y": {"z": "q"}})
    assert yt.get("//tmp/m/@type") == "map_node"
    assert yt.get("//tmp/m") == {"x": 1, "y": {"z": "q"}}
    assert sorted(yt.list("//tmp/m")) == ["x", "y"]
    with pytest.raises(YtResponseError):
        yt.remove("//tmp/m")  # non-empty composite node
    yt.remove("//tmp/m", recursive=True)
    assert not yt.exists("//tmp/m")
    yt.remove("//tmp/nothing", force=True)
    with pytest.raises(YtResponseError) as e:
        yt.remove("//tmp/nothing")
    assert e.value.is_resolve_error()


def test_attributes(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t", attributes={"my": {"a": 1}})
    assert yt.get("//tmp/t/@my") == {"a": 1}
    yt.set("//tmp/t/@my/b", 2)
    assert yt.get("//tmp/t/@my") == {"a": 1, "b": 2}
    yt.set("//tmp/t/@other", "x")
    attrs = yt.get("//tmp/t/@")
    assert attrs["type"] == "table" and attrs["other"] == "x" and attrs["row_count"] == 0
    assert yt.exists("//tmp/t/@other") and not yt.exists("//tmp/t/@missing")
    with pytest.raises(YtResponseError) as e:
        yt.get("//tmp/t/@missing")
    assert e.value.is_resolve_error()
    with pytest.raises(YtResponseError):
        yt.set("//tmp/t/@row_count", 5)  # read-only system attribute
    yt.remove("//tmp/t/@other")
    assert not yt.exists("//tmp/t/@other")
    listed = yt.list("//tmp", attributes=["type"])
    assert {str(x): x.attributes["type"] for x in listed}["t"] == "table"
    got = yt.get("//tmp", attributes=["type"])
    assert got["t"].attributes["type"] == "table"
    node_id = yt.get("//tmp/t/@id")
    assert yt.get("#%s/@type" % node_id) == "table"
    assert yt.get("//tmp/t/@path") == "//tmp/t"


def test_copy_and_move(yt_client):
    yt = yt_client
    yt.create(
        "table", "//tmp/src", attributes={"schema": [{"name": "a", "type": "int64"}], "tag": "s"}
    )
    yt.write_table("//tmp/src", [{"a": 1}])
    src_id = yt.get("//tmp/src/@id")
    copy_id = yt.copy("//tmp/src", "//tmp/dir/copy", recursive=True)[
        "node_id"
    ]  # v4: {"node_id": ...}
    assert copy_id != src_id
    assert list(yt.read_table("//tmp/dir/copy")) == [{"a": 1}]
    assert yt.get("//tmp/dir/copy/@tag") == "s"
    with pytest.raises(YtResponseError) as e:
        yt.copy("//tmp/src", "//tmp/dir/copy")
    assert e.value.is_already_exists()
    moved_id = yt.move("//tmp/src", "//tmp/moved")["node_id"]
    assert moved_id != src_id  # move clones: the node gets a new id
    assert not yt.exists("//tmp/src")
    assert yt.get("//tmp/moved/@id") == moved_id
    yt.create("table", "//tmp/other")
    yt.move("//tmp/moved", "//tmp/other", force=True)
    assert list(yt.read_table("//tmp/other")) == [{"a": 1}]
    with pytest.raises(YtResponseError):
        yt.move("//tmp/dir", "//tmp/dir/inside")


def test_locks_and_conflicts(yt_client, yt_emulator):
    yt = yt_client
    other = yt_emulator.client()
    yt.create("table", "//tmp/t")
    yt.create("map_node", "//tmp/dir")
    with yt.Transaction():
        lock_id = yt.lock("//tmp/t", mode="exclusive")["lock_id"]  # v4 returns the map
        assert yt.get("#%s/@mode" % lock_id) == "exclusive"
        assert yt.get("#%s/@state" % lock_id) == "acquired"
        assert yt.get("//tmp/t/@lock_mode") == "exclusive"
        with other.Transaction():
            other.lock("//tmp/t", mode="snapshot")  # snapshot is always compatible
            with pytest.raises(YtResponseError) as e:
                other.lock("//tmp/t", mode="shared")
            assert e.value.is_concurrent_transaction_lock_conflict()
            # shared locks with different child keys are compatible
        yt.lock("//tmp/dir", mode="shared", child_key="a")
        with other.Transaction():
            other.lock("//tmp/dir", mode="shared", child_key="b")
            other.lock("//tmp/dir", mode="shared", attribute_key="x")
            with pytest.raises(YtResponseError) as e:
                other.lock("//tmp/dir", mode="shared", child_key="a")
            assert e.value.is_concurrent_transaction_lock_conflict()
            with pytest.raises(YtResponseError):
                other.lock("//tmp/dir", mode="exclusive")
        # a write outside any transaction conflicts with the exclusive lock as well
        with pytest.raises(YtResponseError) as e:
            other.set("//tmp/t/@x", 1)
        assert e.value.is_concurrent_transaction_lock_conflict()
        # nested transactions may take locks their ancestor holds
        with yt.Transaction():
            yt.lock("//tmp/t", mode="exclusive")
    # locks are released on commit
    with other.Transaction():
        other.lock("//tmp/t", mode="exclusive")
    # a lock requires a transaction
    with pytest.raises(YtResponseError):
        yt.lock("//tmp/t")


def test_snapshot_lock_freezes_the_view(yt_client, yt_emulator):
    yt = yt_client
    writer = yt_emulator.client()
    yt.create("table", "//tmp/t")
    writer.write_table("//tmp/t", [{"a": 1}])
    with yt.Transaction():
        yt.lock("//tmp/t", mode="snapshot")
        writer.write_table(yw.TablePath("//tmp/t", append=True), [{"a": 2}])
        assert list(yt.read_table("//tmp/t")) == [{"a": 1}]
        with pytest.raises(YtResponseError):
            yt.write_table("//tmp/t", [{"a": 3}])  # no writes after a snapshot lock in the same tx
    assert list(yt.read_table("//tmp/t")) == [{"a": 1}, {"a": 2}]


def test_waitable_lock(yt_client, yt_emulator):
    yt = yt_client
    other = yt_emulator.client()
    yt.create("table", "//tmp/t")
    tx1 = yt.start_transaction()
    with yt.Transaction(transaction_id=tx1, ping=False):
        yt.lock("//tmp/t")
    tx2 = other.start_transaction()
    with other.Transaction(transaction_id=tx2, ping=False):
        lock_id = other.lock("//tmp/t", waitable=True)["lock_id"]
    assert other.get("#%s/@state" % lock_id) == "pending"
    yt.commit_transaction(tx1)
    assert other.get("#%s/@state" % lock_id) == "acquired"
    other.abort_transaction(tx2)


def test_concatenate(yt_client):
    yt = yt_client
    for name, rows in (("a", [{"x": 1}]), ("b", [{"x": 2}, {"x": 3}])):
        yt.create("table", "//tmp/" + name)
        yt.write_table("//tmp/" + name, rows)
    yt.concatenate(["//tmp/a", "//tmp/b"], "//tmp/c")
    assert list(yt.read_table("//tmp/c")) == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert yt.get("//tmp/c/@chunk_count") == 2
    yt.concatenate(["//tmp/a"], yw.TablePath("//tmp/c", append=True))
    assert yt.row_count("//tmp/c") == 4


def test_batch(yt_client):
    yt = yt_client
    batch = yt.create_batch_client()
    r1 = batch.create("map_node", "//tmp/b1")
    r2 = batch.exists("//tmp/b1")
    r3 = batch.get("//tmp/missing")
    batch.commit_batch()
    assert r1.is_ok() and bool(r2.get_result())  # a YsonBoolean
    assert not r3.is_ok()
    assert yt.exists("//tmp/b1")
