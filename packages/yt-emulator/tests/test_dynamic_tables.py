"""Dynamic tables through the real YtClient."""

import time

import pytest
import yt.wrapper as yw
from eosink_yt_emulator import dyntable
from eosink_yt_emulator.state import DEFAULT_CONFIG
from yt.wrapper import YtResponseError

SORTED = [
    {"name": "k", "type": "int64", "sort_order": "ascending"},
    {"name": "v", "type": "string"},
    {"name": "n", "type": "int64"},
    {"name": "total", "type": "int64", "aggregate": "sum"},
]


def make_sorted(yt, path="//tmp/d", schema=SORTED, mount=True, **attrs):
    yt.create("table", path, attributes=dict({"dynamic": True, "schema": schema}, **attrs))
    if mount:
        yt.mount_table(path, sync=True)


def tablet_tx(yt):
    return yt.Transaction(type="tablet")


def test_schema_rules(yt_client):
    yt = yt_client
    bad_prefix = [
        {"name": "a", "type": "int64"},
        {"name": "k", "type": "int64", "sort_order": "ascending"},
    ]
    with pytest.raises(YtResponseError):
        make_sorted(yt, "//tmp/bad1", bad_prefix, mount=False)
    non_unique = yw.yson.to_yson_type(SORTED, attributes={"unique_keys": False})
    with pytest.raises(YtResponseError):
        make_sorted(yt, "//tmp/bad2", non_unique, mount=False)
    with pytest.raises(YtResponseError):
        yt.create("table", "//tmp/bad3", attributes={"dynamic": True})  # schema required
    make_sorted(yt, "//tmp/ok", mount=False)
    schema = yt.get("//tmp/ok/@schema")
    assert schema.attributes["unique_keys"] and schema.attributes["strict"]
    assert yt.get("//tmp/ok/@dynamic") and yt.get("//tmp/ok/@sorted_by") == ["k"]


class TabletClock:
    """The tablets' clock (``time.time`` in :mod:`eosink_yt_emulator.dyntable`), which a test can
    hold still: a transient state then lasts until the test moves the clock on, however long
    the requests in between take on a loaded machine. Released, it is the wall clock."""

    def __init__(self) -> None:
        self.held_at: float | None = None

    def time(self) -> float:
        return time.time() if self.held_at is None else self.held_at


@pytest.fixture
def tablet_clock(monkeypatch):
    clock = TabletClock()
    monkeypatch.setattr(dyntable, "time", clock)
    return clock


def test_tablet_state_transitions(yt_client, tablet_clock):
    yt = yt_client
    make_sorted(yt, mount=False)
    assert yt.get("//tmp/d/@tablet_state") == "unmounted"
    with pytest.raises(YtResponseError) as e:
        with tablet_tx(yt):
            yt.insert_rows("//tmp/d", [{"k": 1}])
    assert e.value.is_tablet_not_mounted()
    start = tablet_clock.held_at = time.time()  # the mount delay lasts until the clock moves on
    delay = DEFAULT_CONFIG["mount_delay"]
    yt.mount_table("//tmp/d")
    assert yt.get("//tmp/d/@tablet_state") == "transient"
    assert yt.get("//tmp/d/@tablets")[0]["state"] == "mounting"
    with pytest.raises(YtResponseError) as e:
        yt.unmount_table("//tmp/d")  # tablet in an intermediate state
    assert e.value.is_tablet_in_intermediate_state()
    tablet_clock.held_at = start + delay / 2
    assert yt.get("//tmp/d/@tablet_state") == "transient"  # not before the delay has passed
    tablet_clock.held_at = start + delay
    assert yt.get("//tmp/d/@tablet_state") == "mounted"
    tablet_clock.held_at = None  # the wall clock again: the sync requests below wait on it
    yt.mount_table("//tmp/d", sync=True)  # mounting a mounted table is a no-op
    assert yt.get("//tmp/d/@tablets")[0]["state"] == "mounted"
    with pytest.raises(YtResponseError):
        yt.move("//tmp/d", "//tmp/d2")  # a mounted dynamic table cannot be moved
    with pytest.raises(YtResponseError):
        yt.remove("//tmp/d")
    yt.freeze_table("//tmp/d", sync=True)
    assert yt.get("//tmp/d/@tablet_state") == "frozen"
    yt.unfreeze_table("//tmp/d", sync=True)
    yt.unmount_table("//tmp/d", sync=True)
    assert yt.get("//tmp/d/@tablet_state") == "unmounted"
    yt.move("//tmp/d", "//tmp/d2")
    yt.remove("//tmp/d2")


