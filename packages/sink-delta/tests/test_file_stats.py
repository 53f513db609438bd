"""File stats are never narrower than the data, and every reader's filtered read finds the rows.

Readers skip a file by its add action's ``minValues``/``maxValues``/``nullCount``: a bound
narrower than the file's values loses rows, and so (in delta-rs' pyarrow dataset, which turns an
absent bound into ``col >= null``) does a bound left out for a column the reader indexes. Each
case is read back with a filter through delta-rs' SQL, delta-rs' pyarrow dataset
(``to_pyarrow_table(filters=...)``), delta-kernel-rs (polars) and DuckDB's delta extension.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

import polars_deltalake
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from delta_helpers import QUERY, duckdb_with_delta, log_actions, run
from eosink_delta.sink import DeltaSink

from eosink.model import BatchContext
from eosink.protocol import run_batch
from eosink.testing.local import LocalRunner


def _sql_count(path: str, where: str) -> int:
    query = QueryBuilder().register("t", DeltaTable(path))
    return pa.table(query.execute(f"select * from t where {where}").read_all()).num_rows


def _kernel_count(path: str, where: str) -> int:
    return (
        polars_deltalake.scan_delta(path).sql(f"select * from self where {where}").collect().height
    )


def _duckdb_count(path: str, where: str) -> int:
    con = duckdb_with_delta()
    return len(con.execute(f"select * from delta_scan('{path}') where {where}").fetchall())


def found(path: str, where: str, dataset_filter: tuple[str, str, Any]) -> dict[str, int]:
    """The rows each reader returns for the filter (SQL ``where``; the same as a dataset
    filter tuple for delta-rs' pyarrow dataset)."""
    return {
        "delta-rs sql": _sql_count(path, where),
        "delta-rs dataset": DeltaTable(path).to_pyarrow_table(filters=[dataset_filter]).num_rows,
        "delta-kernel-rs": _kernel_count(path, where),
        "duckdb": _duckdb_count(path, where),
    }


def every(n: int) -> dict[str, int]:
    return dict.fromkeys(["delta-rs sql", "delta-rs dataset", "delta-kernel-rs", "duckdb"], n)


def stats_of(path: str) -> list[dict[str, Any]]:
    return [json.loads(a["add"]["stats"]) for _, a in log_actions(path) if "add" in a]


def one_task(sink: DeltaSink, batches: list[pa.RecordBatch], batch_id: int = 0) -> str:
    """One batch whose single task writes ``batches`` (each its own row group when the
    sink's ``row_group_rows`` is 1)."""
    ctx = BatchContext(
        sink="delta",
        writer_id="w",
        batch_id=batch_id,
        kind="stream",
        mode="append",
        query_id=QUERY,
        checkpoint=f"/ckpt/{QUERY}",
    )
    return run_batch(sink, ctx, batches[0].schema, LocalRunner([batches])).status


BIG = "z" * 5000  # over the 4 KiB beyond which Parquet writers drop a chunk's min/max


def test_a_row_group_without_bounds_leaves_no_narrower_file_bound(tmp_path):
    """Finding: the row group holding a value over 4 KiB has no min/max in the footer; the
    file's bound must not be the other row groups' alone."""
    path = str(tmp_path / "t")
    first = pa.record_batch({"id": pa.array([1, 2], pa.int64()), "s": pa.array(["a", "b"])})
    second = pa.record_batch({"id": pa.array([3], pa.int64()), "s": pa.array([BIG])})
    assert one_task(DeltaSink(path=path, row_group_rows=1), [first, second]) == "committed"
    (stats,) = stats_of(path)
    assert stats["minValues"]["s"] <= "a" and stats["maxValues"]["s"] >= BIG
    assert found(path, f"s = '{BIG}'", ("s", "=", BIG)) == every(1)
    assert found(path, "s = 'b'", ("s", "=", "b")) == every(1)


def test_a_single_value_over_4_kib_is_still_bounded(tmp_path):
    """The only row group lost its min/max: the bounds come from the data, truncated."""
    path = str(tmp_path / "t")
    batch = pa.record_batch({"id": pa.array([1, 2], pa.int64()), "s": pa.array(["a", BIG])})
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    (stats,) = stats_of(path)
    assert stats["minValues"]["s"] == "a"
    assert len(stats["maxValues"]["s"]) <= 64 and stats["maxValues"]["s"] >= BIG
    assert found(path, f"s = '{BIG}'", ("s", "=", BIG)) == every(1)


LONG = ["x" * 40, "y" * 50 + "\U0001f600", "\U0010ffff" * 3 + "a" * 40]


def test_booleans_and_long_strings_have_bounds_readers_use(tmp_path):
    path = str(tmp_path / "t")
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "flag": pa.array([True, False, None]),
            "long": pa.array(LONG),
        }
    )
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    (stats,) = stats_of(path)
    assert stats["minValues"]["flag"] is False and stats["maxValues"]["flag"] is True
    assert stats["nullCount"]["flag"] == 1
    assert found(path, "flag = true", ("flag", "=", True)) == every(1)
    assert found(path, "flag = false", ("flag", "=", False)) == every(1)
    for value in LONG:
        assert found(path, f"long = '{value}'", ("long", "=", value)) == every(1)


