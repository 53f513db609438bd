"""Partition values nobody picks on purpose, on the Arrow path: every row lands in the folder
Spark's writer would name for its value, once, and reads back with that value.

Spark's Hive folders hold a value's text (``cast(v as string)``): ``""`` and null share
``__HIVE_DEFAULT_PARTITION__``, floats print as Java does (``NaN``, ``-0.0``, ``1.0E20``).
The Spark tests (``test_spark_partition_values.py``) check the same rules against Spark itself.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import struct
from collections import Counter

import pyarrow as pa
import pytest
from files_helpers import run

from eosink import ConfigurationError
from eosink.testing.partition_values import (
    NAN_PAYLOAD,
    assert_read_back,
    string_and_float_batch,
)
from eosink_files import committed_files, read_table
from eosink_files.sink import FilesSink
from eosink_files.writers import DEFAULT_PARTITION, partition_text

FLOATS = [math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, 1e20, None, NAN_PAYLOAD]
STRINGS = ["", None, "a/b", "ü", "%", DEFAULT_PARTITION, " x ", "a=b", "..", "%2F"]


def partitions(values, type_, *, tasks: int = 3, batches: int = 2, repeat: int = 5):
    """``tasks`` partitions of ``batches`` batches, each holding every value ``repeat`` times
    in shifted orders (so values meet in every arrangement), with a unique ``id``."""
    out, next_id = [], 0
    for task in range(tasks):
        task_batches = []
        for b in range(batches):
            shift = task * batches + b
            column = [values[(i + shift) % len(values)] for i in range(len(values) * repeat)]
            ids = list(range(next_id, next_id + len(column)))
            next_id += len(column)
            task_batches.append(
                pa.record_batch({"id": pa.array(ids, pa.int64()), "v": pa.array(column, type_)})
            )
        out.append(task_batches)
    return out


def sent(parts) -> dict[int, object]:
    return {
        i: v
        for batches in parts
        for b in batches
        for i, v in zip(b.column("id").to_pylist(), b.column("v").to_pylist())
    }


def folders(out: str) -> set[str]:
    return {d for d in os.listdir(out) if d.startswith("v=")}


def read_back(out: str) -> dict[int, object]:
    """id -> the partition value as the reader helper reads it, checking every id is once."""
    table = read_table(out)
    ids = table.column("id").to_pylist()
    duplicated = [i for i, n in Counter(ids).items() if n > 1]
    assert not duplicated, f"{len(duplicated)} ids read back more than once"
    return dict(zip(ids, table.column("v").to_pylist()))


def as_float(text, type_=pa.float64()):
    """A float partition value's folder text as the float it names (rounded to ``type_``)."""
    if text is None:
        return None
    back = float(text)
    if type_ == pa.float32():
        back = struct.unpack("f", struct.pack("f", back))[0]
    return back


