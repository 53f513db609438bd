"""YT table schemas as Spark sees them: the reverse of :mod:`eosink_yt_common.schema`.

A Spark source reading YT rows needs, per YT column, the Spark type of the column and the Arrow
type its values are built into (Spark's Python data sources take Arrow record batches). Values
stay as YT sends them (timestamps in microseconds, dates in days, datetimes in seconds); the
Arrow cast turns them into Spark's types.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from eosink.plugin import ConfigurationError

#: YT type -> (Spark DDL type, Arrow type of the values as YT sends them, Arrow type Spark reads)
_TYPES: dict[str, tuple[str, pa.DataType, pa.DataType]] = {
    "int8": ("byte", pa.int8(), pa.int8()),
    "int16": ("short", pa.int16(), pa.int16()),
    "int32": ("int", pa.int32(), pa.int32()),
    "int64": ("long", pa.int64(), pa.int64()),
    "uint8": ("short", pa.int16(), pa.int16()),
    "uint16": ("int", pa.int32(), pa.int32()),
    "uint32": ("long", pa.int64(), pa.int64()),
    "float": ("float", pa.float32(), pa.float32()),
    "double": ("double", pa.float64(), pa.float64()),
    "boolean": ("boolean", pa.bool_(), pa.bool_()),
    "string": ("string", pa.string(), pa.string()),
    "utf8": ("string", pa.string(), pa.string()),
    "date": ("date", pa.int32(), pa.date32()),
    "datetime": ("timestamp", pa.int64(), pa.timestamp("s", tz="UTC")),
    "timestamp": ("timestamp", pa.int64(), pa.timestamp("us", tz="UTC")),
    "interval": ("long", pa.int64(), pa.int64()),
}


def _yt_type(column: dict[str, Any]) -> str:
    return str(column.get("type") or column.get("type_v3") or "any")


def spark_columns(schema: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """(name, Spark DDL type) of every data column of a YT schema; system columns (``$...``)
    are left out. A type Spark cannot hold exactly is a clear error naming the column."""
    out = []
    for column in schema:
        name = column["name"]
        if name.startswith("$"):
            continue
        yt = _yt_type(column)
        if yt not in _TYPES:
            raise ConfigurationError(
                f"column {name!r} has YT type {yt!r}, which eosink does not map to Spark "
                f"(supported: {', '.join(sorted(_TYPES))}); read a table or view without it"
            )
        out.append((name, _TYPES[yt][0]))
    return out


def arrow_batch(
    schema: Iterable[dict[str, Any]], rows: list[dict[str, Any]], extra: dict[str, pa.Array]
) -> pa.RecordBatch:
    """An Arrow record batch of YT ``rows`` in the column order of :func:`spark_columns`, plus
    ``extra`` columns (already Arrow) at the end."""
    arrays, names = [], []
    for column in schema:
        name = column["name"]
        if name.startswith("$"):
            continue
        _, raw, final = _TYPES[_yt_type(column)]
        values = pa.array([r.get(name) for r in rows], raw)
        arrays.append(values if raw == final else values.cast(final))
        names.append(name)
    for name, values in extra.items():
        arrays.append(values)
        names.append(name)
    return pa.RecordBatch.from_arrays(arrays, names=names)
