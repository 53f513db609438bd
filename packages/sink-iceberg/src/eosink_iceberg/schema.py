"""The stream's Arrow schema against the table's Iceberg schema.

The type map (a new table's columns, and what a stream column may write into)::

    Arrow (Spark)                          Iceberg
    bool (boolean)                         boolean
    int8, int16, int32 (byte/short/int)    int
    int64 (long)                           long
    float32 (float)                        float
    float64 (double)                       double
    decimal128(p, s) (decimal, p <= 38)    decimal(p, s)
    string, large_string (string)          string
    binary, large_binary (binary)          binary
    date32 (date)                          date
    timestamp[any unit] (timestamp_ntz)    timestamp      (microseconds; nanoseconds refused)
    timestamp[any unit, tz] (timestamp)    timestamptz    (microseconds, UTC)
    list<T> (array)                        list<T>
    struct<...> (struct)                   struct<...>
    map<K, V> (map)                        map<K, V>

Anything else (unsigned integers, durations, intervals, nulls...) is refused by name before
anything is written. Columns are matched by name; a stream column may write into a wider table
column (int into long, float into double); a table column the stream lacks must be optional
and is written as null.
"""

from __future__ import annotations

from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import ConfigurationError


@attrs.frozen
class SchemaCheck:
    """What the stream needs from the table: columns to add (``merge_schema``)."""

    new_columns: tuple[pa.Field, ...] = ()


def _types() -> Any:
    from pyiceberg import types

    return types


def iceberg_type(kind: pa.DataType, where: str, ids: list[int]) -> Any:
    """The Iceberg type of an Arrow type (the table above); ``ids`` hands out field ids."""
    t = _types()
    if pa.types.is_boolean(kind):
        return t.BooleanType()
    if pa.types.is_int8(kind) or pa.types.is_int16(kind) or pa.types.is_int32(kind):
        return t.IntegerType()
    if pa.types.is_int64(kind):
        return t.LongType()
    if pa.types.is_float32(kind):
        return t.FloatType()
    if pa.types.is_float64(kind):
        return t.DoubleType()
    if pa.types.is_decimal(kind) and kind.precision <= 38:
        return t.DecimalType(kind.precision, kind.scale)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return t.StringType()
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return t.BinaryType()
    if pa.types.is_date32(kind):
        return t.DateType()
    if pa.types.is_timestamp(kind):
        return t.TimestamptzType() if kind.tz else t.TimestampType()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        element_id = _next(ids)
        return t.ListType(
            element_id,
            iceberg_type(kind.value_type, f"{where}.element", ids),
            element_required=not kind.value_field.nullable,
        )
    if pa.types.is_map(kind):
        key_id, value_id = _next(ids), _next(ids)
        return t.MapType(
            key_id,
            iceberg_type(kind.key_type, f"{where}.key", ids),
            value_id,
            iceberg_type(kind.item_type, f"{where}.value", ids),
            value_required=not kind.item_field.nullable,
        )
    if pa.types.is_struct(kind):
        fields = []
        for child in kind:
            field_id = _next(ids)
            fields.append(
                t.NestedField(
                    field_id,
                    child.name,
                    iceberg_type(child.type, f"{where}.{child.name}", ids),
                    required=False,
                )
            )
        return t.StructType(*fields)
    raise ConfigurationError(
        f"sink 'iceberg': column {where!r} has Arrow type {kind}, which has no Iceberg type "
        "this sink writes (see the type map in eosink-iceberg's README); cast it in the query "
        "(e.g. to long, string or decimal). Nothing was written."
    )


def _next(ids: list[int]) -> int:
    ids[0] += 1
    return ids[0]


def iceberg_schema(stream: pa.Schema) -> Any:
    """A new table's Iceberg schema: every column optional (Spark's columns are nullable)."""
    from pyiceberg.schema import Schema

    ids = [0]
    fields = []
    for field in stream:
        field_id = _next(ids)
        fields.append((field_id, field))
    nested = [
        _types().NestedField(field_id, f.name, iceberg_type(f.type, f.name, ids), required=False)
        for field_id, f in fields
    ]
    return Schema(*nested)


