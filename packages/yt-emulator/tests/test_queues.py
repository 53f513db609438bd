"""Ordered dynamic tables read as queues (pull_queue, get_tablet_infos, trim_rows), through the
real YtClient.  Shapes follow ytsaurus' own integration tests of ``pull_queue`` (rows carry
``$tablet_index`` and ``$row_index``) and the client's ``get_tablet_infos`` (``{"tablets": [...]}``
with ``total_row_count``/``trimmed_row_count``)."""

import pytest
from eosink_yt_emulator.queue_tables import consumer_offsets, create_consumer, create_queue
from yt.wrapper import YtResponseError

SCHEMA = [{"name": "v", "type": "string"}, {"name": "n", "type": "int64"}]


def make_queue(yt, path="//tmp/q", tablets=4, mount=True):
    create_queue(yt, path, SCHEMA, tablets, mount=mount)


def fill(yt, path="//tmp/q", per_tablet=5, tablets=4):
    yt.insert_rows(
        path,
        [
            {"$tablet_index": t, "v": f"{t}-{i}", "n": i}
            for t in range(tablets)
            for i in range(per_tablet)
        ],
    )


def test_pull_queue_reads_one_tablet_from_an_offset(yt_client):
    yt = yt_client
    make_queue(yt)
    fill(yt)
    rows = list(yt.pull_queue("//tmp/q", offset=3, partition_index=2))
    assert rows == [
        {"$tablet_index": 2, "$row_index": 3, "v": "2-3", "n": 3},
        {"$tablet_index": 2, "$row_index": 4, "v": "2-4", "n": 4},
    ]
    rows = list(yt.pull_queue("//tmp/q", offset=0, partition_index=1, max_row_count=2))
    assert [r["$row_index"] for r in rows] == [0, 1]
    assert list(yt.pull_queue("//tmp/q", offset=5, partition_index=1)) == []
    assert list(yt.pull_queue("//tmp/q", offset=99, partition_index=1)) == []


def test_pull_queue_default_batch_is_1000_rows(yt_client):
    yt = yt_client
    make_queue(yt, tablets=1)
    yt.insert_rows("//tmp/q", [{"v": "x", "n": i} for i in range(1200)])
    assert len(list(yt.pull_queue("//tmp/q", offset=0, partition_index=0))) == 1000


def test_trimmed_rows_are_gone_and_numbering_stays(yt_client):
    yt = yt_client
    make_queue(yt)
    fill(yt)
    yt.trim_rows("//tmp/q", 1, 3)
    rows = list(yt.pull_queue("//tmp/q", offset=0, partition_index=1))
    assert [r["$row_index"] for r in rows] == [3, 4]  # the gap shows the trim
    infos = yt.get_tablet_infos("//tmp/q", [0, 1])["tablets"]
    assert [(i["total_row_count"], i["trimmed_row_count"]) for i in infos] == [(5, 0), (5, 3)]
    yt.insert_rows("//tmp/q", [{"$tablet_index": 1, "v": "new", "n": 9}])
    info = yt.get_tablet_infos("//tmp/q", [1])["tablets"][0]
    assert (info["total_row_count"], info["trimmed_row_count"]) == (6, 3)
    assert info["last_write_timestamp"] > 0
    # select_rows over the same tablet agrees with pull_queue
    selected = list(
        yt.select_rows(
            "[$row_index], v from [//tmp/q] where [$tablet_index] = 1 and [$row_index] >= 4"
        )
    )
    assert selected == [{"$row_index": 4, "v": "1-4"}, {"$row_index": 5, "v": "new"}]