def test_a_table_column_the_stream_lacks_is_counted_as_null(tmp_path):
    path = str(tmp_path / "t")
    wide = pa.record_batch({"id": pa.array([1], pa.int64()), "extra": pa.array(["e"])})
    narrow = pa.record_batch({"id": pa.array([2, 3, 4, 5, 6], pa.int64())})
    sink = DeltaSink(path=path)
    assert run(sink, 0, [wide]).status == "committed"
    assert run(sink, 1, [narrow]).status == "committed"
    assert stats_of(path)[-1]["nullCount"]["extra"] == 5
    assert found(path, "extra is null", ("extra", "=", None))["delta-rs sql"] == 5
    counts = found(path, "extra = 'e'", ("extra", "=", "e"))
    assert counts == every(1)
    assert DeltaTable(path).to_pyarrow_table(filters=[("id", ">", 1)]).num_rows == 5
    assert _sql_count(path, "extra is null") == _kernel_count(path, "extra is null") == 5


@pytest.mark.parametrize(
    "values, precision, scale",
    [
        (["0", "0.0000001", "-0.0000001"], 20, 10),
        (["12345678901234567.89", "-12345678901234567.89", "1E+3"], 38, 2),
    ],
)
def test_decimal_bounds_are_plain_numbers_readers_parse(tmp_path, values, precision, scale):
    path = str(tmp_path / "t")
    decimals = [decimal.Decimal(v) for v in values]
    batch = pa.record_batch(
        {
            "id": pa.array(range(len(values)), pa.int64()),
            "d": pa.array(decimals, pa.decimal128(precision, scale)),
        }
    )
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    (add,) = [a["add"] for _, a in log_actions(path) if "add" in a]
    assert "E" not in add["stats"] and '"d":"' not in add["stats"]
    for value in decimals:
        text = format(value.quantize(decimal.Decimal(1).scaleb(-scale)), "f")
        where = f"d = cast('{text}' as decimal({precision}, {scale}))"  # a float literal is not
        assert found(path, where, ("d", "=", value)) == every(1), value


@pytest.mark.parametrize(
    "value, limit, lower, upper",
    [
        ("abc", 32, "abc", "abc"),
        ("a" * 40, 32, "a" * 32, "a" * 32 + "\x7f"),
        ("a" * 32 + "é" + "b", 32, "a" * 32, "a" * 32 + "\U0010ffff"),
        (
            "a" * 31 + "\U0010ffff" * 3 + "b",
            32,
            "a" * 31 + "\U0010ffff",
            "a" * 31 + "\U0010ffff" * 3 + "\x7f",
        ),
        ("\U0010ffff" * 70, 32, "\U0010ffff" * 32, None),
    ],
)
def test_string_bounds_are_truncated_as_deltas_writer_does(value, limit, lower, upper):
    from eosink_delta.parquet import truncated_max, truncated_min

    assert truncated_min(value, limit) == lower
    assert truncated_max(value, limit) == upper
    assert truncated_min(value, limit) <= value
    if upper is not None:
        assert upper >= value