def test_insert_modes_delete_lookup(yt_client):
    yt = yt_client
    make_sorted(yt)
    yt.insert_rows(
        "//tmp/d", [{"k": 1, "v": "a", "n": 10, "total": 1}, {"k": 2, "v": "b", "n": 20}]
    )
    # overwrite: missing columns become null
    yt.insert_rows("//tmp/d", [{"k": 1, "v": "a2"}])
    assert list(yt.lookup_rows("//tmp/d", [{"k": 1}])) == [
        {"k": 1, "v": "a2", "n": None, "total": None}
    ]
    # update keeps them
    yt.insert_rows("//tmp/d", [{"k": 2, "n": 21}], update=True)
    assert list(yt.lookup_rows("//tmp/d", [{"k": 2}])) == [
        {"k": 2, "v": "b", "n": 21, "total": None}
    ]
    # aggregate combines aggregate columns
    yt.insert_rows("//tmp/d", [{"k": 3, "total": 5}], aggregate=True)
    yt.insert_rows("//tmp/d", [{"k": 3, "total": 7}], aggregate=True)
    assert list(yt.lookup_rows("//tmp/d", [{"k": 3}], column_names=["total"])) == [{"total": 12}]
    yt.delete_rows("//tmp/d", [{"k": 2}])
    assert list(yt.lookup_rows("//tmp/d", [{"k": 2}, {"k": 1}])) == [
        {"k": 1, "v": "a2", "n": None, "total": None}
    ]
    assert list(yt.lookup_rows("//tmp/d", [{"k": 2}], keep_missing_rows=True)) == [None]
    with pytest.raises(YtResponseError):
        yt.insert_rows("//tmp/d", [{"v": "no key"}])
    with pytest.raises(YtResponseError):
        yt.insert_rows("//tmp/d", [{"k": 1, "unknown": 1}])


def test_select_rows_subset(yt_client):
    yt = yt_client
    make_sorted(yt)
    yt.insert_rows(
        "//tmp/d",
        [{"k": i, "v": "v%d" % (i % 3), "n": i * 10 if i != 4 else None} for i in range(10)],
    )
    sel = lambda q: list(yt.select_rows(q))  # noqa: E731
    assert [r["k"] for r in sel("* from [//tmp/d] where k >= 3 and k < 6")] == [3, 4, 5]
    assert [r["k"] for r in sel("k from [//tmp/d] where k in (1, 7, 42) or v = 'v2'")] == [
        1,
        2,
        5,
        7,
        8,
    ]
    assert sel("k, n from [//tmp/d] where is_null(n)") == [{"k": 4, "n": None}]
    assert [r["k"] for r in sel("k from [//tmp/d] where n is not null and k between 2 and 4")] == [
        2,
        3,
    ]
    assert [
        r["k"] for r in sel("k from [//tmp/d] where (k, v) > (7, 'a') order by k desc limit 2")
    ] == [9, 8]
    assert sel("k * 2 as kk from [//tmp/d] where k = 3") == [{"kk": 6}]
    got = sel("v, sum(k) as s, count(*) as c from [//tmp/d] group by v order by v limit 10")
    assert got == [
        {"v": "v0", "s": 18, "c": 4},
        {"v": "v1", "s": 12, "c": 3},
        {"v": "v2", "s": 15, "c": 3},
    ]
    assert sel("max(n) as m from [//tmp/d] group by 1") == [{"m": 90}]
    assert [r["k"] for r in sel("k from [//tmp/d] where is_prefix('v1', v) limit 2")] == [1, 4]
    with pytest.raises(YtResponseError):
        sel("k from [//tmp/d] order by k")  # ORDER BY without LIMIT


