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
#: PostgreSQL's dates and timestamps, as Arrow counts them (days and microseconds since
#: 1970): from 4714-11-24 BC on; dates end before 5874898-01-01, timestamps hold every int64.
DAYS_MIN, DAYS_END = -2_440_588, 2_145_042_906
MICROS_MIN = -210_866_803_200_000_000
#: What Python's datetime holds (years 1 to 9999): the row-by-row path converts to it.
PY_DAYS_MIN, PY_DAYS_END = -719_162, 2_932_897
PY_MICROS_MIN, PY_MICROS_END = PY_DAYS_MIN * 86_400_000_000, PY_DAYS_END * 86_400_000_000


def _json_value(value: Any, t: pa.DataType) -> Any:
    """A value of Arrow type ``t`` inside a jsonb document: what JSON can hold, the rest as
    text; a map is an object (an empty one too), decided by the type, not by the value."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: _json_value(value.get(f.name), f.type) for f in t}
    if pa.types.is_map(t):
        return {str(_json_value(k, t.key_type)): _json_value(v, t.item_type) for k, v in value}
    if _is_list(t):
        return [_json_value(v, t.value_type) for v in value]
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


def _leaves(array: pa.Array) -> Iterator[pa.Array]:
    """Every array of values nested in ``array`` (struct fields, list items, map keys and
    items), ``array`` itself for a scalar type: the real values, never their text."""
    t = array.type
    if pa.types.is_struct(t):
        for child in array.flatten():
            yield from _leaves(child)
    elif pa.types.is_map(t):
        # the entries (key, item) of the slice's maps only (pyarrow flattens no map)
        entries = pa.ListArray.from_arrays(array.offsets, array.values).flatten()
        for child in entries.flatten():
            yield from _leaves(child)
    elif _is_list(t):
        yield from _leaves(array.flatten())
    else:
        yield array


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _check_no_nul(name: str, column: pa.Array) -> None:
    """PostgreSQL's text and jsonb cannot hold the NUL character: look for it in every text
    value of the column, nested ones included (a jsonb document's strings, map keys)."""
    for leaf in _leaves(column):
        if _is_text(leaf.type) and len(leaf) and pc.any(pc.match_substring(leaf, "\x00")).as_py():
            raise ConfigurationError(
                f"{SINK}: column {name!r} holds the NUL character (\\x00), which PostgreSQL "
                "text and jsonb cannot store; remove it in the query, e.g. "
                "regexp_replace(col, '\\\\x00', '')"
            )


#: Arrow's time units against microseconds: (multiply, divide) a bound in microseconds by.
_UNITS = {"s": (1, 1_000_000), "ms": (1, 1_000), "us": (1, 1), "ns": (1_000, 1)}


def _check_range(name: str, column: pa.Array, row_by_row: bool) -> None:
    """Dates and timestamps PostgreSQL cannot hold are refused (encoded as they are, they
    would wrap to another instant or become infinity); row by row, also those outside years
    1 to 9999, which Python (psycopg's dumpers, the jsonb text) cannot hold."""
    for leaf in _leaves(column):
        t = leaf.type
        if pa.types.is_date32(t):
            what, values = "date", leaf.cast(pa.int32())
            low, end = (PY_DAYS_MIN, PY_DAYS_END) if row_by_row else (DAYS_MIN, DAYS_END)
        elif pa.types.is_timestamp(t):
            what, values = "timestamp", leaf.cast(pa.int64())
            bounds = (PY_MICROS_MIN, PY_MICROS_END) if row_by_row else (MICROS_MIN, None)
            times, per = _UNITS[t.unit]
            low = bounds[0] * times // per
            end = None if bounds[1] is None else bounds[1] * times // per
        else:
            continue
        if values.null_count == len(values):
            continue
        least, most = (x.as_py() for x in pc.min_max(values).values())
        if least < low or (end is not None and most >= end):
            span = (
                "years 1 to 9999, which this batch's path holds (it goes row by row: it has a "
                "numeric, array or json column)"
                if row_by_row
                else "PostgreSQL's range (from 4713 BC)"
            )
            raise ConfigurationError(
                f"{SINK}: column {name!r} holds a {what} outside {span}; it cannot be stored as "
                "it is: filter or clamp those values in the query"
            )


def check_values(batch: pa.RecordBatch, row_by_row: bool) -> None:
    """A clear error, before anything of ``batch`` is sent, for a value PostgreSQL (or the
    path that sends it) cannot hold: a NUL character in text or jsonb, a date or timestamp out
    of range."""
    for name, column in zip(batch.schema.names, batch.columns):
        _check_no_nul(name, column)
        _check_range(name, column, row_by_row)


def _utc(t: pa.DataType) -> pa.DataType:
    """``t`` with every zoned timestamp in it (nested ones too) zoned in UTC."""
    if pa.types.is_timestamp(t) and t.tz:
        return pa.timestamp(t.unit, "UTC")
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_utc(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_utc(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_utc(t.value_type)))
    return t  # maps and fixed-size lists: as they are (their keys are rarely instants)


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
        t = column.type
    if _utc(t) != t:
        # the same instants in UTC: in a zone west of UTC, year 1 would be year 0 locally,
        # which Python cannot hold
        column = column.cast(_utc(t))
    try:
        values = column.to_pylist()
    except (OverflowError, ValueError) as exc:  # e.g. a zoned instant nested in a list
        raise ConfigurationError(
            f"{SINK}: column {field.name!r} holds a value Python cannot convert ({exc}); this "
            "batch goes row by row (it has a numeric, array or json column): cast the column "
            "in the query (e.g. timestamps to UTC)"
        ) from None
    if pg_type(field) == "jsonb":
        from psycopg.types.json import Jsonb

        return [None if v is None else Jsonb(_json_value(v, t)) for v in values]
    return values


def copy_rows(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """The rows of ``batch`` as tuples for psycopg's binary COPY (columns in schema order)."""
    check_values(batch, row_by_row=True)
    columns = [_column_values(f, c) for f, c in zip(batch.schema, batch.columns)]
    return zip(*columns)