STRUCT = pa.struct(
    [
        ("a", pa.int64()),
        ("b", pa.string()),
        ("n", pa.struct([("c", pa.bool_())])),
        ("l", pa.list_(pa.int32())),
    ]
)
#: Nulls at both levels (a null struct; a struct whose fields are null), one row per row group.
STRUCT_ROWS = [
    {"a": 1, "b": "x", "n": {"c": True}, "l": [1]},
    None,
    {"a": None, "b": "y" * 40, "n": None, "l": None},
    {"a": 3, "b": None, "n": {"c": None}, "l": []},
    None,
    {"a": 7, "b": BIG, "n": {"c": False}, "l": [2, 3]},
]
STRUCT_FILTERS = [
    ("s is null", ds.field("s").is_null()),
    ("s is not null", ~ds.field("s").is_null()),
    ("s.a = 3", ds.field("s", "a") == 3),
    ("s.a = 7", ds.field("s", "a") == 7),
    ("s.a is null", ds.field("s", "a").is_null()),
    ("s.a is not null", ~ds.field("s", "a").is_null()),
    ("s.n.c = false", ds.field("s", "n", "c") == False),  # noqa: E712 - an expression
    ("s.n.c is null", ds.field("s", "n", "c").is_null()),
    (f"s.b = '{'y' * 40}'", ds.field("s", "b") == "y" * 40),
    (f"s.b = '{BIG}'", ds.field("s", "b") == BIG),
]


def test_a_struct_column_has_nested_stats_every_reader_filters_by(tmp_path):
    """Finding: a struct column had no stats at all, and delta-rs' pyarrow dataset turned the
    absent bound into ``s >= null``: ``s IS NULL`` read none of the null structs, ``s IS NOT
    NULL`` all rows. Delta's writers write nested stats that mirror the schema (PROTOCOL.md,
    Per-file Statistics): each field's nullCount (a null struct counts as null in each of its
    fields) and bounds, an object (maybe empty) for every struct with a field that has them."""
    path = str(tmp_path / "t")
    batches = [
        pa.record_batch({"id": pa.array([i], pa.int64()), "s": pa.array([row], STRUCT)})
        for i, row in enumerate(STRUCT_ROWS)
    ]
    assert one_task(DeltaSink(path=path, row_group_rows=1), batches) == "committed"
    no_nulls = pa.record_batch(
        {"id": pa.array([10, 11], pa.int64()), "s": pa.array([STRUCT_ROWS[0]] * 2, STRUCT)}
    )
    assert run(DeltaSink(path=path), 1, [no_nulls]).status == "committed"
    first, second = stats_of(path)
    # What delta-rs' own writer counts for the same rows.
    theirs = str(tmp_path / "theirs")
    write_deltalake(theirs, pa.Table.from_batches(batches))
    (their_stats,) = stats_of(theirs)
    assert first["nullCount"] == their_stats["nullCount"]
    assert first["nullCount"]["s"] == {"a": 3, "b": 3, "n": {"c": 4}}
    assert first["minValues"]["s"]["a"] == 1 and first["maxValues"]["s"]["a"] == 7
    assert first["maxValues"]["s"]["b"] >= BIG
    assert first["minValues"]["s"]["n"] == {"c": False}
    assert second["nullCount"]["s"] == {"a": 0, "b": 0, "n": {"c": 0}}
    full = DeltaTable(path).to_pyarrow_table()
    for where, expression in STRUCT_FILTERS:
        expected = full.filter(expression).num_rows
        counts = {
            "delta-rs sql": _sql_count(path, where),
            "delta-rs dataset": DeltaTable(path).to_pyarrow_table(filters=expression).num_rows,
            "delta-kernel-rs": _kernel_count(path, where),
            "duckdb": _duckdb_count(path, where),
        }
        assert counts == every(expected), where


def test_an_all_null_struct_field_still_has_an_object_in_the_bounds(tmp_path):
    """delta-rs' writer writes ``{}`` for a struct whose fields have no bounds (all null):
    without it its pyarrow dataset reads ``s >= null`` again."""
    path = str(tmp_path / "t")
    batch = pa.record_batch(
        {"id": pa.array([1, 2], pa.int64()), "s": pa.array([None, {"a": None}], STRUCT)}
    )
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    (stats,) = stats_of(path)
    assert stats["minValues"]["s"] == {"n": {}} and stats["maxValues"]["s"] == {"n": {}}
    assert stats["nullCount"]["s"] == {"a": 2, "b": 2, "n": {"c": 2}}
    dataset = DeltaTable(path).to_pyarrow_dataset()
    assert dataset.to_table(filter=ds.field("s").is_null()).num_rows == 1
    assert dataset.to_table(filter=~ds.field("s").is_null()).num_rows == 1


