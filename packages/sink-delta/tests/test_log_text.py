"""Commit files are split into actions on ``\\n`` only, as the Delta protocol (newline-delimited
JSON) says: a value holding another line break (U+2028, U+2029, U+0085, which Python's
``str.splitlines`` also splits on) is written raw into the stats and partition values, and the
next read of the log must still parse it."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from delta_helpers import run, txns
from eosink_delta.log_view import forget, parse_commit
from eosink_delta.sink import DeltaSink

BREAKS = ["a\u2028b", "\u2029", "x\u0085y", "\u000b\u000c\u001c\u001d\u001e"]


def batch(batch_id: int) -> pa.RecordBatch:
    ids = [batch_id * 10 + i for i in range(len(BREAKS))]
    return pa.record_batch({"id": pa.array(ids, pa.int64()), "s": BREAKS, "p": BREAKS})


@pytest.mark.parametrize("partitioned", [False, True])
def test_values_with_line_separators_do_not_break_the_log(tmp_path, partitioned):
    path = str(tmp_path / "t")
    sink = DeltaSink(path=path, partition_by=("p",) if partitioned else ())
    for batch_id in range(3):
        forget(path)  # the driver reads the whole log again, as a restarted one does
        assert run(sink, batch_id, [batch(batch_id)]).status == "committed"
    forget(path)
    assert run(DeltaSink(path=path), 1, [batch(1)]).status == "skipped"
    table = DeltaTable(path).to_pyarrow_table()
    assert sorted(table.column("s").to_pylist()) == sorted(BREAKS * 3)
    assert txns(path)[-1] == ("w", 2)


def test_a_table_delta_rs_wrote_with_a_next_line_character(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64()), "s": ["x\u0085y"]}))
    batch = pa.record_batch({"id": pa.array([2], pa.int64()), "s": ["\u2028"]})
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    assert sorted(DeltaTable(path).to_pyarrow_table().column("s").to_pylist()) == sorted(
        ["x\u0085y", "\u2028"]
    )


def test_parse_commit_splits_on_newlines_only():
    data = '{"a":"x\u2028y\u0085z\u2029"}\n{"b":1}\n'.encode("utf-8")
    assert parse_commit(data) == [{"a": "x\u2028y\u0085z\u2029"}, {"b": 1}]
