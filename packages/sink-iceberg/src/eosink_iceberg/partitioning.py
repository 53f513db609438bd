"""Partition specs: parsed from ``partition_by`` for a new table, and applied to rows.

Rows are split by the table's partition spec as Iceberg defines it: each field's transform
(identity, year, month, day, hour, bucket, truncate) computed by pyiceberg's own transforms on
the values in Iceberg's representation (dates as days, timestamps as microseconds since the
epoch, UTC), so ``bucket[N]`` is Iceberg's 32-bit murmur3 of the value's canonical bytes and
agrees with every other Iceberg writer. Other transforms (``void``, unknown ones of newer
specs) are refused with a clear error: files in the wrong partition would be skipped by readers
that prune on it.

Grouping is by :func:`eosink.plugin.group_by_text`: rows share a file exactly when every field's
partition value is the same, NaN and ``-0.0``/``0.0`` included (they are distinct values of an
identity partition), never by Arrow equality, which loses or duplicates those rows.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import ConfigurationError, group_by_text

#: ``name``, ``fn(col)``, ``fn(N, col)``
_SPEC = re.compile(r"^\s*(?:(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?([^()]+?)\s*\)|([^()]+?))\s*$")
SUPPORTED = ("identity", "year", "month", "day", "hour", "bucket", "truncate")


@attrs.frozen
class FieldSpec:
    """One entry of ``partition_by``: a transform of a source column."""

    transform: str  # identity, year, month, day, hour, bucket, truncate
    column: str
    argument: int | None = None

    @property
    def text(self) -> str:
        if self.argument is not None:
            return f"{self.transform}[{self.argument}]"
        return self.transform

    @property
    def field_name(self) -> str:
        """The partition field's name, as Iceberg's Spark DDL names it."""
        return self.column if self.transform == "identity" else f"{self.column}_{self.transform}"


def parse_field(text: str) -> FieldSpec:
    match = _SPEC.match(text)
    if not match:
        raise ConfigurationError(
            f"sink 'iceberg': partition_by entry {text!r} is not a column or a transform; use "
            "col, year(col), month(col), day(col), hour(col), bucket(N, col) or truncate(W, col)"
        )
    name, number, column, plain = match.groups()
    if plain is not None:
        return FieldSpec("identity", plain.strip())
    name = name.lower()
    if name in ("years", "months", "days", "hours"):
        name = name[:-1]
    if name not in SUPPORTED:
        raise ConfigurationError(
            f"sink 'iceberg': partition transform {name!r} is not supported; use identity, "
            "year, month, day, hour, bucket or truncate. Nothing was written."
        )
    needs = name in ("bucket", "truncate")
    if needs != (number is not None) or (needs and int(number) < 1):
        raise ConfigurationError(
            f"sink 'iceberg': partition_by entry {text!r}: bucket and truncate take a positive "
            "number first (bucket(16, id), truncate(4, name)); the others only a column"
        )
    return FieldSpec(name, column.strip(), int(number) if needs else None)


def transform_of(field: FieldSpec) -> Any:
    from pyiceberg.transforms import parse_transform

    return parse_transform(field.text)


def new_spec(fields: tuple[str, ...], schema: Any) -> Any:
    """A new table's ``PartitionSpec`` from ``partition_by`` and its (fresh) Iceberg schema."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec

    parts = []
    for i, text in enumerate(fields):
        spec = parse_field(text)
        try:
            source = schema.find_field(spec.column)
        except ValueError:
            raise ConfigurationError(
                f"sink 'iceberg': partition_by names column {spec.column!r}, which the stream "
                f"lacks (it has {[f.name for f in schema.fields]}); partition by a column of "
                "the query"
            ) from None
        transform = transform_of(spec)
        if not transform.can_transform(source.field_type):
            raise ConfigurationError(
                f"sink 'iceberg': partition transform {spec.text} cannot apply to column "
                f"{spec.column!r} of type {source.field_type}"
            )
        parts.append(
            PartitionField(
                source_id=source.field_id,
                field_id=1000 + i,
                transform=transform,
                name=spec.field_name,
            )
        )
    return PartitionSpec(*parts)


def spec_fields(spec: Any, schema: Any) -> tuple[tuple[str, str], ...]:
    """The table spec as (transform text, source column) pairs."""
    return tuple((str(f.transform), schema.find_column_name(f.source_id)) for f in spec.fields)