def test_a_struct_column_the_stream_lacks_reads_as_null(tmp_path):
    """The stream lacks the table's struct column: every field counted null, and the bounds an
    object per struct level, as delta-rs' writer writes them (without them its pyarrow dataset
    read ``s IS NULL`` as no row of the file and ``s IS NOT NULL`` as all of them)."""
    path = str(tmp_path / "t")
    sink = DeltaSink(path=path)
    wide = pa.record_batch(
        {"id": pa.array([1], pa.int64()), "s": pa.array([STRUCT_ROWS[0]], STRUCT)}
    )
    narrow = pa.record_batch({"id": pa.array([2, 3], pa.int64())})
    assert run(sink, 0, [wide]).status == "committed"
    assert run(sink, 1, [narrow]).status == "committed"
    stats = stats_of(path)[-1]
    assert stats["nullCount"]["s"] == {"a": 2, "b": 2, "n": {"c": 2}}
    assert stats["minValues"]["s"] == stats["maxValues"]["s"] == {"n": {}}
    full = DeltaTable(path).to_pyarrow_table()
    for where, expression in STRUCT_FILTERS[:6]:
        expected = full.filter(expression).num_rows
        counts = {
            "delta-rs sql": _sql_count(path, where),
            "delta-rs dataset": DeltaTable(path).to_pyarrow_table(filters=expression).num_rows,
            "duckdb": _duckdb_count(path, where),
        }
        # Not polars: its scan fails on a file without the struct column, stats or none
        # ("expected `Struct`, got `u32` for series `s_nc`").
        assert counts == dict.fromkeys(counts, expected), where


def test_infinite_float_bounds_are_written_as_deltas_spark_writer_writes_them(tmp_path):
    """Finding (issue 34, the filtered histories): a float column holding an infinity had no
    bounds (JSON has no infinity), which delta-rs' pyarrow dataset reads as ``col >= null``:
    ``WHERE f = -inf`` read 0 of its row. Delta's Spark writer writes the strings
    ``"Infinity"``/``"-Infinity"``; every reader filters by them."""
    path = str(tmp_path / "t")
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "f": pa.array([1.5, float("inf"), 2.5], pa.float64()),
            "g": pa.array([float("-inf"), 0.5, None], pa.float32()),
        }
    )
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    (stats,) = stats_of(path)
    assert (stats["minValues"]["f"], stats["maxValues"]["f"]) == (1.5, "Infinity")
    assert (stats["minValues"]["g"], stats["maxValues"]["g"]) == ("-Infinity", 0.5)
    # only beyond every finite value: polars' SQL cannot carry an infinite literal
    assert found(path, "f > 1e308", ("f", "=", float("inf"))) == every(1)
    assert found(path, "f > 2.0", ("f", ">", 2.0)) == every(2)
    assert found(path, "g < -3e38", ("g", "=", float("-inf"))) == every(1)
    assert found(path, "g < 1.0", ("g", "<", 1.0)) == every(2)


def test_a_timestamp_in_the_last_millisecond_of_year_9999_is_bounded(tmp_path):
    """Finding (issue 34, the filtered histories): the max of a timestamp column is rounded
    up to the millisecond, which overflowed in the last millisecond of year 9999 and failed
    the batch (OverflowError). There it is truncated, as delta-rs' own writer writes it, and
    every reader still finds the row by its value."""
    import datetime as dt

    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999700, tzinfo=dt.timezone.utc)
    path = str(tmp_path / "t")
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2], pa.int64()),
            "t": pa.array(
                [dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc), last], pa.timestamp("us", "UTC")
            ),
        }
    )
    assert run(DeltaSink(path=path), 0, [batch]).status == "committed"
    (stats,) = stats_of(path)
    assert stats["maxValues"]["t"] == "9999-12-31T23:59:59.999Z"
    # delta-rs' SQL cannot take the literal (it casts it to nanoseconds): the others
    where = "t = '9999-12-31 23:59:59.9997+00'::timestamptz"
    exact = ("t", "=", pa.scalar(last, pa.timestamp("us", "UTC")))
    assert DeltaTable(path).to_pyarrow_table(filters=[exact]).num_rows == 1
    assert _kernel_count(path, where) == 1
    assert _duckdb_count(path, where) == 1
