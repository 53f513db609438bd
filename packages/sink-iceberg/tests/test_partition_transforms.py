"""Rows land in the partition Iceberg's spec defines, for each transform, nulls included.

Every data file the sink wrote is read back with pyarrow, and every row's partition value is
computed here independently of pyiceberg (a pure-Python murmur3 for ``bucket``, calendar
arithmetic for the time transforms, the spec's floor-mod for ``truncate``) and compared with the
partition value the manifest records for the file. The murmur3 here is checked against the
Iceberg spec's own hash examples first.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, load, read_checked, run

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1)


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit, signed (as Iceberg's spec and Guava define it)."""
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    h = seed
    tail = len(data) & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        h = (h * 5 + 0xE6546B64) & mask
    k = 0
    rest = data[tail:]
    for i in reversed(range(len(rest))):
        k = (k << 8) | rest[i]
    if rest:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & mask
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def days(d: dt.date) -> int:
    return (d - dt.date(1970, 1, 1)).days


def micros(t: dt.datetime) -> int:
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    delta = t - EPOCH
    return delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds


def unscaled_bytes(value: decimal.Decimal, scale: int) -> bytes:
    unscaled = int(value.scaleb(scale))
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(length, "big", signed=True)


def hash_of(value, kind: str) -> int:
    if kind in ("int", "long"):
        return murmur3_32(struct.pack("<q", value))
    if kind == "date":
        return murmur3_32(struct.pack("<q", days(value)))
    if kind in ("timestamp", "timestamptz"):
        return murmur3_32(struct.pack("<q", micros(value)))
    if kind == "string":
        return murmur3_32(value.encode("utf-8"))
    if kind == "binary":
        return murmur3_32(value)
    if kind == "decimal":
        return murmur3_32(unscaled_bytes(value, 2))
    raise AssertionError(kind)


def test_murmur3_matches_the_iceberg_specs_examples():
    assert hash_of(34, "int") == 2017239379
    assert hash_of(34, "long") == 2017239379
    assert hash_of(decimal.Decimal("14.20"), "decimal") == -500754589
    assert hash_of(dt.date(2017, 11, 16), "date") == -653330422
    assert hash_of(dt.datetime(2017, 11, 16, 22, 31, 8), "timestamp") == -2047944441
    assert (
        hash_of(
            dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=dt.timezone(dt.timedelta(hours=-8))),
            "timestamptz",
        )
        == -2047944441
    )
    assert hash_of("iceberg", "string") == 1210000089
    assert hash_of(bytes([0, 1, 2, 3]), "binary") == -188683207


def expected(transform: str, kind: str, value):
    """The partition value of ``value`` as the Iceberg spec defines it (internal form)."""
    if value is None:
        return None
    name, _, arg = transform.partition("[")
    n = int(arg.rstrip("]")) if arg else None
    if kind in ("timestamp", "timestamptz"):
        t = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if name == "identity":
        if kind == "date":
            return days(value)
        if kind in ("timestamp", "timestamptz"):
            return micros(value)
        return value
    if name == "bucket":
        return (hash_of(value, kind) & 0x7FFFFFFF) % n
    if name == "truncate":
        if kind in ("int", "long"):
            return value - value % n  # Python's % is the spec's floor mod
        if kind == "string":
            return value[:n]
        if kind == "binary":
            return value[:n]
        if kind == "decimal":
            unscaled = int(value.scaleb(2))
            return decimal.Decimal(unscaled - unscaled % n).scaleb(-2)
    d = value if kind == "date" else t
    if name == "year":
        return d.year - 1970
    if name == "month":
        return (d.year - 1970) * 12 + d.month - 1
    if name == "day":
        return days(value) if kind == "date" else micros(t) // 86_400_000_000
    if name == "hour":
        return micros(t) // 3_600_000_000
    raise AssertionError(transform)


COLUMNS = {
    "i": ("int", pa.int32()),
    "l": ("long", pa.int64()),
    "s": ("string", pa.string()),
    "b": ("binary", pa.binary()),
    "d": ("date", pa.date32()),
    "ts": ("timestamp", pa.timestamp("us")),
    "tz": ("timestamptz", pa.timestamp("us", tz="UTC")),
    "m": ("decimal", pa.decimal128(10, 2)),
}


