"""Static tables and operations through the real YtClient."""

import pytest
import yt.wrapper as yw
from yt.wrapper import YtResponseError

SCHEMA = [{"name": "k", "type": "int64", "required": True}, {"name": "v", "type": "string"}]


def test_strict_schema(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t", attributes={"schema": SCHEMA})
    with pytest.raises(YtResponseError) as e:
        yt.write_table("//tmp/t", [{"k": 1, "extra": 1}])
    assert e.value.contains_code(307)
    with pytest.raises(YtResponseError) as e:
        yt.write_table("//tmp/t", [{"k": "not an int"}])
    assert e.value.contains_code(307)
    with pytest.raises(YtResponseError) as e:
        yt.write_table("//tmp/t", [{"v": "missing required k"}])
    assert e.value.contains_code(307)
    yt.write_table("//tmp/t", [{"k": 1}])
    assert list(yt.read_table("//tmp/t")) == [{"k": 1, "v": None}] or list(
        yt.read_table("//tmp/t")
    ) == [{"k": 1}]
    # a table without a schema accepts anything (weak schema)
    yt.create("table", "//tmp/weak")
    yt.write_table("//tmp/weak", [{"anything": [1, {"x": 2}]}])
    assert yt.get("//tmp/weak/@schema_mode") == "weak"
    assert yt.get("//tmp/t/@schema_mode") == "strong"


def test_append_overwrite_and_chunks(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t", attributes={"schema": SCHEMA})
    yt.write_table("//tmp/t", [{"k": 1}, {"k": 2}])
    yt.write_table(yw.TablePath("//tmp/t", append=True), [{"k": 3}])
    assert yt.row_count("//tmp/t") == 3
    assert yt.get("//tmp/t/@chunk_count") == 2
    yt.write_table("//tmp/t", [{"k": 9}])
    assert [r["k"] for r in yt.read_table("//tmp/t")] == [9]
    assert yt.get("//tmp/t/@chunk_count") == 1
    # the client creates a missing table itself (create ignore_existing) before writing
    yt.write_table("//tmp/missing", [{"k": 1}])
    assert yt.get("//tmp/missing/@type") == "table"


def test_read_ranges_and_control_attributes(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t", attributes={"schema": SCHEMA})
    yt.write_table("//tmp/t", [{"k": i, "v": str(i)} for i in range(10)])
    assert [r["k"] for r in yt.read_table("//tmp/t[#2:#5]")] == [2, 3, 4]
    assert [r["k"] for r in yt.read_table("//tmp/t[#7]")] == [7]
    assert [r["k"] for r in yt.read_table("//tmp/t[#1:#2,#8:]")] == [1, 8, 9]
    assert list(yt.read_table("//tmp/t{v}[#0]")) == [{"v": "0"}]
    rows = yt.read_table(
        "//tmp/t[#3:#5]",
        control_attributes={"enable_row_index": True},
        format=yw.YsonFormat(control_attributes_mode="row_fields"),
    )
    assert [(r["@row_index"], r["k"]) for r in rows] == [(3, 3), (4, 4)]
    rows = yt.read_table(
        "//tmp/t[#1:#2,#6:#7]",
        control_attributes={"enable_row_index": True, "enable_range_index": True},
        format=yw.YsonFormat(control_attributes_mode="row_fields"),
    )
    assert [(r["@range_index"], r["@row_index"], r["k"]) for r in rows] == [(0, 1, 1), (1, 6, 6)]
    params = {}
    list(yt.read_table("//tmp/t[#4:#6]", response_parameters=params))
    assert params["start_row_index"] == 4 and params["approximate_row_count"] == 2


def test_sorted_tables(yt_client):
    yt = yt_client
    yt.create(
        "table",
        "//tmp/s",
        attributes={
            "schema": [
                {"name": "k", "type": "int64", "sort_order": "ascending"},
                {"name": "v", "type": "string"},
            ]
        },
    )
    yt.write_table("//tmp/s", [{"k": 1}, {"k": 3}])
    with pytest.raises(YtResponseError) as e:
        yt.write_table(yw.TablePath("//tmp/s", append=True), [{"k": 2}])
    assert e.value.is_sorting_order_violated()
    with pytest.raises(YtResponseError) as e:
        yt.write_table("//tmp/s", [{"k": 5}, {"k": 4}])
    assert e.value.is_sorting_order_violated()
    yt.write_table(yw.TablePath("//tmp/s", append=True), [{"k": 3}, {"k": 7}])
    assert yt.get("//tmp/s/@sorted_by") == ["k"]
    assert [r["k"] for r in yt.read_table("//tmp/s[3:]")] == [3, 3, 7]
    assert [r["k"] for r in yt.read_table("//tmp/s[(3)]")] == [3, 3]
    # <sorted_by=...> on overwrite of a weak table makes it sorted
    yt.create("table", "//tmp/w")
    yt.write_table(yw.TablePath("//tmp/w", sorted_by=["a"]), [{"a": 1}, {"a": 2}])
    assert yt.get("//tmp/w/@sorted_by") == ["a"]
    yt.write_table(
        "//tmp/w", [{"a": 2}, {"a": 1}]
    )  # plain overwrite drops sortedness of a weak table
    assert not yt.get("//tmp/w/@sorted")


def test_unique_keys(yt_client):
    yt = yt_client
    schema = yw.yson.to_yson_type(
        [{"name": "k", "type": "int64", "sort_order": "ascending"}],
        attributes={"unique_keys": True},
    )
    yt.create("table", "//tmp/u", attributes={"schema": schema})
    with pytest.raises(YtResponseError) as e:
        yt.write_table("//tmp/u", [{"k": 1}, {"k": 1}])
    assert e.value.contains_code(306)


def test_run_sort(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/in", attributes={"schema": SCHEMA})
    yt.write_table("//tmp/in", [{"k": 3, "v": "c"}, {"k": 1, "v": "a"}, {"k": 2, "v": "b"}])
    op = yt.run_sort("//tmp/in", "//tmp/out", sort_by=["k"])
    assert op.get_state() == "completed"
    assert [r["k"] for r in yt.read_table("//tmp/out")] == [1, 2, 3]
    assert yt.get("//tmp/out/@sorted_by") == ["k"]
    schema = yt.get("//tmp/out/@schema")
    assert [c["name"] for c in schema] == ["k", "v"] and schema[0]["sort_order"] == "ascending"
    # in place
    yt.run_sort("//tmp/in", sort_by=["v"])
    assert [r["v"] for r in yt.read_table("//tmp/in")] == ["a", "b", "c"]
    assert yt.get_operation(op.id)["state"] == "completed"
    assert yt.list_jobs(op.id)["jobs"] == []


def test_run_merge(yt_client):
    yt = yt_client
    sorted_schema = [
        {"name": "k", "type": "int64", "sort_order": "ascending"},
        {"name": "v", "type": "string"},
    ]
    for name, keys in (("a", [1, 4]), ("b", [2, 3])):
        yt.create("table", "//tmp/" + name, attributes={"schema": sorted_schema})
        yt.write_table("//tmp/" + name, [{"k": k, "v": name} for k in keys])
    yt.run_merge(["//tmp/a", "//tmp/b"], "//tmp/sorted", mode="sorted")
    assert [r["k"] for r in yt.read_table("//tmp/sorted")] == [1, 2, 3, 4]
    assert yt.get("//tmp/sorted/@sorted_by") == ["k"]
    yt.run_merge(["//tmp/a", "//tmp/b"], "//tmp/ordered", mode="ordered")
    assert [r["k"] for r in yt.read_table("//tmp/ordered")] == [1, 4, 2, 3]
    assert yt.get("//tmp/ordered/@chunk_count") == 2
    yt.run_merge(
        ["//tmp/a", "//tmp/b"], "//tmp/combined", mode="ordered", spec={"combine_chunks": True}
    )
    assert yt.get("//tmp/combined/@chunk_count") == 1
    yt.run_merge("//tmp/a", yw.TablePath("//tmp/combined", append=True))
    assert yt.row_count("//tmp/combined") == 6
    # sorted merge of an unsorted input fails the operation
    yt.create("table", "//tmp/unsorted")
    yt.write_table("//tmp/unsorted", [{"k": 2}, {"k": 1}])
    with pytest.raises(yw.YtOperationFailedError):
        yt.run_merge(["//tmp/unsorted"], "//tmp/bad", mode="sorted")


def test_operation_under_transaction(yt_client, yt_emulator):
    yt = yt_client
    outside = yt_emulator.client()
    yt.create("table", "//tmp/in")
    yt.write_table("//tmp/in", [{"k": 2}, {"k": 1}])
    with yt.Transaction():
        yt.create("table", "//tmp/out")
        yt.run_sort("//tmp/in", "//tmp/out", sort_by=["k"])
        assert [r["k"] for r in yt.read_table("//tmp/out")] == [1, 2]
        assert not outside.exists("//tmp/out")
    assert [r["k"] for r in outside.read_table("//tmp/out")] == [1, 2]


def test_erase(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t")
    yt.write_table("//tmp/t", [{"k": i} for i in range(5)])
    yt.run_erase("//tmp/t[#1:#3]")
    assert [r["k"] for r in yt.read_table("//tmp/t")] == [0, 3, 4]


def test_files(yt_client):
    yt = yt_client
    yt.write_file("//tmp/f", b"hello world")
    assert yt.read_file("//tmp/f").read() == b"hello world"


# -- appends that cost O(appended rows) ------------------------------------------------------
KEYED = [{"name": "k", "type": "int64", "sort_order": "ascending"}, {"name": "v", "type": "string"}]


def test_generated_rows_are_read_by_index_without_being_stored(yt_emulator, yt_client):
    yt = yt_client
    yt.create("table", "//tmp/big", attributes={"schema": KEYED})
    yt_emulator.add_generated_rows("//tmp/big", 10_000_000, lambda i: {"k": i, "v": str(i)})
    assert yt.row_count("//tmp/big") == 10_000_000
    assert list(yt.read_table("//tmp/big[#9999999:]")) == [{"k": 9999999, "v": "9999999"}]
    assert [r["k"] for r in yt.read_table("//tmp/big[(5000000):(5000002)]")] == [5000000, 5000001]
    # a sorted append compares with the last row only
    yt.write_table(yw.TablePath("//tmp/big", append=True), [{"k": 10_000_000, "v": "x"}])
    with pytest.raises(YtResponseError) as e:
        yt.write_table(yw.TablePath("//tmp/big", append=True), [{"k": 5, "v": "x"}])
    assert e.value.contains_code(301)
    assert yt.row_count("//tmp/big") == 10_000_001


def test_merge_and_concatenate_append_to_a_table_and_keep_its_node(yt_client):
    yt = yt_client
    yt.create("table", "//tmp/t", attributes={"schema": SCHEMA})
    yt.write_table("//tmp/t", [{"k": 1}])
    yt.set("//tmp/t/@note", "kept")
    node_id = yt.get("//tmp/t/@id")
    yt.create("table", "//tmp/s", attributes={"schema": SCHEMA})
    yt.write_table("//tmp/s", [{"k": 2}, {"k": 3}])
    with yt.Transaction():
        yt.concatenate(["//tmp/s"], yw.TablePath("//tmp/t", append=True))
        yt.run_merge("//tmp/s", yw.TablePath("//tmp/t", append=True), mode="ordered")
    assert [r["k"] for r in yt.read_table("//tmp/t")] == [1, 2, 3, 2, 3]
    assert yt.get("//tmp/t/@id") == node_id and yt.get("//tmp/t/@note") == "kept"


def test_sorted_merge_appends_after_the_last_key_only(yt_client):
    yt = yt_client
    for path, keys in (("//tmp/t", [1, 5]), ("//tmp/after", [5, 7]), ("//tmp/before", [3])):
        yt.create("table", path, attributes={"schema": KEYED})
        yt.write_table(path, [{"k": k} for k in keys])
    yt.run_merge("//tmp/after", yw.TablePath("//tmp/t", append=True), mode="sorted")
    assert [r["k"] for r in yt.read_table("//tmp/t")] == [1, 5, 5, 7]
    with pytest.raises(yw.YtOperationFailedError):
        yt.run_merge("//tmp/before", yw.TablePath("//tmp/t", append=True), mode="sorted")
    # the way out for overlapping keys: a sorted merge into the table itself (same node)
    node_id = yt.get("//tmp/t/@id")
    yt.run_merge(["//tmp/t", "//tmp/before"], "//tmp/t", mode="sorted")
    assert [r["k"] for r in yt.read_table("//tmp/t")] == [1, 3, 5, 5, 7]
    assert yt.get("//tmp/t/@id") == node_id and yt.get("//tmp/t/@sorted_by") == ["k"]