@pytest.mark.parametrize("type_", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_float_partition_values_read_back_once_with_their_value(tmp_path, type_):
    out = str(tmp_path / "out")
    parts = partitions(FLOATS, type_)
    outcome = run(FilesSink(path=out, partition_by=["v"]), 0, parts)
    expected = sent(parts)
    assert outcome.rows == len(expected) == 270
    back = {i: as_float(text, type_) for i, text in read_back(out).items()}
    assert_read_back(back, expected)
    assert folders(out) == {
        "v=NaN",
        "v=-0.0",
        "v=0.0",
        "v=Infinity",
        "v=-Infinity",
        "v=1.5",
        "v=1.0E20",
        f"v={DEFAULT_PARTITION}",
    }


def test_string_partition_values_read_back_once(tmp_path):
    out = str(tmp_path / "out")
    parts = partitions(STRINGS, pa.string())
    run(FilesSink(path=out, partition_by=["v"]), 0, parts)
    nulls = ("", None, DEFAULT_PARTITION)
    expected = {i: (None if v in nulls else v) for i, v in sent(parts).items()}
    assert read_back(out) == expected
    assert folders(out) == {
        f"v={DEFAULT_PARTITION}",
        "v=a%2Fb",
        "v=ü",
        "v=%25",
        "v= x ",
        "v=a%3Db",
        "v=..",
        "v=%252F",
    }


def test_a_nul_in_a_value_is_escaped_and_reads_back(tmp_path):
    """A NUL is no character a path may hold (a local folder refuses it; S3 keys cannot carry
    it), and Spark's escaping leaves it as it is (its own writer fails there). Escaped as
    ``%00``, it reads back through Spark's unescaping of folder names, as every ``%XX`` does."""
    out = str(tmp_path / "out")
    parts = partitions(["a\x00b", "\x00", "c"], pa.string(), tasks=1, batches=1, repeat=1)
    assert run(FilesSink(path=out, partition_by=["v"]), 0, parts).status == "committed"
    assert read_back(out) == sent(parts)
    assert folders(out) == {"v=a%00b", "v=%00", "v=c"}


def test_empty_string_and_null_in_separate_batches_of_one_task(tmp_path):
    """One folder, one file writer: the second batch must not start the folder's file again."""
    out = str(tmp_path / "out")
    first = pa.record_batch({"id": [0, 1], "v": ["", "x"]})
    second = pa.record_batch({"id": [2, 3], "v": [None, "x"]})
    run(FilesSink(path=out, partition_by=["v"]), 0, [[first, second]])
    assert read_back(out) == {0: None, 1: "x", 2: None, 3: "x"}
    assert len(committed_files(out)) == 2


def test_two_partition_columns(tmp_path):
    out = str(tmp_path / "out")
    batch = string_and_float_batch()
    run(FilesSink(path=out, partition_by=["s", "f"]), 0, [[batch.slice(0, 50)], [batch.slice(50)]])
    assert sorted(read_table(out).column("id").to_pylist()) == list(range(batch.num_rows))
    layout = {
        os.path.relpath(root, out)
        for root, _dirs, names in os.walk(out)
        if any(n.startswith("part-") for n in names)
    }
    assert layout == {
        f"s={DEFAULT_PARTITION}/f=-0.0",
        f"s={DEFAULT_PARTITION}/f=0.0",
        f"s={DEFAULT_PARTITION}/f=NaN",
        "s=a/f=NaN",
    }


UTC = dt.timezone.utc


@pytest.mark.parametrize(
    ("values", "type_", "texts"),
    [
        ([True, False], pa.bool_(), ["true", "false"]),
        ([-3, 2**40], pa.int64(), ["-3", "1099511627776"]),
        ([7], pa.int8(), ["7"]),
        (
            [decimal.Decimal(0), decimal.Decimal("1.5"), decimal.Decimal("-0.0000001")],
            pa.decimal128(20, 10),
            ["0.0000000000", "1.5000000000", "-0.0000001000"],
        ),
        ([decimal.Decimal(123)], pa.decimal128(10, 0), ["123"]),
        ([dt.date(2024, 1, 1), dt.date(1, 1, 1)], pa.date32(), ["2024-01-01", "0001-01-01"]),
        (
            [
                dt.datetime(2024, 1, 1, tzinfo=UTC),
                dt.datetime(2024, 1, 1, 1, 2, 3, 120000, tzinfo=UTC),
                dt.datetime(1, 1, 1, tzinfo=UTC),
            ],
            pa.timestamp("us", tz="UTC"),
            ["2024-01-01 00:00:00", "2024-01-01 01:02:03.12", "0001-01-01 00:00:00"],
        ),
        (
            [dt.datetime(2024, 1, 1, 1, 2, 3, 1)],
            pa.timestamp("us"),
            ["2024-01-01 01:02:03.000001"],
        ),
        (
            [dt.datetime(2024, 1, 1, 12, tzinfo=UTC)],
            pa.timestamp("us", tz="America/New_York"),
            ["2024-01-01 07:00:00"],  # the wall time in the column's zone, as Spark's session's
        ),
        (
            [0.1, 1e-5, 123456789.0, 5e-324],
            pa.float64(),
            ["0.1", "1.0E-5", "1.23456789E8", "4.9E-324"],
        ),
        ([0.1, 3.4028235e38], pa.float32(), ["0.1", "3.4028235E38"]),
        ([dt.time(1, 2, 3), dt.time(1, 2, 3, 500000)], pa.time64("us"), ["01:02:03", "01:02:03.5"]),
    ],
    ids=lambda v: str(v) if isinstance(v, pa.DataType) else None,
)
def test_value_texts_are_the_folder_names_spark_gives(values, type_, texts):
    """The texts Spark 4's writer gave these values (its folder names, before escaping)."""
    column = pa.array(values, type_)
    assert [partition_text(v, type_) for v in column.to_pylist()] == texts
    assert partition_text(None, type_) == DEFAULT_PARTITION


def test_other_types_round_trip_through_the_folders(tmp_path):
    out = str(tmp_path / "out")
    batch = pa.record_batch(
        {
            "id": pa.array([0, 1, 2, 3], pa.int64()),
            "d": pa.array([dt.date(2024, 1, 1), None, dt.date(2024, 1, 1), dt.date(1, 1, 1)]),
            "t": pa.array(
                [dt.datetime(2024, 1, 1, 1, 2, 3, 120000)] * 2 + [None, dt.datetime(2024, 1, 1)],
                pa.timestamp("us", tz="UTC"),
            ),
            "b": pa.array([True, None, False, True]),
        }
    )
    run(FilesSink(path=out, partition_by=["d", "t", "b"]), 0, [[batch]])
    rows = {r["id"]: r for r in read_table(out).to_pylist()}
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[1]["d"] is None and rows[2]["t"] is None and rows[1]["b"] is None
    assert str(rows[3]["d"]) == "0001-01-01"
    assert str(rows[0]["t"]) == "2024-01-01 01:02:03.12"


@pytest.mark.parametrize(
    ("type_", "fix"),
    [
        (pa.binary(), "cast it to a string"),
        (pa.duration("us"), "cast it to a string or a number"),
        (pa.null(), "cast it to the type it should have"),
        (pa.list_(pa.int64()), "partition by a simple column"),
    ],
    ids=str,
)
def test_types_spark_cannot_read_back_from_folders_are_refused_at_init(tmp_path, type_, fix):
    out = tmp_path / "out"
    batch = pa.record_batch({"id": pa.array([1], pa.int64()), "v": pa.array([None], type_)})
    with pytest.raises(ConfigurationError, match=f"partition column 'v'.*{fix}"):
        run(FilesSink(path=str(out), partition_by=["v"]), 0, [[batch]])
    assert not any(n.startswith("part-") for _r, _d, names in os.walk(out) for n in names)
