"""Two writers (queries) into one table whose keys have no ``queue_id``.

Each queue numbers its rows from 0, so two queries reading different queues into one table
without a queue id write the same ``(tablet_index, row_index)`` keys, possibly only in later
batches (one consumer started further ahead). Every proof records the source rows its writer
covered so far; a writer whose rows fall inside another writer's and differ from them is
refused.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import OUT, make_sink_for, rows_schema, table_rows

from eosink.plugin import BatchContext, ConfigurationError, hookimpl
from eosink.testing import run_batch
from eosink.testing import LocalRunner
from eosink_yt_dynamic import create_output_table

PROGRESS = f"{OUT}_eosink_progress"


def rows(first: int, n: int, *, id_base: int, queue: str | None = None) -> pa.RecordBatch:
    data = {
        "tablet_index": pa.array([0] * n, pa.int64()),
        "row_index": pa.array(range(first, first + n), pa.int64()),
        "id": pa.array(range(id_base + first, id_base + first + n), pa.int64()),
        "name": pa.array(["x"] * n),
        "amount": pa.array([1.0] * n),
    }
    if queue is not None:
        data = {"queue_id": pa.array([queue] * n), **data}
    return pa.record_batch(data)


def run(sink, writer: str, batch: int, batches: list[pa.RecordBatch], plugins=()):
    ctx = BatchContext(sink=sink.name, writer_id=writer, batch_id=batch, query_id=writer)
    return run_batch(sink, ctx, batches[0].schema, LocalRunner([batches]), plugins=plugins)


A, B = 0, 1_000_000  # id bases of the two queues' rows


def test_a_writer_reaching_rows_of_another_writer_is_refused_before_writing(yt_emulator, yt):
    """Queue b's consumer starts at row 100; queue a's query reaches row 100 two batches later."""
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)
    assert run(sink, "a", 0, [rows(0, 50, id_base=A)]).status == "committed"
    assert run(sink, "b", 0, [rows(100, 50, id_base=B)]).status == "committed"
    assert run(sink, "a", 1, [rows(50, 50, id_base=A)]).status == "committed"
    before = table_rows(yt)
    with pytest.raises(ConfigurationError, match="writer 'b'.*row_index=100.*with_queue_id"):
        run(sink, "a", 2, [rows(90, 20, id_base=A)])
    assert table_rows(yt) == before  # nothing of b's overwritten, nothing of the batch written
    assert sink.is_committed(BatchContext(sink.name, "a", 2)) is None


def test_writers_in_flight_at_once_the_later_commit_is_refused(yt_emulator, yt):
    """b runs a whole batch over a's rows while a's batch is between its writes and its commit:
    neither saw the other before writing, so the check falls to the commits."""
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)

    class RivalBeforeCommit:
        @hookimpl(tryfirst=True)
        def commit(self, ctx):
            assert run(sink, "b", 0, [rows(3, 5, id_base=B)]).status == "committed"

    with pytest.raises(ConfigurationError, match="writer 'b'.*row_index 3..4.*with_queue_id"):
        run(sink, "a", 0, [rows(0, 5, id_base=A)], plugins=[RivalBeforeCommit()])
    assert sink.is_committed(BatchContext(sink.name, "a", 0)) is None


def test_commits_of_two_writers_at_the_same_moment_conflict(yt_emulator, yt):
    """b commits its proof while a's proof transaction is open (after a read the others'
    sources): the two transactions write one shared row, so a's commit meets a conflict, is
    redone, sees b's rows and is refused."""
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)
    assert run(sink, "a", 0, [rows(0, 5, id_base=A)]).status == "committed"
    b_rows = rows(10, 5, id_base=B)

    class RivalInsideCommit:
        @hookimpl(tryfirst=True)
        def commit(self, ctx):
            def rival() -> None:
                assert run(sink, "b", 0, [b_rows]).status == "committed"

            yt_emulator.faults.on_next("insert_rows", rival, match={"path": PROGRESS})

    with pytest.raises(ConfigurationError, match="writer 'b'.*row_index 10..14.*with_queue_id"):
        run(sink, "a", 1, [rows(5, 10, id_base=A)], plugins=[RivalInsideCommit()])
    assert not yt_emulator.faults.pending()
    assert sink.is_committed(BatchContext(sink.name, "a", 1)) is None
    assert sink.is_committed(BatchContext(sink.name, "b", 0)) is not None


def test_a_second_writer_of_the_same_source_rows_is_allowed(yt_emulator, yt):
    """Two jobs over one queue write equal rows under equal keys: harmless, not refused."""
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)
    assert run(sink, "a", 0, [rows(0, 50, id_base=A)]).status == "committed"
    assert run(sink, "b", 0, [rows(20, 50, id_base=A)]).status == "committed"
    assert sorted(r["id"] for r in table_rows(yt)) == list(range(A, A + 70))


def test_writers_of_other_columns_with_update(yt_emulator, yt):
    """update=true: two queries fill other columns of the same source rows; a value one of them
    stored is never changed by the other, and changing one is refused."""
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator, update=True)
    first = rows(0, 5, id_base=A).drop_columns(["amount"])
    assert run(sink, "ids", 0, [first]).status == "committed"
    amounts = rows(0, 5, id_base=A).drop_columns(["id", "name"])
    assert run(sink, "amounts", 0, [amounts]).status == "committed"
    assert [(r["id"], r["amount"]) for r in table_rows(yt)] == [(A + i, 1.0) for i in range(5)]
    other_ids = rows(3, 5, id_base=B).drop_columns(["amount"])
    with pytest.raises(ConfigurationError, match="writer 'ids'.*row_index=3"):
        run(sink, "amounts", 1, [other_ids])


def test_writers_of_one_queue_with_queue_id_may_share_rows(yt_emulator, yt):
    """With queue_id in the key, rows of different queues cannot collide; two writers over one
    queue (e.g. columns split between queries with update=true) are allowed."""
    create_output_table(yt, OUT, rows_schema(), queue_id=True)
    sink = make_sink_for(yt_emulator)
    for writer in ("a", "b"):
        assert run(sink, writer, 0, [rows(0, 5, id_base=A, queue="//q")]).status == "committed"
    assert len(table_rows(yt)) == 5


def test_retired_writer_and_switched_off_check(yt_emulator, yt):
    create_output_table(yt, OUT, rows_schema())
    sink = make_sink_for(yt_emulator)
    assert run(sink, "a", 0, [rows(0, 5, id_base=A)]).status == "committed"
    with pytest.raises(ConfigurationError, match="retire_writer"):
        run(sink, "b", 0, [rows(0, 5, id_base=B)])
    # the operator says both read one queue: a is retired, b takes over its rows
    from eosink_yt_dynamic import retire_writer

    retire_writer(yt, OUT, "a")
    assert sink.is_committed(BatchContext(sink.name, "a", 0)) is None
    assert run(sink, "b", 0, [rows(0, 5, id_base=B)]).status == "committed"
    # check_duplicates=false: overwriting is intended, no check
    unchecked = make_sink_for(yt_emulator, check_duplicates=False)
    assert run(unchecked, "c", 0, [rows(0, 5, id_base=A)]).status == "committed"
    assert sorted(r["id"] for r in table_rows(yt)) == list(range(A, A + 5))