def test_snapshot_isolation_and_conflicts(yt_client, yt_emulator):
    yt = yt_client
    other = yt_emulator.client()
    make_sorted(yt)
    yt.insert_rows("//tmp/d", [{"k": 1, "v": "old"}])
    with tablet_tx(yt):
        assert list(yt.lookup_rows("//tmp/d", [{"k": 1}]))[0]["v"] == "old"
        other.insert_rows(
            "//tmp/d", [{"k": 1, "v": "new"}, {"k": 5, "v": "x"}]
        )  # committed after our start
        # reads are at the start timestamp
        assert list(yt.lookup_rows("//tmp/d", [{"k": 1}]))[0]["v"] == "old"
        assert [r["k"] for r in yt.select_rows("k from [//tmp/d]")] == [1]
        yt.insert_rows("//tmp/d", [{"k": 2, "v": "mine"}])
        # own writes are not visible to own reads
        assert list(yt.lookup_rows("//tmp/d", [{"k": 2}])) == []
    assert list(yt.lookup_rows("//tmp/d", [{"k": 2}]))[0]["v"] == "mine"
    # write-write conflict: both write key 1, the later commit fails with 1700
    t1 = yt.start_transaction(type="tablet", sticky=True)
    t2 = other.start_transaction(type="tablet", sticky=True)
    with yt.Transaction(transaction_id=t1, ping=False):
        yt.insert_rows("//tmp/d", [{"k": 1, "v": "t1"}])
    with other.Transaction(transaction_id=t2, ping=False):
        other.delete_rows("//tmp/d", [{"k": 1}])
    yt.commit_transaction(t1)
    with pytest.raises(YtResponseError) as e:
        other.commit_transaction(t2)
    assert e.value.is_tablet_transaction_lock_conflict()
    assert list(yt.lookup_rows("//tmp/d", [{"k": 1}]))[0]["v"] == "t1"
    # disjoint keys do not conflict
    t3 = yt.start_transaction(type="tablet", sticky=True)
    t4 = other.start_transaction(type="tablet", sticky=True)
    with yt.Transaction(transaction_id=t3, ping=False):
        yt.insert_rows("//tmp/d", [{"k": 10}])
    with other.Transaction(transaction_id=t4, ping=False):
        other.insert_rows("//tmp/d", [{"k": 11}])
    yt.commit_transaction(t3)
    other.commit_transaction(t4)
    # an aborted tablet transaction leaves nothing
    t5 = yt.start_transaction(type="tablet", sticky=True)
    with yt.Transaction(transaction_id=t5, ping=False):
        yt.insert_rows("//tmp/d", [{"k": 20}])
    yt.abort_transaction(t5)
    assert list(yt.lookup_rows("//tmp/d", [{"k": 20}])) == []