def test_queue_errors(yt_emulator):
    # The client retries "tablet not mounted" for dynamic table reads (a mount may be under
    # way); without retries the error itself is visible.
    yt = yt_emulator.client(dynamic_table_retries={"enable": False})
    make_queue(yt, mount=False)
    with pytest.raises(YtResponseError) as e:
        list(yt.pull_queue("//tmp/q", offset=0, partition_index=0))
    assert e.value.is_tablet_not_mounted()
    yt.mount_table("//tmp/q", sync=True)
    with pytest.raises(YtResponseError, match="Invalid tablet index"):
        list(yt.pull_queue("//tmp/q", offset=0, partition_index=4))
    with pytest.raises(YtResponseError, match="Invalid tablet index"):
        yt.get_tablet_infos("//tmp/q", [4])
    yt.create(
        "table",
        "//tmp/sorted",
        attributes={
            "dynamic": True,
            "schema": [{"name": "k", "type": "int64", "sort_order": "ascending"}, *SCHEMA],
        },
    )
    yt.mount_table("//tmp/sorted", sync=True)
    with pytest.raises(YtResponseError, match="ordered dynamic table"):
        list(yt.pull_queue("//tmp/sorted", offset=0, partition_index=0))
    yt.create("table", "//tmp/static", attributes={"schema": SCHEMA})
    with pytest.raises(YtResponseError, match="not a dynamic table"):
        list(yt.pull_queue("//tmp/static", offset=0, partition_index=0))
    with pytest.raises(YtResponseError) as e:
        list(yt.pull_queue("//tmp/missing", offset=0, partition_index=0))
    assert e.value.is_resolve_error()


def test_consumer_registration_listed_with_cluster_paths(yt_client):
    yt = yt_client
    make_queue(yt)
    create_consumer(yt, "//tmp/c")
    assert yt.list_queue_consumer_registrations(consumer_path="//tmp/c") == []
    yt.register_queue_consumer("//tmp/q", "//tmp/c", vital=True)
    [registration] = yt.list_queue_consumer_registrations(queue_path="//tmp/q")
    assert str(registration["queue_path"]) == "//tmp/q"
    assert registration["queue_path"].attributes == {"cluster": "primary"}
    assert str(registration["consumer_path"]) == "//tmp/c" and bool(registration["vital"])
    assert yt.list_queue_consumer_registrations(queue_path="//tmp/other") == []
    yt.unregister_queue_consumer("//tmp/q", "//tmp/c")
    assert yt.list_queue_consumer_registrations() == []
    with pytest.raises(YtResponseError, match="Failed to resolve consumer path"):
        yt.register_queue_consumer("//tmp/q", "//tmp/missing", vital=False)


def test_advance_consumer_writes_the_offset_row_and_checks_the_old_offset(yt_client):
    yt = yt_client
    create_consumer(yt, "//tmp/c")
    # As in ytsaurus' test_advance_consumer: no registration needed, a missing row is offset 0.
    yt.advance_consumer("//tmp/c", "//tmp/q", partition_index=1, old_offset=0, new_offset=3)
    assert consumer_offsets(yt, "//tmp/c") == {("//tmp/q", 1): 3}
    with pytest.raises(YtResponseError) as conflict:
        yt.advance_consumer("//tmp/c", "//tmp/q", partition_index=1, old_offset=4, new_offset=5)
    assert conflict.value.contains_code(3100)
    yt.advance_consumer("//tmp/c", "//tmp/q", partition_index=1, old_offset=None, new_offset=7)
    yt.advance_queue_consumer("//tmp/c", "//tmp/q", partition_index=0, old_offset=0, new_offset=2)
    assert consumer_offsets(yt, "//tmp/c") == {("//tmp/q", 1): 7, ("//tmp/q", 0): 2}
    [row] = yt.select_rows("queue_cluster from [//tmp/c] where partition_index = 0u")
    assert row == {"queue_cluster": "primary"}


def test_pull_consumer_needs_a_registration_and_reads_from_the_offset(yt_client):
    yt = yt_client
    make_queue(yt, tablets=1)
    fill(yt, per_tablet=3, tablets=1)
    create_consumer(yt, "//tmp/c")
    with pytest.raises(YtResponseError, match="not registered"):
        list(yt.pull_consumer("//tmp/c", "//tmp/q", offset=0, partition_index=0))
    yt.register_queue_consumer("//tmp/q", "//tmp/c", vital=False)
    rows = list(yt.pull_consumer("//tmp/c", "//tmp/q", offset=1, partition_index=0))
    assert [r["$row_index"] for r in rows] == [1, 2]
    yt.advance_consumer("//tmp/c", "//tmp/q", partition_index=0, old_offset=None, new_offset=2)
    rows = list(yt.pull_consumer("//tmp/c", "//tmp/q", offset=None, partition_index=0))
    assert [r["$row_index"] for r in rows] == [2]
