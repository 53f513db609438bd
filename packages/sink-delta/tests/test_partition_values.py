"""Partition values nobody picks on purpose, on the Arrow path: delta-rs reads every row back
once, with its value, and the add actions hold the Delta protocol's partition value strings.

The protocol stores a partition value as a string in ``partitionValues`` (the folder is only a
place): numbers as the JVM prints them (``NaN``, ``-0.0``, ``Infinity``, ``1.0E20``, which Delta's
Spark reader and delta-rs both parse), dates ``yyyy-MM-dd``, timestamps ``yyyy-MM-dd
HH:mm:ss.SSSSSS`` in UTC; an empty string is null, as is Hive's default folder name.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections import Counter

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from delta_helpers import log_actions, run
from eosink_delta.sink import DeltaSink
from eosink_delta.table import partition_value

from eosink.plugin import BatchContext, ConfigurationError
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner
from eosink.testing.partition_values import (
    HIVE_NULL,
    NAN_PAYLOAD,
    assert_read_back,
    string_and_float_batch,
)

FLOATS = [math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, 1e20, None, NAN_PAYLOAD]
STRINGS = ["", None, "a/b", "ü", "%", HIVE_NULL, " x ", "a=b", "%2F"]
UTC = dt.timezone.utc


def batches(values, type_, *, tasks: int = 3, repeat: int = 5) -> list[pa.RecordBatch]:
    """One batch per task, every value ``repeat`` times in shifted orders, unique ``id``s."""
    out, next_id = [], 0
    for task in range(tasks):
        column = [values[(i + task) % len(values)] for i in range(len(values) * repeat)]
        ids = pa.array(range(next_id, next_id + len(column)), pa.int64())
        next_id += len(column)
        out.append(pa.record_batch({"id": ids, "v": pa.array(column, type_)}))
    return out


def read_back(path: str) -> dict[int, object]:
    table = DeltaTable(path).to_pyarrow_table()
    ids = table.column("id").to_pylist()
    twice = [i for i, n in Counter(ids).items() if n > 1]
    assert not twice, f"{len(twice)} ids read back more than once"
    return dict(zip(ids, table.column("v").to_pylist()))


def sent(parts: list[pa.RecordBatch]) -> dict[int, object]:
    return {
        i: v for b in parts for i, v in zip(b.column("id").to_pylist(), b.column("v").to_pylist())
    }


def partition_values(path: str) -> set:
    return {a["add"]["partitionValues"]["v"] for _v, a in log_actions(path) if "add" in a}


@pytest.mark.parametrize("type_", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_float_partition_values_read_back_once_with_their_value(tmp_path, type_):
    path = str(tmp_path / "table")
    parts = batches(FLOATS, type_)
    outcome = run(DeltaSink(path=path, partition_by=["v"]), 0, parts)
    expected = sent(parts)
    assert outcome.rows == len(expected) == 135
    assert_read_back(read_back(path), expected)
    assert partition_values(path) == {
        "NaN", "-0.0", "0.0", "Infinity", "-Infinity", "1.5", "1.0E20", None,
    }  # fmt: skip


def test_string_partition_values_read_back_once(tmp_path):
    path = str(tmp_path / "table")
    parts = batches(STRINGS, pa.string())
    run(DeltaSink(path=path, partition_by=["v"]), 0, parts)
    # "" is null in the protocol; Hive's default name is null for Delta's and delta-rs' writers
    expected = {i: (None if v in ("", HIVE_NULL) else v) for i, v in sent(parts).items()}
    assert read_back(path) == expected
    assert partition_values(path) == {None, "a/b", "ü", "%", " x ", "a=b", "%2F"}


def test_empty_string_and_null_in_separate_batches_share_one_file(tmp_path):
    """Both are null: one file per task for them, whichever batch brings which."""
    path = str(tmp_path / "table")
    first = pa.record_batch({"id": pa.array([0, 1], pa.int64()), "v": ["", "x"]})
    second = pa.record_batch({"id": pa.array([2, 3], pa.int64()), "v": [None, "x"]})
    ctx = BatchContext("delta", "w", 0, kind="batch")
    sink = DeltaSink(path=path, partition_by=["v"])
    run_batch(sink, ctx, first.schema, LocalRunner([[first, second]]))  # one task, two batches
    assert read_back(path) == {0: None, 1: "x", 2: None, 3: "x"}
    assert len([a for _v, a in log_actions(path) if "add" in a]) == 2


def test_two_partition_columns(tmp_path):
    path = str(tmp_path / "table")
    batch = string_and_float_batch()
    run(DeltaSink(path=path, partition_by=["s", "f"]), 0, [batch.slice(0, 50), batch.slice(50)])
    table = DeltaTable(path).to_pyarrow_table()
    assert sorted(table.column("id").to_pylist()) == list(range(batch.num_rows))
    adds = [a["add"]["partitionValues"] for _v, a in log_actions(path) if "add" in a]
    assert sorted((v["s"] or "", v["f"]) for v in adds) == [
        ("", "-0.0"), ("", "-0.0"), ("", "0.0"), ("", "0.0"), ("", "NaN"), ("", "NaN"),
        ("a", "NaN"), ("a", "NaN"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("values", "type_"),
    [
        ([True, False, None], pa.bool_()),
        ([-3, 2**40, None], pa.int64()),
        ([7, None], pa.int8()),
        # delta-rs 1.6 reads no negative fractional decimal back ("-1.5000000000" fails to
        # parse, and its own writer fails on one): the strings are checked below.
        (
            [
                decimal.Decimal(0),
                decimal.Decimal("1.5"),
                decimal.Decimal("0.0000001"),
                decimal.Decimal(-12),
                None,
            ],
            pa.decimal128(20, 10),
        ),
        ([dt.date(2024, 1, 1), dt.date(1, 1, 1), None], pa.date32()),
        (
            [
                dt.datetime(2024, 1, 1, 1, 2, 3, 120000, tzinfo=UTC),
                dt.datetime(1, 1, 1, tzinfo=UTC),
                None,
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        ([dt.datetime(2024, 1, 1, 1, 2, 3, 1), None], pa.timestamp("us")),
        ([0.1, 1e-5, 123456789.0, 5e-324], pa.float64()),
        ([0.1, 3.4028235e38], pa.float32()),
    ],  # fmt: skip
    ids=lambda v: str(v) if isinstance(v, pa.DataType) else "",
)
def test_other_types_read_back_by_delta_rs(tmp_path, values, type_):
    path = str(tmp_path / "table")
    column = pa.array(values * 3, type_)
    batch = pa.record_batch({"id": pa.array(range(len(column)), pa.int64()), "v": column})
    run(DeltaSink(path=path, partition_by=["v"]), 0, [batch])
    back = read_back(path)
    assert [back[i] for i in range(len(column))] == column.to_pylist()


@pytest.mark.parametrize(
    ("values", "type_", "texts"),
    [
        (
            [decimal.Decimal(0), decimal.Decimal("-0.0000001")],
            pa.decimal128(20, 10),
            ["0.0000000000", "-0.0000001000"],
        ),
        (
            [dt.datetime(1, 1, 1, tzinfo=UTC)],
            pa.timestamp("us", tz="UTC"),
            ["0001-01-01 00:00:00.000000"],
        ),
        (
            [dt.datetime(2024, 1, 1, 12, tzinfo=UTC)],
            pa.timestamp("us", tz="America/New_York"),
            ["2024-01-01 12:00:00.000000"],
        ),  # UTC, whatever the column's zone
        ([1e20, math.inf, -0.0], pa.float64(), ["1.0E20", "Infinity", "-0.0"]),
        ([0.1], pa.float32(), ["0.1"]),
        ([b"", b"ab", "ü".encode()], pa.binary(), [None, "ab", "ü"]),
        (["", HIVE_NULL], pa.string(), [None, None]),
    ],  # fmt: skip
    ids=lambda v: str(v) if isinstance(v, pa.DataType) else "",
)
def test_partition_value_strings(values, type_, texts):
    column = pa.array(values, type_)
    assert [partition_value(v, type_) for v in column.to_pylist()] == texts


def test_a_widened_partition_column_is_named_in_the_tables_type(tmp_path):
    """A float stream into a double table: the value is the widened double, as in the data."""
    path = str(tmp_path / "table")
    run(DeltaSink(path=path, partition_by=["v"]), 0, batches([0.5, None], pa.float64(), tasks=1))
    narrow = pa.record_batch(
        {"id": pa.array([100], pa.int64()), "v": pa.array([0.1], pa.float32())}
    )
    run(DeltaSink(path=path), 1, [narrow])
    assert read_back(path)[100] == float(pa.array([0.1], pa.float32())[0].as_py())


@pytest.mark.parametrize("type_", [pa.duration("us"), pa.null(), pa.binary()], ids=str)
def test_types_delta_cannot_partition_by_are_refused_before_writing(tmp_path, type_):
    path = tmp_path / "table"
    batch = pa.record_batch({"id": pa.array([1], pa.int64()), "v": pa.array([None], type_)})
    with pytest.raises(ConfigurationError, match="'v'"):
        run(DeltaSink(path=str(path), partition_by=["v"]), 0, [batch])
    assert not path.exists() or not DeltaTable.is_deltatable(str(path))
