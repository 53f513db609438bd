"""Spark (Arrow) rows and schemas as YT sees them.

Both YT sinks get Arrow record batches from Spark and write YT rows; both need the same answer
to "which YT type is this Spark column" and the same conversion of values (timestamps as
microseconds, dates as days), so that one DataFrame lands identically in either sink.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eosink import ConfigurationError

_SIMPLE = {
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.uint8(): "uint8",
    pa.uint16(): "uint16",
    pa.uint32(): "uint32",
    pa.uint64(): "uint64",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "string",
    pa.large_binary(): "string",
    pa.date32(): "date",
}


def yt_type(field: pa.Field) -> str:
    """The YT type of an Arrow field, or a clear error for types the sinks do not map."""
    if field.type in _SIMPLE:
        return _SIMPLE[field.type]
    if pa.types.is_timestamp(field.type):
        return "timestamp"
    raise ConfigurationError(
        f"column {field.name!r} has type {field.type}, which eosink does not map to YT: cast it "
        "in the query (e.g. to string, double or long) before the sink"
    )


def yt_schema(schema: pa.Schema, key_columns: Sequence[str] = ()) -> list[dict[str, Any]]:
    """A YT table schema for ``schema``, key columns first and sorted ascending."""
    missing = [k for k in key_columns if k not in schema.names]
    if missing:
        raise ConfigurationError(f"key columns {missing} are not among the columns {schema.names}")
    ordered = [schema.field(k) for k in key_columns] + [
        f for f in schema if f.name not in key_columns
    ]
    return [
        {
            "name": f.name,
            "type": yt_type(f),
            **({"sort_order": "ascending"} if f.name in key_columns else {}),
        }
        for f in ordered
    ]


def key_columns(schema: Iterable[dict[str, Any]]) -> list[str]:
    """The key columns of a YT schema (those with a sort order), in key order."""
    return [c["name"] for c in schema if c.get("sort_order")]


def _plain_column(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_timestamp(column.type):
        return pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())
    if pa.types.is_date32(column.type):
        return pc.cast(column, pa.int32())
    return column


def yt_rows(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """Rows of a batch as YT client rows (timestamps in microseconds, dates in days)."""
    columns = {name: _plain_column(batch.column(name)).to_pylist() for name in batch.schema.names}
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*(columns[n] for n in names))]
