"""A batch costs O(batch): appends keep the table node and never read the table's rows
(unsorted targets, and sorted targets whose new keys sort after the table's last key)."""

from __future__ import annotations

import pyarrow as pa
from conftest import TABLE
from yt_static_helpers import leftovers, open_transactions, read_rows

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner


def batch(ids):
    return pa.record_batch(
        {"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids])}
    )


def run(sink, batch_id, *parts, writer="w"):
    ctx = BatchContext(sink="yt-static", writer_id=writer, batch_id=batch_id)
    return run_batch(sink, ctx, parts[0].schema, LocalRunner([[p] for p in parts]))


def inputs_of_operations(emulator) -> list[list[str]]:
    """The input tables of every operation started since the log was cleared."""
    out = []
    for entry in emulator.requests.of("start_operation"):
        paths = entry["params"]["spec"].get("input_table_paths") or []
        out.append([str(p) for p in (paths if isinstance(paths, list) else [paths])])
    return out


def moves_onto_the_table(emulator) -> list[dict]:
    return [
        e for e in emulator.requests.of("move") if str(e["params"].get("destination_path")) == TABLE
    ]


def test_unsorted_append_keeps_the_node_and_reads_only_the_batch(make_sink, yt, yt_emulator):
    run(make_sink(), 0, batch([1, 2]))
    yt.set(f"{TABLE}/@owner_note", "keep me")
    node_id = yt.get(f"{TABLE}/@id")
    for batch_id, combine in ((1, True), (2, False)):
        yt_emulator.requests.clear()
        run(make_sink(combine_chunks=combine), batch_id, batch([2 + batch_id]))
        assert all(TABLE not in inputs for inputs in inputs_of_operations(yt_emulator))
        assert moves_onto_the_table(yt_emulator) == []
    assert yt.get(f"{TABLE}/@id") == node_id and yt.get(f"{TABLE}/@owner_note") == "keep me"
    assert sorted(r["id"] for r in read_rows(yt, TABLE)) == [1, 2, 3, 4]
    assert leftovers(yt) == [] and open_transactions(yt) == []


def test_sorted_append_after_the_last_key_does_not_read_the_table(make_sink, yt, yt_emulator):
    sink = make_sink(key_columns=("id",))
    run(sink, 0, batch([3, 1]), batch([2]))
    node_id = yt.get(f"{TABLE}/@id")
    yt_emulator.requests.clear()
    run(sink, 1, batch([6, 4]), batch([5]))
    assert all(TABLE not in inputs for inputs in inputs_of_operations(yt_emulator))
    assert moves_onto_the_table(yt_emulator) == []
    assert [r["id"] for r in read_rows(yt, TABLE)] == [1, 2, 3, 4, 5, 6]
    assert yt.get(f"{TABLE}/@sorted_by") == ["id"] and yt.get(f"{TABLE}/@id") == node_id


def test_sorted_batch_overlapping_the_table_merges_in_place(make_sink, yt, yt_emulator):
    sink = make_sink(key_columns=("id",))
    run(sink, 0, batch([2, 8]))
    yt.set(f"{TABLE}/@owner_note", "keep me")
    node_id = yt.get(f"{TABLE}/@id")
    yt_emulator.requests.clear()
    run(sink, 1, batch([9, 1]), batch([5]))
    assert any(TABLE in inputs for inputs in inputs_of_operations(yt_emulator))
    assert [r["id"] for r in read_rows(yt, TABLE)] == [1, 2, 5, 8, 9]
    assert yt.get(f"{TABLE}/@id") == node_id and yt.get(f"{TABLE}/@owner_note") == "keep me"
    assert yt.get(f"{TABLE}/@sorted_by") == ["id"]
    assert leftovers(yt) == [] and open_transactions(yt) == []