def source_rows() -> pa.RecordBatch:
    ints = [0, 1, -1, 7, -7, 34, 2**31 - 1, -(2**31) + 8000, 99, None]
    values = {
        "id": list(range(len(ints))),
        "i": ints,
        "l": [v * 10**6 if v is not None else None for v in ints],
        "s": ["", "a", "ab", "abc", "iceberg", "ü€😀x", "0", "a/b", "abcdef", None],
        "b": [
            b"",
            b"\x00",
            b"\x00\x01\x02\x03",
            b"\xff\xfe",
            b"abc",
            b"x" * 9,
            b"1",
            b"a",
            b"\x80",
            None,
        ],
        "d": [
            dt.date(1970, 1, 1),
            dt.date(1969, 12, 31),
            dt.date(2017, 11, 16),
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
            dt.date(2024, 2, 29),
            dt.date(1900, 3, 1),
            dt.date(2000, 1, 1),
            dt.date(2024, 12, 31),
            None,
        ],
        "ts": [
            dt.datetime(1970, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            dt.datetime(2017, 11, 16, 22, 31, 8),
            dt.datetime(1900, 1, 1, 0, 30),
            dt.datetime(2200, 1, 1, 23),
            dt.datetime(2024, 2, 29, 12),
            dt.datetime(1969, 1, 1),
            dt.datetime(2000, 1, 1, 0, 0, 0, 1),
            dt.datetime(2024, 12, 31, 23, 59),
            None,
        ],
        "m": [
            decimal.Decimal(x) if x is not None else None
            for x in [
                "0.00",
                "14.20",
                "-14.20",
                "0.01",
                "-0.01",
                "99999999.99",
                "-99999999.50",
                "1.05",
                "10.00",
                None,
            ]
        ],
    }
    values["tz"] = [t.replace(tzinfo=UTC) if t is not None else None for t in values["ts"]]
    schema = pa.schema([("id", pa.int64())] + [(c, k) for c, (_, k) in COLUMNS.items()])
    return pa.record_batch([pa.array(values[f.name], f.type) for f in schema], schema=schema)


CASES = [
    ("identity", "i"),
    ("identity", "s"),
    ("identity", "d"),
    ("identity", "tz"),
    ("identity", "m"),
    ("year", "d"),
    ("year", "ts"),
    ("month", "d"),
    ("month", "tz"),
    ("day", "d"),
    ("day", "ts"),
    ("hour", "ts"),
    ("hour", "tz"),
    ("bucket[7]", "i"),
    ("bucket[7]", "l"),
    ("bucket[5]", "s"),
    ("bucket[3]", "b"),
    ("bucket[11]", "d"),
    ("bucket[4]", "ts"),
    ("bucket[4]", "tz"),
    ("bucket[6]", "m"),
    ("truncate[10]", "i"),
    ("truncate[1000]", "l"),
    ("truncate[2]", "s"),
    ("truncate[2]", "b"),
    ("truncate[50]", "m"),
]


def option(transform: str, column: str) -> str:
    name, _, arg = transform.partition("[")
    if name == "identity":
        return column
    return f"{name}({arg.rstrip(']')}, {column})" if arg else f"{name}({column})"


@pytest.mark.parametrize(("transform", "column"), CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_rows_land_in_the_partition_the_spec_defines(tmp_path, transform, column):
    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(
        table=TABLE,
        catalog=catalog,
        create_namespace=True,
        partition_by=[option(transform, column)],
    )
    batch = source_rows()
    # two tasks, each holding every row: each task writes one file per partition tuple
    assert run(sink, 0, [batch, batch]).status == "committed"
    kind = COLUMNS[column][0]
    table = load(catalog)
    assert str(table.spec().fields[0].transform) == transform
    seen = 0
    partitions = []
    for task in table.scan().plan_files():
        recorded = task.file.partition[0]
        partitions.append(recorded)
        path = task.file.file_path.removeprefix("file://")
        held = pq.read_table(path).column(column).to_pylist()
        assert len(held) == task.file.record_count
        for value in held:
            want = expected(transform, kind, value)
            assert want == recorded, (value, want, recorded)
        seen += len(held)
    assert seen == 2 * batch.num_rows
    # one file per partition tuple and task: every tuple appears in exactly two files
    assert all(partitions.count(p) == 2 for p in partitions)
    assert None in partitions  # the null row's partition
    assert read_checked(catalog).num_rows == 2 * batch.num_rows


def test_float_identity_partitions_keep_nan_and_signed_zeros(tmp_path):
    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=["f"])
    values = [0.0, -0.0, float("nan"), float("nan"), 1.5, None, float("inf")]
    batch = pa.record_batch(
        {"id": pa.array(range(7), pa.int64()), "f": pa.array(values, pa.float64())}
    )
    assert run(sink, 0, [batch]).status == "committed"
    read = read_checked(catalog).to_pylist()
    assert sorted(r["id"] for r in read) == list(range(7))
    files = list(load(catalog).scan().plan_files())
    assert len(files) == 6  # 0.0, -0.0, NaN, 1.5, null, inf


@pytest.mark.parametrize(
    ("spec", "kind", "value"),
    [
        ("truncate(10, v)", pa.int32(), -(2**31)),
        ("truncate(50, v)", pa.decimal128(10, 2), decimal.Decimal("-99999999.99")),
    ],
)
def test_a_truncation_below_the_types_range_is_refused(tmp_path, spec, kind, value):
    from eosink import ConfigurationError

    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=[spec])
    batch = pa.record_batch({"id": pa.array([1], pa.int64()), "v": pa.array([value], kind)})
    with pytest.raises(ConfigurationError, match="below what type"):
        run(sink, 0, [batch])
    assert load(catalog).metadata.current_snapshot() is None
    assert not list((tmp_path / "warehouse" / "lake" / "events").glob("data/**/*.parquet"))


def test_an_identity_partition_value_too_long_for_a_file_name_is_refused_clearly(tmp_path):
    """A 4 KiB string under an identity transform makes a partition folder name longer than
    the file system takes (255 bytes): refused naming the way out, nothing committed."""
    from eosink import ConfigurationError

    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=["v"])
    batch = pa.record_batch(
        {"id": pa.array([1, 2], pa.int64()), "v": pa.array(["short", "s" * 4097], pa.string())}
    )
    with pytest.raises(ConfigurationError, match=r"truncate\(N, v\)"):
        run(sink, 0, [batch])
    assert load(catalog).metadata.current_snapshot() is None
    assert not list((tmp_path / "warehouse" / "lake" / "events").glob("data/**/*.parquet"))
