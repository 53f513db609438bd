"""Arrow (and so Spark) types as PostgreSQL types, and Arrow record batches as COPY rows.

The map (Spark type -> Arrow type -> PostgreSQL type), used to create a missing target, to
create every staging table, and to check an existing target:

=========================  ============================  =============================
Spark                      Arrow                         PostgreSQL
=========================  ============================  =============================
ByteType, ShortType        int8, int16                   smallint
IntegerType                int32                         integer
LongType                   int64                         bigint
FloatType                  float32                       real
DoubleType                 float64                       double precision
BooleanType                bool                          boolean
StringType                 string, large_string          text
BinaryType                 binary, large_binary          bytea
DateType                   date32                        date
TimestampType              timestamp(us, tz)             timestamp with time zone
TimestampNTZType           timestamp(us)                 timestamp without time zone
DecimalType(p, s)          decimal128(p, s)              numeric(p, s)
ArrayType(scalar)          list<scalar>                  <scalar type>[]
ArrayType(array/struct)    list<list/struct/map>         jsonb
StructType, MapType        struct, map                   jsonb
=========================  ============================  =============================

PostgreSQL's ``text`` and ``jsonb`` cannot hold the NUL character (``\\x00``): a batch with one
is refused with an error naming the column, before anything is staged. Timestamps of
nanosecond precision (not Spark's) are cut to microseconds only when that loses nothing.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eosink.plugin import ConfigurationError

SINK = "sink 'postgres'"


def quote(name: str) -> str:
    """An identifier, double-quoted for SQL (column names keep their case)."""
    return '"' + name.replace('"', '""') + '"'


def _scalar_type(t: pa.DataType) -> str | None:
    """The PostgreSQL type of a scalar Arrow type, or None when it is not a scalar we map."""
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t):
        return "smallint"
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return "integer"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "bigint"
    if pa.types.is_float32(t):
        return "real"
    if pa.types.is_float64(t):
        return "double precision"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytea"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp with time zone" if t.tz else "timestamp without time zone"
    if pa.types.is_decimal(t):
        return f"numeric({t.precision},{t.scale})"
    return None


def _is_json(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_map(t)


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def pg_type(field: pa.Field) -> str:
    """The PostgreSQL type of a column (see the module's table); a clear error if none."""
    t = field.type
    scalar = _scalar_type(t)
    if scalar is not None:
        return scalar
    if _is_json(t):
        return "jsonb"
    if _is_list(t):
        item = t.value_type
        if _is_json(item) or _is_list(item):
            return "jsonb"
        inner = _scalar_type(item)
        if inner is not None:
            return f"{inner}[]"
    raise ConfigurationError(
        f"{SINK}: column {field.name!r} has type {t}, which has no PostgreSQL type here; cast "
        "it in the query (e.g. to string, or to a struct for jsonb)"
    )


def copy_type(pg: str) -> str:
    """The type name psycopg's binary COPY dumps a column as (numeric without its typmod)."""
    if pg.startswith("numeric("):
        return "numeric[]" if pg.endswith("[]") else "numeric"
    return pg


def columns_sql(schema: pa.Schema, not_null: tuple[str, ...] = ()) -> str:
    """The column list of a CREATE TABLE for ``schema``."""
    return ", ".join(
        f"{quote(f.name)} {pg_type(f)}" + (" NOT NULL" if f.name in not_null else "")
        for f in schema
    )


# -- values --------------------------------------------------------------------------------------
def _json_value(value: Any) -> Any:
    """A value inside a jsonb document: what JSON can hold, the rest as text."""
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):  # a map's pairs
            return {str(k): _json_value(v) for k, v in value}
        return [_json_value(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # NaN: JSON has none
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _check_no_nul(name: str, column: pa.ChunkedArray | pa.Array) -> None:
    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        found = pc.any(pc.match_substring(column, "\x00")).as_py()
    elif _is_json(t) or (_is_list(t) and (_is_json(t.value_type) or _is_list(t.value_type))):
        found = "\\u0000" in str(column.to_pylist()) or "\x00" in str(column.to_pylist())
    elif _is_list(t) and (
        pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    ):
        found = pc.any(pc.match_substring(pc.list_flatten(column), "\x00")).as_py()
    else:
        return
    if found:
        raise ConfigurationError(
            f"{SINK}: column {name!r} holds the NUL character (\\x00), which PostgreSQL text and "
            "jsonb cannot store; remove it in the query, e.g. regexp_replace(col, '\\\\x00', '')"
        )


def _column_values(field: pa.Field, column: pa.Array) -> list[Any]:
    t = column.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        try:
            column = column.cast(pa.timestamp("us", t.tz), safe=True)
        except pa.ArrowInvalid:
            raise ConfigurationError(
                f"{SINK}: column {field.name!r} has nanoseconds; PostgreSQL keeps microseconds: "
                "truncate the timestamps in the query"
            ) from None
    values = column.to_pylist()
    if pg_type(field) == "jsonb":
        from psycopg.types.json import Jsonb

        return [None if v is None else Jsonb(_json_value(v)) for v in values]
    return values


def refuse_nul(batch: pa.RecordBatch) -> None:
    """A clear error for a NUL character in a text or jsonb column of ``batch``."""
    for name, column in zip(batch.schema.names, batch.columns):
        _check_no_nul(name, column)


def copy_rows(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """The rows of ``batch`` as tuples for psycopg's binary COPY (columns in schema order)."""
    refuse_nul(batch)
    columns = [_column_values(f, c) for f, c in zip(batch.schema, batch.columns)]
    return zip(*columns)