def test_row_limit_and_master_tx_refused(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.state.config["max_rows_per_transaction"] = 5
    make_sorted(yt)
    with pytest.raises(YtResponseError) as e:
        with tablet_tx(yt):
            yt.insert_rows("//tmp/d", [{"k": i} for i in range(6)])
    assert "too many rows" in str(e.value)
    assert list(yt.select_rows("k from [//tmp/d]")) == []
    with pytest.raises(yw.YtError):
        with yt.Transaction():  # master transaction
            yt.insert_rows("//tmp/d", [{"k": 1}])


def test_atomicity_modes(yt_client):
    yt = yt_client
    make_sorted(yt, "//tmp/na", atomicity="none")
    assert yt.get("//tmp/na/@atomicity") == "none"
    with pytest.raises(YtResponseError):
        with tablet_tx(yt):  # atomicity=full transaction on an atomicity=none table
            yt.insert_rows("//tmp/na", [{"k": 1}])
    yt.insert_rows("//tmp/na", [{"k": 1}], atomicity="none")
    with yt.Transaction(type="tablet", attributes={}):
        pass
    tx = yt.start_transaction(type="tablet", sticky=True, attributes={})
    yt.abort_transaction(tx)
    assert [r["k"] for r in yt.select_rows("k from [//tmp/na]")] == [1]


def test_ordered_tables(yt_client):
    yt = yt_client
    yt.create(
        "table",
        "//tmp/q",
        attributes={
            "dynamic": True,
            "tablet_count": 2,
            "schema": [{"name": "v", "type": "string"}],
        },
    )
    yt.mount_table("//tmp/q", sync=True)
    yt.insert_rows(
        "//tmp/q",
        [
            {"$tablet_index": 0, "v": "a"},
            {"$tablet_index": 0, "v": "b"},
            {"$tablet_index": 1, "v": "c"},
        ],
    )
    with tablet_tx(yt):
        yt.insert_rows("//tmp/q", [{"$tablet_index": 1, "v": "d"}])
    rows = list(yt.select_rows("[$tablet_index], [$row_index], v from [//tmp/q]"))
    assert rows == [
        {"$tablet_index": 0, "$row_index": 0, "v": "a"},
        {"$tablet_index": 0, "$row_index": 1, "v": "b"},
        {"$tablet_index": 1, "$row_index": 0, "v": "c"},
        {"$tablet_index": 1, "$row_index": 1, "v": "d"},
    ]
    yt.trim_rows("//tmp/q", 0, 1)
    rows = list(yt.select_rows("[$row_index], v from [//tmp/q] where [$tablet_index] = 0"))
    assert rows == [{"$row_index": 1, "v": "b"}]  # numbering survives trim
    yt.insert_rows("//tmp/q", [{"$tablet_index": 0, "v": "e"}])
    assert [
        r["$row_index"]
        for r in yt.select_rows("[$row_index] from [//tmp/q] where [$tablet_index] = 0")
    ] == [1, 2]
    assert yt.get("//tmp/q/@tablets")[0]["trimmed_row_count"] == 1
    with pytest.raises(YtResponseError):
        yt.delete_rows("//tmp/q", [{"v": "a"}])
    with pytest.raises(YtResponseError):
        yt.insert_rows(
            "//tmp/q",
            [{"$tablet_index": 7, "v": "x"}],
        )
    # remount keeps numbering
    yt.unmount_table("//tmp/q", sync=True)
    yt.mount_table("//tmp/q", sync=True)
    assert [
        r["$row_index"]
        for r in yt.select_rows("[$row_index] from [//tmp/q] where [$tablet_index] = 0")
    ] == [1, 2]
    # read_table of an ordered table with tablet index control attributes
    rows = list(
        yt.read_table(
            "//tmp/q",
            control_attributes={"enable_tablet_index": True},
            format=yw.YsonFormat(control_attributes_mode="iterator"),
        )
    )
    assert [r["v"] for r in rows] == ["b", "e", "c", "d"]


def test_read_sorted_dynamic_with_read_table(yt_client):
    yt = yt_client
    make_sorted(yt)
    yt.insert_rows("//tmp/d", [{"k": 2, "v": "b"}, {"k": 1, "v": "a"}])
    assert [r["k"] for r in yt.read_table("//tmp/d")] == [1, 2]


def test_alter_table(yt_client):
    yt = yt_client
    schema = yw.yson.to_yson_type(
        [
            {"name": "k", "type": "int64", "sort_order": "ascending"},
            {"name": "v", "type": "string"},
        ],
        attributes={"unique_keys": True},
    )
    yt.create("table", "//tmp/s", attributes={"schema": schema})
    yt.write_table("//tmp/s", [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])
    yt.alter_table("//tmp/s", dynamic=True)  # static -> dynamic keeps the rows
    yt.mount_table("//tmp/s", sync=True)
    assert list(yt.lookup_rows("//tmp/s", [{"k": 2}])) == [{"k": 2, "v": "b"}]
    with pytest.raises(YtResponseError):
        yt.alter_table("//tmp/s", schema=SORTED)  # only unmounted tables can be altered
    yt.unmount_table("//tmp/s", sync=True)
    with pytest.raises(YtResponseError):
        yt.alter_table(
            "//tmp/s", schema=[{"name": "k", "type": "int64", "sort_order": "ascending"}]
        )  # drops v
    yt.alter_table(
        "//tmp/s",
        schema=[
            {"name": "k", "type": "int64", "sort_order": "ascending"},
            {"name": "v", "type": "string"},
            {"name": "w", "type": "int64"},
        ],
    )
    yt.mount_table("//tmp/s", sync=True)
    yt.insert_rows("//tmp/s", [{"k": 3, "w": 5}])
    assert list(yt.select_rows("* from [//tmp/s] where k >= 2")) == [
        {"k": 2, "v": "b", "w": None},
        {"k": 3, "v": None, "w": 5},
    ]