def check_spec(spec: Any, schema: Any, table: str, wanted: tuple[str, ...]) -> None:
    """Refuse a spec whose transforms this sink cannot compute, or one other than asked."""
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        YearTransform,
    )

    known = (
        IdentityTransform,
        YearTransform,
        MonthTransform,
        DayTransform,
        HourTransform,
        BucketTransform,
        TruncateTransform,
    )
    for field in spec.fields:
        if not isinstance(field.transform, known):
            raise ConfigurationError(
                f"sink 'iceberg': table {table} is partitioned by {field.transform} of "
                f"{schema.find_column_name(field.source_id)!r}, a transform this sink does not "
                "compute (it computes identity, year, month, day, hour, bucket and truncate); "
                "write this table with another engine, or evolve its spec. Nothing was written."
            )
    if wanted:
        asked = tuple((str(transform_of(parse_field(w))), parse_field(w).column) for w in wanted)
        have = spec_fields(spec, schema)
        if asked != have:
            raise ConfigurationError(
                f"sink 'iceberg': partition_by asks for {list(wanted)} but table {table} is "
                f"partitioned by {[f'{t}({c})' for t, c in have]}; drop partition_by or make "
                "it match the table"
            )


def transform_input(column: Any) -> Any:
    """A column's values in Iceberg's representation, as the transforms take them."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if pa.types.is_timestamp(kind):
        return column.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
    if pa.types.is_date32(kind):
        return column.cast(pa.int32())
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return column.cast(pa.string())
    if pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return column.cast(pa.binary())
    return column


@attrs.frozen
class Partitioner:
    """Splits rows by a partition spec (built on the executor from the spec's JSON)."""

    spec: Any
    schema: Any

    def split(self, rows: pa.Table) -> Iterator[tuple[Any, pa.Table]]:
        """(partition ``Record`` in Iceberg's representation, rows of that partition)."""
        for _, partition, part in self.split_keyed(rows):
            yield partition, part

    def split_keyed(self, rows: pa.Table) -> Iterator[tuple[tuple, Any, pa.Table]]:
        """(key, partition ``Record``, rows): equal keys across calls mean one partition."""
        from pyiceberg.typedef import Record

        if not self.spec.fields:
            yield (), Record(), rows
            return
        groups = None
        for field in self.spec.fields:
            source = self.schema.find_field(field.source_id)
            one = group_by_text(
                pa.table({"v": transform_input(rows.column(source.name))}),
                ["v"],
                _text_of(_checked(field, source)),
            )
            groups = one if groups is None else _combine(groups, one)
        assert groups is not None
        for key, part in groups.split(rows):
            yield key, Record(*(_value(k) for k in key)), part


def _checked(field: Any, source: Any) -> Any:
    """The field's transform, refusing a result its type cannot hold: ``truncate`` rounds down,
    so a value near an int's (or a decimal's) lower bound truncates below it (Iceberg's Java
    writers wrap such an int around; a reader pruning on it would skip the row)."""
    from pyiceberg.types import DecimalType, IntegerType, LongType

    function = field.transform.transform(source.field_type)
    kind = source.field_type
    if str(field.transform).startswith("truncate") and isinstance(
        kind, (IntegerType, LongType, DecimalType)
    ):
        if isinstance(kind, DecimalType):
            low = -(10 ** (kind.precision - kind.scale)) + 10 ** (-kind.scale)
        else:
            low = -(2**31) if isinstance(kind, IntegerType) else -(2**63)

        def bounded(value: Any) -> Any:
            out = function(value)
            if out is not None and out < low:
                raise ConfigurationError(
                    f"sink 'iceberg': {field.transform} of {source.name!r} value {value} is "
                    f"{out}, below what type {kind} holds; the partition value cannot be "
                    "written. Filter such values out in the query or partition by another "
                    "transform. Nothing was committed."
                )
            return out

        return bounded
    return function


def _text_of(function: Any) -> Any:
    """A column's text for :func:`group_by_text`: its partition value; floats by ``repr``, so
    every NaN is one group and ``-0.0`` another than ``0.0`` (Python's ``==`` says otherwise)."""

    def text(value: Any, kind: pa.DataType) -> Hashable:
        out = function(value)
        return ("float", repr(out)) if isinstance(out, float) else ("value", out)

    return text


def _value(key: tuple[str, Any]) -> Any:
    return float(key[1]) if key[0] == "float" else key[1]


def _combine(left: Any, right: Any) -> Any:
    """The groups of two fields together: one group per pair of groups that has rows."""
    import pyarrow.compute as pc

    from eosink.plugin import PartitionGroups

    width = len(right.keys)
    encoded = pc.dictionary_encode(pc.add(pc.multiply(left.ids, width), right.ids))
    keys = [left.keys[v // width] + right.keys[v % width] for v in encoded.dictionary.to_pylist()]
    return PartitionGroups(keys=tuple(keys), ids=encoded.indices.cast(pa.int64()))
