"""``group_by_text``: every row in exactly one group, and one group per text; JVM float text."""

from __future__ import annotations

import math
import struct
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eosink.partitions import group_by_text, java_number_text

NAN_PAYLOAD = struct.unpack("d", struct.pack("Q", 0x7FF8000000000001))[0]  # a NaN, other bits


def folder_text(value, _type):
    """A Hive-like rule: "" and null share a folder, floats print as on the JVM."""
    if value is None or value == "":
        return "__DEFAULT__"
    if isinstance(value, float):
        return java_number_text(value)
    return str(value)


def check_split(table: pa.Table, columns: list[str], text) -> dict[tuple, list[int]]:
    """Split ``table`` (with a row number ``i``) and check the grouping's promises."""
    groups = group_by_text(table, columns, text)
    parts = list(groups.split(table))
    keys = [key for key, _ in parts]
    assert len(set(keys)) == len(keys), "one group per text"
    seen = Counter(i for _, part in parts for i in part.column("i").to_pylist())
    assert seen == Counter(range(table.num_rows)), "every row in exactly one group, once"
    rows = table.to_pylist()
    for key, part in parts:
        numbers = part.column("i").to_pylist()
        assert numbers == sorted(numbers), "rows keep their order in a group"
        for i in numbers:
            assert key == tuple(text(rows[i][c], table.schema.field(c).type) for c in columns)
    assert [key for key, _ in parts] == list(groups.keys)
    return {key: part.column("i").to_pylist() for key, part in parts}


def numbered(**columns) -> pa.Table:
    n = len(next(iter(columns.values())))
    return pa.table({"i": pa.array(range(n), pa.int64()), **columns})


def test_floats_group_by_their_text_not_by_equality():
    values = [math.nan, -0.0, 0.0, math.inf, None, NAN_PAYLOAD, -math.inf, 1e20] * 45
    groups = check_split(numbered(v=pa.array(values, pa.float64())), ["v"], folder_text)
    assert {k[0]: len(v) for k, v in groups.items()} == {
        "NaN": 90,
        "-0.0": 45,
        "0.0": 45,
        "Infinity": 45,
        "__DEFAULT__": 45,
        "-Infinity": 45,
        "1.0E20": 45,
    }


def test_empty_string_and_null_share_their_folders_group():
    values = ["", None, "a/b", "ü", "%", ""]
    groups = check_split(numbered(v=values), ["v"], folder_text)
    assert groups == {("__DEFAULT__",): [0, 1, 5], ("a/b",): [2], ("ü",): [3], ("%",): [4]}


def test_groups_in_order_of_first_row_and_columns_combined():
    table = numbered(a=["x", "y", "x", "y", None], b=[1.0, 1.0, -0.0, 1.0, 0.0])
    groups = check_split(table, ["a", "b"], folder_text)
    assert list(groups) == [("x", "1.0"), ("y", "1.0"), ("x", "-0.0"), ("__DEFAULT__", "0.0")]
    assert groups[("y", "1.0")] == [1, 3]


def test_the_text_function_runs_once_per_distinct_value():
    calls = Counter()

    def text(value, _type):
        calls[value] += 1
        return value

    groups = group_by_text(pa.table({"v": pa.array(["a", "b", None] * 1000)}), ["v"], text)
    assert calls == {"a": 1, "b": 1, None: 1} and len(groups.keys) == 3


def test_chunked_dictionary_and_view_columns():
    chunked = pa.chunked_array([["a", ""], [None, "a"]])
    check_split(numbered(v=chunked), ["v"], folder_text)
    coded = pa.array(["a", None, "", "a"]).dictionary_encode()
    groups = check_split(numbered(v=coded), ["v"], folder_text)
    assert groups == {("a",): [0, 3], ("__DEFAULT__",): [1, 2]}
    view = pa.table({"v": pa.array(["a", None, "", "a"], pa.string_view())})
    groups = group_by_text(view, ["v"], lambda v, _t: v)  # null and "" stay apart
    assert groups.keys == (("a",), (None,), ("",)) and groups.ids.to_pylist() == [0, 1, 2, 0]


def test_one_group_and_no_rows():
    table = numbered(v=["a", "a"])
    ((key, rows),) = list(group_by_text(table, ["v"], folder_text).split(table))
    assert key == ("a",) and rows is table  # nothing copied
    empty = table.slice(0, 0)
    assert list(group_by_text(empty, ["v"], folder_text).split(empty)) == []


def test_record_batches_split_too():
    batch = pa.record_batch({"i": [0, 1, 2], "v": [0.0, -0.0, 0.0]})
    parts = dict(group_by_text(batch, ["v"], folder_text).split(batch))
    assert parts[("0.0",)].column("i").to_pylist() == [0, 2]
    assert isinstance(parts[("-0.0",)], pa.RecordBatch)


FLOATS = st.sampled_from([math.nan, NAN_PAYLOAD, -0.0, 0.0, math.inf, -math.inf, 1.5, None])
STRINGS = st.sampled_from(["", None, "a", "a/b", "ü", "%", "__DEFAULT__"])


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.tuples(FLOATS, STRINGS, st.integers(0, 3)), min_size=1, max_size=60),
    lossy=st.booleans(),
)
def test_any_rows_any_columns(rows, lossy):
    """Generated rows, with the folder rule or a lossy one (many values, one text)."""
    table = numbered(
        f=pa.array([r[0] for r in rows], pa.float64()),
        s=pa.array([r[1] for r in rows], pa.string()),
        n=pa.array([r[2] for r in rows], pa.int8()),
    )
    text = (lambda v, _t: str(v)[:1]) if lossy else folder_text
    for columns in (["f"], ["s"], ["n", "f"], ["s", "f", "n"]):
        check_split(table, columns, text)


JAVA = [
    (1e20, "1.0E20"),
    (math.nan, "NaN"),
    (-0.0, "-0.0"),
    (0.0, "0.0"),
    (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
    (0.1, "0.1"),
    (1e-5, "1.0E-5"),
    (123456789.0, "1.23456789E8"),
    (1e7, "1.0E7"),
    (9999999.0, "9999999.0"),
    (0.001, "0.001"),
    (0.00099, "9.9E-4"),
    (5e-324, "4.9E-324"),  # Java's two-digit rule: 4.9 is closer than 5
    (1.5, "1.5"),
    (-250.0, "-250.0"),
    (1.7976931348623157e308, "1.7976931348623157E308"),
]


@pytest.mark.parametrize(("value", "expected"), JAVA)
def test_java_double_text(value, expected):
    """What Spark's cast(x as string) printed for these (see the files sink's Spark tests)."""
    assert java_number_text(value) == expected


def single(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.1, "0.1"), (1e20, "1.0E20"), (-0.0, "-0.0"), (3.4028235e38, "3.4028235E38"),
     (1.4e-45, "1.4E-45"), (16777216.0, "1.6777216E7"), (math.nan, "NaN")],
)  # fmt: skip
def test_java_float_text(value, expected):
    assert java_number_text(single(value), single=True) == expected


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_text_reads_back(value):
    text = java_number_text(value)
    assert float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value)
    assert "E" in text or "." in text


@settings(max_examples=500, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_java_float_text_reads_back(value):
    assert single(float(java_number_text(value, single=True))) == value
