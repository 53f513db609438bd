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

from eosink.plugin import ConfigurationError

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


#: What YT's ``date`` (days) and ``timestamp`` (microseconds) hold: 1970-01-01 to
#: 2105-12-31. Spark's dates and timestamps reach from year 1 to 9999.
YT_DAYS = (0, 49_673 - 1)
YT_MICROSECONDS = (0, 49_673 * 86_400 * 10**6 - 1)


def _plain_column(name: str, column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_timestamp(column.type):
        plain = pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())
        _check_range(name, column, plain, YT_MICROSECONDS, "timestamp")
        return plain
    if pa.types.is_date32(column.type):
        plain = pc.cast(column, pa.int32())
        _check_range(name, column, plain, YT_DAYS, "date")
        return plain
    return column


def _check_range(
    name: str,
    column: pa.ChunkedArray | pa.Array,
    plain: pa.ChunkedArray | pa.Array,
    bounds: tuple[int, int],
    yt: str,
) -> None:
    """Refuse values YT's ``date``/``timestamp`` cannot hold before any is sent: YT would fail
    the request with a bare schema error, after other chunks of the batch were written."""
    lowest, highest = pc.min_max(plain).values()
    outside = (lowest.is_valid and lowest.as_py() < bounds[0]) or (
        highest.is_valid and highest.as_py() > bounds[1]
    )
    if not outside:
        return
    bad = pc.or_(pc.less(plain, bounds[0]), pc.greater(plain, bounds[1]))
    example = column.filter(bad)[0]
    raise ConfigurationError(
        f"column {name!r}: {example} is outside what YT's {yt} type holds (1970-01-01 to "
        f"2105-12-31), so YT would refuse the rows. Fix: filter such rows out in the query, or "
        f"cast the column (e.g. to string, or to long holding days or microseconds since 1970); "
        "nothing of these rows was written"
    )


def yt_rows(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """Rows of a batch as YT client rows (timestamps in microseconds, dates in days).

    Dates and timestamps YT cannot hold are a :class:`~eosink.ConfigurationError` naming the
    column and the fix."""
    columns = {
        name: _plain_column(name, batch.column(name)).to_pylist() for name in batch.schema.names
    }
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*(columns[n] for n in names))]
