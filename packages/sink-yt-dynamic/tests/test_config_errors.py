"""Every row of the "Common configuration errors" table of SPYT's idempotent receiver
documentation, caught before data is damaged.

Each test commits one good batch first, then runs the misconfigured one and checks the error
(which names the fix) and that the table still holds exactly the good batch.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import OUT, make_sink_for, rows_schema, table_rows

from eosink.plugin import BatchContext, ConfigurationError
from eosink.testing import run_batch
from eosink.testing import LocalRunner
from eosink_yt_dynamic import SPYT_ROW_INDEX, SPYT_TABLET_INDEX, create_output_table
from eosink_yt_dynamic.tables import ensure_dynamic_table


def rows(
    tablet: int, start: int, n: int, *, queue: str | None = None, id_base: int = 0
) -> pa.RecordBatch:
    data = {
        "tablet_index": pa.array([tablet] * n, pa.int64()),
        "row_index": pa.array(range(start, start + n), pa.int64()),
        "id": pa.array([id_base + start + i for i in range(n)], pa.int64()),
        "name": pa.array([f"r{start + i}" for i in range(n)]),
        "amount": pa.array([float(i) for i in range(n)]),
    }
    if queue is not None:
        data = {"queue_id": pa.array([queue] * n), **data}
    return pa.record_batch(data)


def run(sink, batch_id: int, partitions: list[list[pa.RecordBatch]], *, mode: str = "append"):
    schema = next(b.schema for p in partitions for b in p)
    ctx = BatchContext(sink=sink.name, writer_id="w", batch_id=batch_id, query_id="q", mode=mode)
    return run_batch(sink, ctx, schema, LocalRunner(partitions))


@pytest.fixture
def good(yt_emulator, yt, out_table):
    """The table after one good batch; returns its rows."""
    run(make_sink_for(yt_emulator), 0, [[rows(0, 0, 5)], [rows(1, 0, 5)]])
    return table_rows(yt)


def test_one_input_row_several_output_rows_in_a_partition(yt_emulator, yt, good):
    exploded = rows(0, 5, 3)
    exploded = (
        pa.concat_tables([pa.Table.from_batches([exploded])] * 2).combine_chunks().to_batches()[0]
    )
    with pytest.raises(ConfigurationError, match="repeat the key.*row_index=5.*one-to-one"):
        run(make_sink_for(yt_emulator), 1, [[exploded]])
    assert table_rows(yt) == good
    # With another, good partition before it: that one's rows are in (rows of a failed batch,
    # like after a crash), the offending partition wrote nothing, no committed row changed.
    with pytest.raises(ConfigurationError, match="repeat the key"):
        run(make_sink_for(yt_emulator), 1, [[rows(1, 5, 3)], [exploded]])
    held = table_rows(yt)
    assert [r for r in held if r not in good] == rows(1, 5, 3).to_pylist()


def test_duplicate_keys_across_partitions_are_refused_before_writing_them(yt_emulator, yt, good):
    first = rows(0, 5, 4, id_base=100)
    second = rows(0, 7, 4, id_base=200)  # keys (0,7), (0,8) again, with other data
    with pytest.raises(ConfigurationError, match="row_index=7.*two different partitions"):
        run(make_sink_for(yt_emulator), 1, [[first], [second]])
    held = table_rows(yt)
    # the second partition wrote nothing: no row was overwritten by another of the batch
    assert [r for r in held if r["id"] >= 200] == []
    assert [r for r in held if r not in good] == first.to_pylist()


def test_duplicate_keys_across_chunks_of_one_partition(yt_emulator, yt, good):
    sink = make_sink_for(yt_emulator, rows_per_transaction=4)
    with pytest.raises(ConfigurationError, match="two different partitions \\(or chunks\\)"):
        run(sink, 1, [[rows(0, 5, 4), rows(0, 6, 2)]])
    assert [r["row_index"] for r in table_rows(yt) if r not in good] == [5, 6, 7, 8]


def test_duplicate_check_can_be_switched_off(yt_emulator, yt, good):
    sink = make_sink_for(yt_emulator, check_duplicates=False)
    doubled = pa.Table.from_batches([rows(0, 5, 2)] * 2).combine_chunks().to_batches()[0]
    assert run(sink, 1, [[doubled]]).status == "committed"
    assert len(table_rows(yt)) == len(good) + 2


def test_lost_service_columns(yt_emulator, yt, good):
    lost = rows(0, 5, 3).drop_columns(["tablet_index", "row_index"])
    with pytest.raises(ConfigurationError, match="include_service_columns"):
        run(make_sink_for(yt_emulator), 1, [[lost]])
    assert table_rows(yt) == good


def test_spyt_service_columns_are_renamed(yt_emulator, yt, good):
    spyt = rows(0, 5, 3).rename_columns([SPYT_TABLET_INDEX, SPYT_ROW_INDEX, "id", "name", "amount"])
    assert run(make_sink_for(yt_emulator), 1, [[spyt]]).status == "committed"
    assert [r["row_index"] for r in table_rows(yt) if r["tablet_index"] == 0] == list(range(8))


def test_union_of_queues_without_queue_id_collides(yt_emulator, yt, good):
    queue_a, queue_b = rows(0, 5, 3, id_base=100), rows(0, 5, 3, id_base=200)
    union = pa.Table.from_batches([queue_a, queue_b]).combine_chunks().to_batches()[0]
    with pytest.raises(ConfigurationError, match="with_queue_id"):
        run(make_sink_for(yt_emulator), 1, [[union]])
    assert table_rows(yt) == good


def test_union_of_queues_without_queue_id_collides_across_batches(yt_emulator, yt, out_table):
    """The colliding keys fall in two batches of one writer: batch 0 holds queue A's rows 0..4,
    batch 1 A's rows 5..9 and queue B's rows 0..4 (B's consumer started later). B's rows must
    not replace A's first five; the batch is refused before they are written."""
    sink = make_sink_for(yt_emulator)
    queue_a = rows(0, 0, 10, id_base=100)
    assert run(sink, 0, [[queue_a.slice(0, 5)]]).status == "committed"
    before = table_rows(yt)
    queue_b = rows(0, 0, 5, id_base=200)
    union = pa.Table.from_batches([queue_a.slice(5), queue_b]).combine_chunks().to_batches()[0]
    with pytest.raises(ConfigurationError, match="row_index=0.*earlier batch.*with_queue_id"):
        run(sink, 1, [[union]])
    assert table_rows(yt) == before  # nothing of A's overwritten, nothing of the chunk written
    # B's rows in a partition of their own: A's rows 5..9 may go in, A's 0..4 stay
    with pytest.raises(ConfigurationError, match="earlier batch.*with_queue_id"):
        run(sink, 1, [[queue_a.slice(5)], [queue_b]])
    assert [r["id"] for r in table_rows(yt)] == list(range(100, 110))
    assert sink.is_committed(BatchContext(sink.name, "w", 1)) is None


@pytest.mark.parametrize("queue", [None, "//q/a"])
def test_one_input_row_several_output_rows_across_batches(yt_emulator, yt, queue):
    """A one-to-many query whose outputs for one source row land in different batches (a
    stream-stream join matching a later row of the other stream): the second output of source
    row 3 must not replace the first, with or without a queue id in the key."""
    create_output_table(yt, OUT, rows_schema(queue_id=queue is not None), queue_id=bool(queue))
    sink = make_sink_for(yt_emulator)
    assert run(sink, 0, [[rows(0, 0, 5, queue=queue)]]).status == "committed"
    before = table_rows(yt)
    second = rows(0, 3, 1, queue=queue, id_base=500)  # source row 3 again, another output
    with pytest.raises(ConfigurationError, match="row_index=3.*earlier batch.*one-to-one"):
        run(sink, 1, [[rows(0, 5, 3, queue=queue)], [second]])
    assert [r for r in table_rows(yt) if r["row_index"] < 5] == before


def test_rows_an_earlier_batch_wrote_with_the_same_values_are_allowed(yt_emulator, yt, good):
    """A consumer moved back re-reads rows the writer already wrote: the same values under the
    same keys, which is harmless."""
    sink = make_sink_for(yt_emulator)
    assert run(sink, 1, [[rows(0, 0, 8).slice(3)]]).status == "committed"
    assert [r for r in table_rows(yt) if r["row_index"] < 5] == good


def test_queue_id_in_rows_but_not_in_the_key(yt_emulator, yt, good):
    with pytest.raises(ConfigurationError, match="first key column.*queue_id=True"):
        run(make_sink_for(yt_emulator), 1, [[rows(0, 5, 3, queue="//q/a")]])
    assert table_rows(yt) == good


def test_queue_id_in_the_key_but_not_in_rows(yt_emulator, yt):
    create_output_table(yt, OUT, rows_schema(), queue_id=True)
    run(make_sink_for(yt_emulator), 0, [[rows(0, 0, 3, queue="//q/a")]])
    before = table_rows(yt)
    with pytest.raises(ConfigurationError, match="with_queue_id"):
        run(make_sink_for(yt_emulator), 1, [[rows(0, 5, 3)]])
    assert table_rows(yt) == before


def test_two_queues_with_queue_id_do_not_collide(yt_emulator, yt):
    create_output_table(yt, OUT, rows_schema(), queue_id=True)
    a, b = rows(0, 0, 3, queue="//q/a", id_base=100), rows(0, 0, 3, queue="//q/b", id_base=200)
    run(make_sink_for(yt_emulator), 0, [[a], [b]])
    assert len(table_rows(yt)) == 6


def test_null_key_values(yt_emulator, yt, good):
    nulls = rows(0, 5, 3).set_column(1, "row_index", pa.array([5, None, 7], pa.int64()))
    with pytest.raises(ConfigurationError, match="null 'row_index'.*include_service_columns"):
        run(make_sink_for(yt_emulator), 1, [[nulls], [rows(1, 5, 2)]])
    assert table_rows(yt) == good


def test_output_table_missing(yt_emulator, yt):
    with pytest.raises(ConfigurationError, match="does not exist.*create_output_table"):
        run(make_sink_for(yt_emulator), 0, [[rows(0, 0, 3)]])
    assert (
        run(make_sink_for(yt_emulator, create_table=True), 0, [[rows(0, 0, 3)]]).status
        == "committed"
    )
    assert len(table_rows(yt)) == 3


def test_output_table_not_dynamic(yt_emulator, yt):
    yt.create(
        "table",
        OUT,
        recursive=True,
        attributes={
            "schema": [
                {"name": "tablet_index", "type": "int64", "sort_order": "ascending"},
                {"name": "row_index", "type": "int64", "sort_order": "ascending"},
                {"name": "id", "type": "int64"},
            ]
        },
    )
    yt.write_table(OUT, [{"tablet_index": 0, "row_index": 0, "id": 1}])
    with pytest.raises(ConfigurationError, match="static table.*create_output_table"):
        run(make_sink_for(yt_emulator), 0, [[rows(0, 0, 3)]])
    assert list(yt.read_table(OUT)) == [{"tablet_index": 0, "row_index": 0, "id": 1}]


def test_output_table_not_sorted(yt_emulator, yt):
    yt.create(
        "table",
        OUT,
        recursive=True,
        attributes={
            "dynamic": True,
            "schema": [
                {"name": c, "type": t}
                for c, t in [
                    ("tablet_index", "int64"),
                    ("row_index", "int64"),
                    ("id", "int64"),
                    ("name", "string"),
                    ("amount", "double"),
                ]
            ],
        },
    )
    yt.mount_table(OUT, sync=True)
    with pytest.raises(ConfigurationError, match="ordered dynamic table.*duplicate"):
        run(make_sink_for(yt_emulator), 0, [[rows(0, 0, 3)]])
    assert list(yt.select_rows(f"* from [{OUT}]")) == []


def test_output_table_not_mounted(yt_emulator, yt, good):
    yt.unmount_table(OUT, sync=True)
    with pytest.raises(ConfigurationError, match="not mounted.*mount-table"):
        run(make_sink_for(yt_emulator), 1, [[rows(0, 5, 3)]])
    yt.mount_table(OUT, sync=True)
    assert table_rows(yt) == good
    assert run(make_sink_for(yt_emulator), 1, [[rows(0, 5, 3)]]).status == "committed"


def test_create_table_option_mounts_an_unmounted_table(yt_emulator, yt, good):
    yt.unmount_table(OUT, sync=True)
    sink = make_sink_for(yt_emulator, create_table=True)
    assert run(sink, 1, [[rows(0, 5, 3)]]).status == "committed"


def test_key_does_not_start_with_the_source_coordinates(yt_emulator, yt):
    ensure_dynamic_table(
        yt,
        OUT,
        [
            {"name": "id", "type": "int64", "sort_order": "ascending"},
            {"name": "tablet_index", "type": "int64"},
            {"name": "row_index", "type": "int64"},
            {"name": "name", "type": "string"},
            {"name": "amount", "type": "double"},
        ],
    )
    with pytest.raises(ConfigurationError, match="does not start with the source coordinates"):
        run(make_sink_for(yt_emulator), 0, [[rows(0, 0, 3)]])
    assert list(yt.select_rows(f"* from [{OUT}]")) == []


def test_renamed_key_columns_need_the_option(yt_emulator, yt):
    schema = pa.schema(
        [("tablet_idx", pa.int64()), ("row_idx", pa.int64())] + list(rows_schema())[2:]
    )
    create_output_table(
        yt, OUT, schema, tablet_index_column="tablet_idx", row_index_column="row_idx"
    )
    spyt = rows(0, 0, 3).rename_columns([SPYT_TABLET_INDEX, SPYT_ROW_INDEX, "id", "name", "amount"])
    with pytest.raises(ConfigurationError, match="tablet_index_column/row_index_column"):
        run(make_sink_for(yt_emulator), 0, [[spyt]])
    sink = make_sink_for(yt_emulator, tablet_index_column="tablet_idx", row_index_column="row_idx")
    assert run(sink, 0, [[spyt]]).status == "committed"
    assert [r["row_idx"] for r in table_rows(yt)] == [0, 1, 2]


def test_extra_columns_and_complete_mode(yt_emulator, yt, good):
    extra = rows(0, 5, 3).append_column("other", pa.array([1, 2, 3]))
    with pytest.raises(ConfigurationError, match="not in the table schema.*alter_table"):
        run(make_sink_for(yt_emulator), 1, [[extra]])
    with pytest.raises(ConfigurationError, match="outputMode\\('append'\\)"):
        run(make_sink_for(yt_emulator), 1, [[rows(0, 5, 3)]], mode="complete")
    assert table_rows(yt) == good


def test_bad_options_name_the_fix():
    with pytest.raises(ConfigurationError, match="absolute Cypress path"):
        make_sink_for(type("E", (), {"url": "x", "client_config": lambda self: {}})(), path="out")
    with pytest.raises(ConfigurationError, match="100000"):
        make_sink_for(
            type("E", (), {"url": "x", "client_config": lambda self: {}})(),
            rows_per_transaction=200_000,
        )
