"""Arrow record batches as PostgreSQL binary COPY data, built column by column with numpy.

psycopg's ``Copy.write_row`` converts every value of every row in Python (an Arrow column to a
list of Python objects, then each object to its binary form): for a batch of a million rows
that is the executor's whole cost. Here each column becomes its binary form in one vectorized
step and the rows are assembled into one buffer by index arithmetic, so the cost per row is
numpy's, not the interpreter's.

The layout (PostgreSQL's ``COPY ... (FORMAT BINARY)``): a signature and header once, then per
row an int16 field count and per field an int32 length (-1 for NULL) and the value's bytes, and
an int16 -1 at the end; every number big-endian. Values:

==========================  ==============================================================
column                       bytes
==========================  ==============================================================
smallint, integer, bigint    two's complement, 2, 4, 8 bytes
real, double precision       IEEE 754, 4, 8 bytes (NaN, infinities and -0.0 as they are)
boolean                      1 byte, 0 or 1
text, bytea                  the UTF-8 text or the bytes, as they are
date                         int32 days since 2000-01-01
timestamp[tz]                int64 microseconds since 2000-01-01 00:00 (UTC for tz)
==========================  ==============================================================

A batch with a column of another type (numeric, arrays, jsonb, nanosecond timestamps) is not
encoded here (``encodable`` says so): the sink sends it row by row through psycopg, whose
dumpers are the reference encoding of those types.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
TRAILER = b"\xff\xff"
DAYS_1970_TO_2000 = 10_957
MICROS_1970_TO_2000 = DAYS_1970_TO_2000 * 86_400 * 1_000_000


class _Fixed:
    """A column of fixed-width values: an (n, width) matrix of big-endian bytes."""

    def __init__(self, values: np.ndarray, valid: np.ndarray) -> None:
        self.width = values.dtype.itemsize
        big = values.astype(values.dtype.newbyteorder(">"), copy=False)
        self.matrix = np.ascontiguousarray(big).view(np.uint8).reshape(len(values), self.width)
        self.valid = valid
        self.lengths = np.where(valid, self.width, -1).astype(np.int64)

    def put(self, out: np.ndarray, at: np.ndarray) -> None:
        rows = at[self.valid]
        out[rows[:, None] + np.arange(self.width)] = self.matrix[self.valid]


class _Variable:
    """A column of variable-width values: one data buffer and each value's [start, end)."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray):
        self.data = data
        self.starts = starts
        self.lengths = np.where(valid, ends - starts, -1).astype(np.int64)
        self.valid = valid

    def put(self, out: np.ndarray, at: np.ndarray) -> None:
        sizes = self.lengths[self.valid]
        total = int(sizes.sum())
        if total == 0:
            return
        first = np.cumsum(sizes) - sizes  # each value's first byte in the gathered run
        step = np.arange(total, dtype=np.int64)
        out[np.repeat(at[self.valid] - first, sizes) + step] = self.data[
            np.repeat(self.starts[self.valid] - first, sizes) + step
        ]


def _valid(column: pa.Array) -> np.ndarray:
    if column.null_count == 0:
        return np.ones(len(column), dtype=bool)
    return column.is_valid().to_numpy(zero_copy_only=False)


def _numbers(column: pa.Array, as_type: pa.DataType, dtype: Any) -> np.ndarray:
    zero = pa.scalar(False) if pa.types.is_boolean(as_type) else pa.scalar(0, as_type)
    filled = pc.fill_null(column.cast(as_type), zero)
    return filled.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def _binary_column(column: pa.Array, valid: np.ndarray) -> _Variable:
    """text or bytea: the Arrow offsets and data buffer, as they are."""
    if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type):
        offset_type: Any = np.int64
    else:
        offset_type = np.int32
    _, offsets_buf, data_buf = column.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[
        column.offset : column.offset + len(column) + 1
    ].astype(np.int64)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    )
    return _Variable(data, offsets[:-1], offsets[1:], valid)


def _column(column: pa.Array, pg: str) -> _Fixed | _Variable | None:
    """The column's binary form, or None when this module does not encode its type."""
    t = column.type
    if pg in ("smallint", "integer", "bigint") and pa.types.is_integer(t):
        dtype = {"smallint": np.int16, "integer": np.int32, "bigint": np.int64}[pg]
        as_type = {"smallint": pa.int16(), "integer": pa.int32(), "bigint": pa.int64()}[pg]
        return _Fixed(_numbers(column, as_type, dtype), _valid(column))
    if pg == "real" and pa.types.is_float32(t):
        return _Fixed(_numbers(column, t, np.float32), _valid(column))
    if pg == "double precision" and pa.types.is_float64(t):
        return _Fixed(_numbers(column, t, np.float64), _valid(column))
    if pg == "boolean" and pa.types.is_boolean(t):
        return _Fixed(_numbers(column, t, np.bool_).view(np.uint8), _valid(column))
    if pg == "date" and pa.types.is_date32(t):
        days = _numbers(column, pa.int32(), np.int64) - DAYS_1970_TO_2000
        return _Fixed(days.astype(np.int32), _valid(column))
    if pg.startswith("timestamp") and pa.types.is_timestamp(t) and t.unit == "us":
        micros = _numbers(column.view(pa.int64()), pa.int64(), np.int64)
        return _Fixed(micros - MICROS_1970_TO_2000, _valid(column))
    if (pg == "text" and (pa.types.is_string(t) or pa.types.is_large_string(t))) or (
        pg == "bytea" and (pa.types.is_binary(t) or pa.types.is_large_binary(t))
    ):
        return _binary_column(column, _valid(column))
    return None


def encodable(schema: pa.Schema, pg_types: list[str]) -> bool:
    """Whether every column of ``schema`` has its binary form here."""
    return all(_column(pa.array([], f.type), pg) is not None for f, pg in zip(schema, pg_types))


def encode_rows(batch: pa.RecordBatch, pg_types: list[str]) -> bytes:
    """The rows of ``batch`` in binary COPY layout (no signature, no trailer).

    ``pg_types`` is each column's PostgreSQL type as ``types.pg_type`` names it; every column
    must be ``encodable``."""
    n = batch.num_rows
    if n == 0:
        return b""
    columns = []
    for column, pg in zip(batch.columns, pg_types):
        encoded = _column(column, pg)
        if encoded is None:
            raise ValueError(f"no binary encoding here of {column.type} as {pg}")
        columns.append(encoded)
    sizes = np.full(n, 2, dtype=np.int64)
    for col in columns:
        sizes += 4 + np.maximum(col.lengths, 0)
    starts = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    count = np.frombuffer(len(columns).to_bytes(2, "big"), dtype=np.uint8)
    out[starts[:, None] + np.arange(2)] = count
    at = starts + 2
    for col in columns:
        lengths = col.lengths.astype(">i4").view(np.uint8).reshape(n, 4)
        out[at[:, None] + np.arange(4)] = lengths
        col.put(out, at + 4)
        at = at + 4 + np.maximum(col.lengths, 0)
    return out.tobytes()
