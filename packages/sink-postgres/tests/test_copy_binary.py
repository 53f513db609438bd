"""The vectorized binary COPY encoder against the server: every type it encodes, edge values,
NULLs and sliced Arrow arrays, compared value by value with what the server then holds and
with psycopg's own row-by-row encoding of the same batch."""

from __future__ import annotations

import datetime as dt
import math
import struct

import psycopg
import pyarrow as pa
import pytest

from eosink_postgres import copy_binary
from eosink_postgres.types import columns_sql, copy_rows, copy_type, pg_type

UTC = dt.timezone.utc


def edge_batch() -> pa.RecordBatch:
    """Every encoded type, with the values an encoder gets wrong: limits, NaN, infinities,
    -0.0, empty and multi-byte text, bytes with NUL and 0xff, NULLs in every column, the first
    and last day of Spark's calendar, instants before 1970 and 2000."""
    i64 = [0, 1, -1, 2**63 - 1, -(2**63), None, 1_234_567_890_123, 42]
    n = len(i64)
    return pa.record_batch(
        {
            "row": pa.array(range(n), pa.int32()),
            "i8": pa.array([0, 1, -1, 127, -128, None, 5, 6], pa.int8()),
            "i16": pa.array([0, 1, -1, 32767, -32768, None, 300, 7], pa.int16()),
            "i32": pa.array([0, 1, -1, 2**31 - 1, -(2**31), None, 70_000, 8], pa.int32()),
            "i64": pa.array(i64, pa.int64()),
            "u8": pa.array([0, 1, 255, 128, 7, None, 9, 10], pa.uint8()),
            "u32": pa.array([0, 1, 2**32 - 1, 2**31, 7, None, 9, 10], pa.uint32()),
            "f32": pa.array(
                [0.0, -0.0, 1.5, float("nan"), float("inf"), None, float("-inf"), 3.4e38],
                pa.float32(),
            ),
            "f64": pa.array(
                [0.0, -0.0, 0.1, float("nan"), float("inf"), None, float("-inf"), 5e-324],
                pa.float64(),
            ),
            "flag": pa.array([True, False, None, True, False, True, False, True]),
            "name": pa.array(
                ["", "a", "ünïcødé ✓", None, "x" * 1000, "tab\tnew\nline", "'\"", "z"]
            ),
            "raw": pa.array(
                [b"", b"\x00", b"\xff\x00\x01", None, b"abc", b"\\x", b"q" * 300, b"z"]
            ),
            "day": pa.array(
                [
                    dt.date(1970, 1, 1),
                    dt.date(2000, 1, 1),
                    dt.date(1, 1, 1),
                    dt.date(9999, 12, 31),
                    dt.date(1999, 12, 31),
                    None,
                    dt.date(2024, 2, 29),
                    dt.date(1969, 12, 31),
                ]
            ),
            "at": pa.array(
                [
                    dt.datetime(1970, 1, 1, tzinfo=UTC),
                    dt.datetime(2000, 1, 1, tzinfo=UTC),
                    dt.datetime(1, 1, 1, tzinfo=UTC),
                    dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
                    dt.datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
                    None,
                    dt.datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=UTC),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "local": pa.array(
                [
                    dt.datetime(1970, 1, 1),
                    dt.datetime(2000, 1, 1),
                    dt.datetime(1, 1, 1),
                    dt.datetime(9999, 12, 31, 23, 59, 59, 999_999),
                    None,
                    dt.datetime(1999, 12, 31, 23, 59, 59, 999_999),
                    dt.datetime(2024, 2, 29, 12, 0, 0, 1),
                    dt.datetime(1969, 12, 31, 23, 59, 59, 999_999),
                ],
                pa.timestamp("us"),
            ),
            "big_text": pa.array(["a", None, "", "b", "c", "d", "é", "f"], pa.large_string()),
            "big_raw": pa.array(
                [b"a", None, b"", b"\x00", b"c", b"d", b"e", b"f"], pa.large_binary()
            ),
        }
    )


def pieces(batch: pa.RecordBatch) -> list[pa.RecordBatch]:
    """The batch as slices (arrays with a non-zero offset into shared buffers)."""
    return [batch.slice(0, 3), batch.slice(3, 1), batch.slice(4)]


def copy_encoded(conn: psycopg.Connection, table: str, batches: list[pa.RecordBatch]) -> None:
    pg = [pg_type(f) for f in batches[0].schema]
    assert copy_binary.encodable(batches[0].schema, pg)
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(copy_binary.SIGNATURE)
        for batch in batches:
            copy.write(copy_binary.encode_rows(batch, pg))
        copy.write(copy_binary.TRAILER)


def copy_row_by_row(conn: psycopg.Connection, table: str, batches: list[pa.RecordBatch]) -> None:
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([copy_type(pg_type(f)) for f in batches[0].schema])
        for batch in batches:
            for row in copy_rows(batch):
                copy.write_row(row)


def same(a: object, b: object, fmt: str = ">d") -> bool:
    """Equal, with NaN equal to NaN and -0.0 told apart from 0.0 (floats compared as the
    ``fmt`` bits: a real read back is a double near the float)."""
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack(fmt, a) == struct.pack(fmt, b) or (math.isnan(a) and math.isnan(b))
    return a == b


def test_encoded_rows_hold_every_value(database):
    batch = edge_batch()
    with psycopg.connect(database, autocommit=True) as conn:
        for table in ("encoded", "by_row"):
            conn.execute(f"CREATE TABLE {table} ({columns_sql(batch.schema)})")
        copy_encoded(conn, "encoded", pieces(batch))
        copy_row_by_row(conn, "by_row", pieces(batch))
        encoded = conn.execute("SELECT * FROM encoded ORDER BY row").fetchall()
        # the server's own text of every value: tells -0 from 0, keeps NaN, all digits
        as_text = "SELECT t::text FROM {} t ORDER BY row"
        encoded_text = conn.execute(as_text.format("encoded")).fetchall()
        by_row_text = conn.execute(as_text.format("by_row")).fetchall()
    assert encoded_text == by_row_text
    expected = [tuple(r.values()) for r in batch.to_pylist()]
    assert len(encoded) == len(expected)
    for got, want in zip(encoded, expected):
        for name, g, w in zip(batch.schema.names, got, want):
            g = bytes(g) if isinstance(g, memoryview) else g
            assert same(g, w, ">f" if name == "f32" else ">d"), (name, g, w)


def test_many_rows_across_batches(database):
    """Row boundaries stay right over many rows of varying widths and scattered NULLs."""
    n = 50_000
    ids = pa.array([None if i % 7 == 3 else i * 31 for i in range(n)], pa.int64())
    names = pa.array([None if i % 11 == 5 else "v" * (i % 23) + str(i) for i in range(n)])
    batch = pa.record_batch({"id": ids, "name": names})
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE many ({columns_sql(batch.schema)})")
        copy_encoded(conn, "many", [batch.slice(0, 12_345), batch.slice(12_345)])
        got = conn.execute("SELECT id, name FROM many").fetchall()
    assert sorted(got, key=repr) == sorted(zip(ids.to_pylist(), names.to_pylist()), key=repr)


@pytest.mark.parametrize(
    "arrow_type",
    [
        pa.decimal128(10, 2),
        pa.list_(pa.int64()),
        pa.struct([("a", pa.int64())]),
        pa.map_(pa.string(), pa.int64()),
        pa.timestamp("ns", tz="UTC"),
    ],
)
def test_other_types_go_row_by_row(arrow_type):
    schema = pa.schema([("id", pa.int64()), ("x", arrow_type)])
    assert not copy_binary.encodable(schema, [pg_type(f) for f in schema])