#: Table column type -> the Iceberg types of stream columns that write into it losslessly.
def _writes_into(stream_type: Any, table_type: Any) -> bool:
    t = _types()
    if stream_type == table_type:
        return True
    if isinstance(table_type, t.LongType) and isinstance(stream_type, t.IntegerType):
        return True
    if isinstance(table_type, t.DoubleType) and isinstance(stream_type, t.FloatType):
        return True
    if isinstance(table_type, t.DecimalType) and isinstance(stream_type, t.DecimalType):
        return (
            stream_type.scale == table_type.scale and stream_type.precision <= table_type.precision
        )
    if isinstance(table_type, t.ListType) and isinstance(stream_type, t.ListType):
        return _writes_into(stream_type.element_type, table_type.element_type)
    if isinstance(table_type, t.MapType) and isinstance(stream_type, t.MapType):
        return _writes_into(stream_type.key_type, table_type.key_type) and _writes_into(
            stream_type.value_type, table_type.value_type
        )
    if isinstance(table_type, t.StructType) and isinstance(stream_type, t.StructType):
        theirs = {f.name: f for f in table_type.fields}
        return all(
            f.name in theirs and _writes_into(f.field_type, theirs[f.name].field_type)
            for f in stream_type.fields
        ) and all(
            not f.required or f.name in {s.name for s in stream_type.fields}
            for f in table_type.fields
        )
    return False


def check_schema(table_schema: Any, stream: pa.Schema, *, table: str, merge: bool) -> SchemaCheck:
    """Check that every stream column writes into the table; list what ``merge`` would add.

    Raises :class:`ConfigurationError` naming the column and the fix.
    """
    by_name = {f.name: f for f in table_schema.fields}
    new: list[pa.Field] = []
    for field in stream:
        mine = iceberg_type(field.type, field.name, [0])
        theirs = by_name.get(field.name)
        if theirs is None:
            if merge:
                new.append(field)
                continue
            raise ConfigurationError(
                f"sink 'iceberg': the stream has column {field.name!r}, which table {table} "
                f"lacks (it has {list(by_name)}); drop it in the query, or set "
                "merge_schema=true (Spark: .option('mergeSchema', 'true')) to add it. Nothing "
                "was written."
            )
        if not _writes_into(mine, theirs.field_type):
            raise ConfigurationError(
                f"sink 'iceberg': column {field.name!r} is {mine} in the stream but "
                f"{theirs.field_type} in table {table}; cast it in the query to the table's "
                "type. Nothing was written."
            )
    missing = [f.name for f in table_schema.fields if f.required and f.name not in stream.names]
    if missing:
        raise ConfigurationError(
            f"sink 'iceberg': table {table} requires column(s) {missing}, which the stream "
            "lacks; select them in the query. Nothing was written."
        )
    return SchemaCheck(new_columns=tuple(new))


def file_schema(table_schema: Any) -> pa.Schema:
    """The Arrow schema of the data files: the table's, with Iceberg field ids."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return schema_to_pyarrow(table_schema, include_field_ids=True)


def to_file_rows(rows: pa.Table, target: pa.Schema) -> pa.Table:
    """``rows`` as the data files hold them: the table's columns, in its order and types
    (missing optional columns as nulls, timestamps as microseconds)."""
    columns = []
    for field in target:
        if field.name in rows.column_names:
            columns.append(_cast(rows.column(field.name), field.type, field.name))
        else:
            columns.append(pa.nulls(rows.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=target)


def _cast(column: Any, kind: pa.DataType, name: str) -> Any:
    if column.type == kind:
        return column
    if pa.types.is_timestamp(column.type) and column.type.unit == "ns":
        raise ConfigurationError(
            f"sink 'iceberg': column {name!r} holds nanosecond timestamps; Iceberg v1/v2 "
            "tables hold microseconds: cast it in the query (Spark's timestamps are "
            "microseconds already). Nothing was written."
        )
    return column.cast(kind, safe=True)
