"""Arrow schemas as Delta wants them, and the check of a stream's schema against a table's.

Spark hands timestamps with the session's time zone as Arrow metadata (often ``Etc/UTC``);
Arrow stores the instants in UTC whatever the zone says, and delta-rs accepts only ``UTC``: the
zone is rewritten, the values are unchanged. Naive timestamps (Spark's ``TimestampNTZ``) stay
naive and become Delta ``timestamp_ntz``.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import ConfigurationError

#: Stream type -> table type widenings that Delta applies on write (a lossless cast).
WIDENINGS = {
    ("byte", "short"),
    ("byte", "integer"),
    ("byte", "long"),
    ("short", "integer"),
    ("short", "long"),
    ("integer", "long"),
    ("float", "double"),
}
ARROW_OF = {
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
}

SIGNED_OF = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Delta accepts for ``t``: UTC microsecond timestamps, plain strings."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz is not None else None)
    if pa.types.is_unsigned_integer(t):
        # Delta has no unsigned integers: delta-rs maps uintN to the signed type of its width
        # and casts the values, checked (a value beyond it fails: see WritePlan.prepare).
        return SIGNED_OF[t.bit_width]
    if pa.types.is_dictionary(t):
        return normalize_type(t.value_type)
    if pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(normalize_type(f.type)) for f in t])
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        item = t.value_field.with_type(normalize_type(t.value_type))
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_map(t):
        return pa.map_(
            normalize_type(t.key_type),
            t.item_field.with_type(normalize_type(t.item_type)),
        )
    return t


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(normalize_type(f.type)) for f in schema])


def delta_fields(schema: Any) -> dict[str, dict[str, Any]]:
    """A Delta schema's fields by name, as the protocol's JSON (``type``, ``nullable``)."""
    return {f["name"]: f for f in json.loads(schema.to_json())["fields"]}


def fields_of(schema_string: str) -> dict[str, dict[str, Any]]:
    """:func:`delta_fields` of a ``metaData.schemaString`` (the protocol's JSON of the schema)."""
    return {f["name"]: f for f in json.loads(schema_string)["fields"]}


def delta_schema_of(arrow: pa.Schema) -> Any:
    """The Delta schema of an (already normalized) Arrow schema, or a clear error."""
    from deltalake import Schema

    for field in arrow:
        try:
            Schema.from_arrow(pa.schema([field]))
        except Exception as exc:  # noqa: BLE001 - delta-rs raises plain errors for types
            raise ConfigurationError(
                f"sink 'delta': column {field.name!r} has type {field.type}, which Delta tables "
                f"cannot store ({str(exc).splitlines()[0]}); cast it in the query to a supported "
                "type (e.g. string, long, double, decimal, date, timestamp)"
            ) from None
    return Schema.from_arrow(arrow)


def type_text(t: Any) -> str:
    return t if isinstance(t, str) else json.dumps(t, separators=(",", ":"))


@attrs.frozen
class WritePlan:
    """What executors do to each Arrow batch before writing it: select, cast, check nulls."""

    data_schema: pa.Schema  # the Parquet files' schema: data columns, in the stream's order
    not_null: tuple[str, ...] = ()  # columns the table declares NOT NULL
    #: The partition columns in the table's types: a value is named as the table holds it (a
    #: float stream's 0.1 in a double table is the double 0.10000000149011612, as in the data).
    partition_schema: pa.Schema = attrs.field(factory=lambda: pa.schema([]))
    #: The table's data columns the stream lacks, written as null (name, Delta type as JSON):
    #: the files' stats count them as null.
    missing: tuple[tuple[str, str], ...] = ()

    def partition_keys(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch's partition columns, cast to the table's types."""
        columns = [_cast(batch.column(f.name), f) for f in self.partition_schema]
        return pa.RecordBatch.from_arrays(columns, schema=self.partition_schema)

    def prepare(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = [_cast(batch.column(f.name), f) for f in self.data_schema]
        for name in self.not_null:
            if name in batch.schema.names and batch.column(name).null_count:
                raise not_null_error(name)
        return pa.RecordBatch.from_arrays(columns, schema=self.data_schema)


def _cast(column: pa.Array, field: pa.Field) -> pa.Array:
    """``column`` in the table's type: a lossless widening, or an unsigned integer as the signed
    type delta-rs gives it, checked (a value beyond it is an error, never a wrapped number)."""
    if column.type == field.type:
        return column
    try:
        return column.cast(field.type)
    except pa.ArrowInvalid as exc:
        raise ConfigurationError(
            f"sink 'delta': column {field.name!r} ({column.type}) holds a value the table's "
            f"{field.type} cannot hold ({exc}); Delta has no unsigned integers, so delta-rs and "
            "this sink store uintN as the signed type of its width: cast it in the query to a "
            "wider type (e.g. long, or decimal(20,0) for uint64). Nothing of this batch was "
            "committed."
        ) from None


def not_null_error(name: str) -> ConfigurationError:
    return ConfigurationError(
        f"sink 'delta': column {name!r} is NOT NULL in the table but the batch holds "
        "nulls; filter or fill them in the query (e.g. coalesce), or write to a table "
        "whose column is nullable"
    )


def describe(fields: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"{n} {type_text(f['type'])}" for n, f in fields.items())


@attrs.frozen
class SchemaCheck:
    """The result of comparing the stream's schema with the table's."""

    new_columns: tuple[pa.Field, ...]  # in the stream, not in the table (merge_schema adds them)
    casts: dict[str, pa.DataType]  # widenings applied on write


def check_schema(
    table_fields: dict[str, dict[str, Any]],
    stream: pa.Schema,
    *,
    where: str,
    merge_schema: bool,
) -> SchemaCheck:
    """Compare the (normalized) stream schema with the table's; raise a clear error on mismatch."""
    stream_fields = delta_fields(delta_schema_of(stream))
    problems, casts, new = [], {}, []
    for name, field in stream_fields.items():
        table_field = table_fields.get(name)
        if table_field is None:
            folded = [n for n in table_fields if n.lower() == name.lower()]
            if folded:
                problems.append(
                    f"column {name!r} is called {folded[0]!r} in the table (names are "
                    "case-sensitive here): rename it in the query"
                )
            else:
                new.append(stream.field(name))
            continue
        have, want = field["type"], table_field["type"]
        if have == want:
            continue
        if isinstance(have, str) and isinstance(want, str) and (have, want) in WIDENINGS:
            casts[name] = ARROW_OF[want]
            continue
        problems.append(
            f"column {name!r} is {type_text(want)} in the table but {type_text(have)} in the "
            f"stream: cast it in the query (e.g. col({name!r}).cast({type_text(want)!r}))"
        )
    for name, table_field in table_fields.items():
        if name not in stream_fields and not table_field.get("nullable", True):
            problems.append(
                f"column {name!r} is NOT NULL in the table and missing from the stream: "
                "select it in the query"
            )
    if new and not merge_schema:
        names = ", ".join(repr(f.name) for f in new)
        problems.append(
            f"the stream has columns the table lacks ({names}): drop them in the query, or set "
            "option mergeSchema=true to add them to the table"
        )
    if problems:
        raise ConfigurationError(
            f"sink 'delta': the stream's schema does not match the table at {where}. Table: "
            f"[{describe(table_fields)}]; stream: [{describe(stream_fields)}]. "
            + "; ".join(problems)
            + ". Nothing was written."
        )
    return SchemaCheck(new_columns=tuple(new), casts=casts)
