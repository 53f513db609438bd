"""NaN as a partition value: an identity partition of a float or double column holds the NaN
rows in a partition of their own, which complete mode replaces and upserts rewrite like any
other. pyiceberg builds the predicate of a deleted file's partition with ``EqualTo``, which
refuses NaN ("Cannot create expression literal from NaN"), and its copy-on-write writer cannot
file rows under a NaN partition; a table holding one could not be written again. Null
partitions beside them, and NaN in a column that is not a partition source, are checked too.
Rows are read by pyiceberg, whole and through filters that prune by partition and bounds, and
by DuckDB's iceberg extension where it loads."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, duckdb_missing, load, read_duckdb, run

NAN = float("nan")
FLOATS = {"float32": pa.float32(), "float64": pa.float64()}


@pytest.fixture
def catalog(tmp_path):
    return catalog_properties(tmp_path)


def sink(catalog: dict[str, str], **options: Any) -> IcebergSink:
    return IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, **options)


def batch(kind: pa.DataType, rows: dict[int, float | None], column: str = "f") -> pa.RecordBatch:
    """Rows keyed by ``k``: ``column`` as given, ``v`` naming the row's batch-independent
    content (``k`` and its value), so an update shows."""
    keys = sorted(rows)
    return pa.record_batch(
        {
            "k": pa.array(keys, pa.int64()),
            column: pa.array([rows[k] for k in keys], kind),
            "v": pa.array([f"{k}:{rows[k]!r}" for k in keys], pa.string()),
        }
    )


def same(value: float | None) -> str:
    """A float compared by its text: NaN equals NaN."""
    return "null" if value is None else "nan" if math.isnan(value) else repr(float(value))


def held(table: Any, column: str = "f") -> dict[int, str]:
    """``k`` to its ``column`` of the rows read; no key twice."""
    keys = table.column("k").to_pylist()
    assert len(set(keys)) == len(keys), f"a key is held twice: {sorted(keys)}"
    return dict(zip(keys, map(same, table.column(column).to_pylist()), strict=True))


def check(catalog: dict[str, str], expected: dict[int, float | None], column: str = "f") -> None:
    """The table holds exactly ``expected``: read whole, through each value's filter, and by
    DuckDB. (pyiceberg's scan drops null rows for ``NotNaN``, in its Arrow filter, whatever
    wrote the table.)"""
    from pyiceberg.expressions import EqualTo, IsNaN, IsNull, NotNaN, NotNull

    want = {k: same(v) for k, v in expected.items()}
    table = load(catalog)
    assert held(table.scan().to_arrow(), column) == want
    nan = {k: v for k, v in want.items() if v == "nan"}
    null = {k: v for k, v in want.items() if v == "null"}
    numbers = {k: v for k, v in want.items() if v not in ("nan", "null")}
    assert held(table.scan(row_filter=IsNaN(column)).to_arrow(), column) == nan
    assert held(table.scan(row_filter=IsNull(column)).to_arrow(), column) == null
    assert held(table.scan(row_filter=NotNaN(column)).to_arrow(), column) == numbers  # see below
    assert held(table.scan(row_filter=NotNull(column)).to_arrow(), column) == {**nan, **numbers}
    for value in {v for v in expected.values() if v is not None and not math.isnan(v)}:
        got = held(table.scan(row_filter=EqualTo(column, value)).to_arrow(), column)
        assert got == {k: v for k, v in numbers.items() if v == same(value)}, value
    if duckdb_missing() is None:
        assert held(read_duckdb(catalog), column) == want


@pytest.mark.parametrize("kind", sorted(FLOATS))
def test_complete_mode_replaces_nan_partitions_batch_after_batch(catalog, kind):
    """Every complete batch replaces the table: the NaN partition (and the null one) of the
    batch before go with the rest, the new batch's come in."""
    batches = [
        {1: NAN, 2: 1.0, 3: None},
        {4: NAN, 5: NAN, 6: 2.0, 7: None},
        {8: 1.0},  # no NaN partition left
        {9: NAN, 10: -1.5},
        {11: NAN},
    ]
    for batch_id, rows in enumerate(batches):
        one = batch(FLOATS[kind], rows)
        result = run(sink(catalog, partition_by=["f"]), batch_id, [one], mode="complete")
        assert result.status == "committed", batch_id
        check(catalog, rows)
    # a restarted query replaying its last batch finds it committed
    last = batch(FLOATS[kind], batches[-1])
    replay = run(sink(catalog, partition_by=["f"]), 4, [last], mode="complete")
    assert replay.status == "skipped"
    check(catalog, batches[-1])


@pytest.mark.parametrize("kind", sorted(FLOATS))
def test_upsert_moves_and_updates_rows_of_a_nan_partition(catalog, kind):
    """Keys whose rows sit in the NaN partition move out of it and into it: the NaN partition's
    files are dropped whole or rewritten without the batch's keys, one row per key."""
    upsert = sink(catalog, partition_by=["f"], mode="upsert", key=["k"])
    state = {1: NAN, 2: NAN, 3: 1.0, 4: None, 5: NAN}
    assert run(upsert, 0, [batch(FLOATS[kind], state)]).status == "committed"
    check(catalog, state)
    steps = [
        {1: 1.0},  # out of the NaN partition: its file rewritten, keeping 2 and 5
        {3: NAN, 6: NAN},  # into it: 3's file dropped whole
        {2: NAN, 5: 2.0, 4: NAN},  # within it, out of it, and from the null partition into it
        {2: None, 3: NAN, 6: 3.0},  # the null partition, and again
    ]
    for batch_id, rows in enumerate(steps, start=1):
        assert run(upsert, batch_id, [batch(FLOATS[kind], rows)]).status == "committed"
        state.update(rows)
        check(catalog, state)
        values = {r["k"]: r["v"] for r in load(catalog).scan().to_arrow().to_pylist()}
        assert all(values[k] == f"{k}:{v!r}" for k, v in rows.items()), values


def test_nan_in_a_column_that_is_not_a_partition_source(catalog):
    """NaN beside the partition column: complete mode replaces it, an upsert rewriting its file
    keeps it, and a filter on it finds it."""

    def rows(values: dict[int, float | None], region: str) -> pa.RecordBatch:
        one = batch(pa.float64(), values, column="x")
        return one.append_column("region", pa.array([region] * one.num_rows))

    complete = sink(catalog, partition_by=["region"])
    assert run(complete, 0, [rows({1: NAN, 2: 1.0}, "eu")], mode="complete").status == "committed"
    check(catalog, {1: NAN, 2: 1.0}, column="x")
    assert run(complete, 1, [rows({3: NAN, 4: 1.0, 5: NAN}, "eu")], mode="complete").status == (
        "committed"
    )
    check(catalog, {3: NAN, 4: 1.0, 5: NAN}, column="x")

    upsert = sink(catalog, partition_by=["region"], mode="upsert", key=["k"])
    assert run(upsert, 0, [rows({4: 2.0}, "eu")], writer_id="u").status == "committed"
    check(catalog, {3: NAN, 4: 2.0, 5: NAN}, column="x")
    assert run(upsert, 1, [rows({5: 3.0, 6: NAN}, "us")], writer_id="u").status == "committed"
    check(catalog, {3: NAN, 4: 2.0, 5: 3.0, 6: NAN}, column="x")
