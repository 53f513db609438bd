"""A sorted dynamic table's ``@row_count`` is kept as rows are written, not counted on read.

YT keeps a table's row count with the table; the client reads it, or any other attribute, in
one cheap request. The emulator computes every system attribute of a node on each ``get``, so a
count made by scanning the table turned each attribute read of a large table (a sink reads
``@type``, ``@dynamic``, ``@schema`` of its output at every batch) into a pass over every row.
"""

from eosink_yt_emulator.dyntable import DynTable

SCHEMA = [
    {"name": "k", "type": "int64", "sort_order": "ascending"},
    {"name": "v", "type": "string"},
]


def test_row_count_follows_inserts_updates_and_deletes(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/counted", attributes={"dynamic": True, "schema": SCHEMA})
    yt.mount_table("//tmp/counted", sync=True)
    assert yt.get("//tmp/counted/@row_count") == 0
    yt.insert_rows("//tmp/counted", [{"k": i, "v": "a"} for i in range(5)])
    yt.insert_rows("//tmp/counted", [{"k": 1, "v": "b"}, {"k": 7, "v": "c"}])  # update + new
    assert yt.get("//tmp/counted/@row_count") == 6
    yt.delete_rows("//tmp/counted", [{"k": 0}, {"k": 7}, {"k": 42}])  # 42: never written
    assert yt.get("//tmp/counted/@row_count") == 4
    yt.delete_rows("//tmp/counted", [{"k": 0}])  # already deleted
    yt.insert_rows("//tmp/counted", [{"k": 0, "v": "again"}])
    assert yt.get("//tmp/counted/@row_count") == 5
    assert yt.get("//tmp/counted/@row_count") == len(list(yt.select_rows("* from [//tmp/counted]")))


def test_reading_an_attribute_does_not_scan_the_table(yt_client, monkeypatch):
    yt = yt_client
    yt.create("table", "//tmp/big", attributes={"dynamic": True, "schema": SCHEMA})
    yt.mount_table("//tmp/big", sync=True)
    yt.insert_rows("//tmp/big", [{"k": i, "v": "x"} for i in range(100)])

    def scan(self, ts):  # noqa: ANN001, ANN202
        raise AssertionError("an attribute read scanned the table")

    monkeypatch.setattr(DynTable, "scan", scan)
    assert yt.get("//tmp/big/@dynamic")
    assert yt.get("//tmp/big/@row_count") == 100
