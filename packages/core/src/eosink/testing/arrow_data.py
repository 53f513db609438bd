"""Hypothesis strategies for the rows the kit's simulation writes: every Arrow type a sink
accepts, nulls included, and the odd values where sinks go wrong (NaN, -0.0, "", "a/b", "%",
"__HIVE_DEFAULT_PARTITION__", far dates, sub-millisecond times, decimals of a fine scale) and,
in data columns of kits that ask for them (``wide``), long strings, line separators other than
newline, and the timestamps of years 1 and 9999.

A sink names the types it accepts (:data:`COLUMN_TYPES` by default) and those it can partition
by; :func:`schemas` draws a schema from them, :func:`record_batches` rows of a schema, and
:func:`comparable` turns a read-back row into something that compares as the readers mean it
(NaN equals NaN; a timestamp is its instant).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

UTC = dt.timezone.utc

#: Strings chosen because each has broken some writer: empty, Hive's null folder, path
#: separators and escapes, whitespace, non-ASCII, things that look like numbers.
ODD_STRINGS = ("", " ", "a/b", "%", "%2F", "a=b", "..", "__HIVE_DEFAULT_PARTITION__", "ü", "0")
ODD_FLOATS = (0.0, -0.0, math.nan, math.inf, -math.inf, 1e20, 1.5, -2.25)
#: Strings where statistics and logs go wrong, for data columns (:func:`record_batches`'
#: ``wide``): longer than the 32 characters Delta's writers truncate string bounds to, longer
#: than the 4 KiB beyond which Parquet writers drop a row group's bounds, and the characters
#: ``str.splitlines`` splits at besides newlines (U+2028, U+2029, U+0085).
WIDE_STRINGS = (
    "b" * 32 + "c",
    "s" * 4097,
    "s" * 4096 + "t",
    "line\u2028separator",
    "\u2029",
    "next\u0085line",
)
#: The ends of the year range the kit's timestamps span in data columns (``wide``).
EXTREME_TIMESTAMPS = (dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999))


def _text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ODD_STRINGS), st.text(st.characters(codec="utf-8"), max_size=6)
    )


def _timestamps(tz: dt.tzinfo | None) -> st.SearchStrategy[dt.datetime]:
    return st.datetimes(
        min_value=dt.datetime(1900, 1, 1),
        max_value=dt.datetime(2200, 1, 1),
        timezones=st.just(tz) if tz else st.none(),
    )


#: name -> (Arrow type, values). The names are what sinks list in their accepted types.
COLUMN_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float32": (pa.float32(), st.one_of(st.sampled_from(ODD_FLOATS), st.floats(width=32))),
    "float64": (pa.float64(), st.one_of(st.sampled_from(ODD_FLOATS), st.floats())),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), _text()),
    "binary": (pa.binary(), st.binary(max_size=8)),
    "date": (pa.date32(), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
    "timestamp": (pa.timestamp("us"), _timestamps(None)),
    "timestamp_utc": (pa.timestamp("us", tz="UTC"), _timestamps(UTC)),
    "decimal": (
        pa.decimal128(12, 3),
        st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False),
    ),
    # a fine scale: str() writes its small values and zero in exponent notation ("0E-10")
    "decimal_fine": (
        pa.decimal128(20, 10),
        st.one_of(
            st.sampled_from([decimal.Decimal(v) for v in ("0", "1E-7", "-1E-7", "1E-10")]),
            st.decimals(min_value=-(10**9), max_value=10**9, places=10, allow_nan=False),
        ),
    ),
    "list_int64": (pa.list_(pa.int64()), st.lists(st.integers(-5, 5), max_size=3)),
    "struct": (
        pa.struct([("a", pa.int64()), ("b", pa.string())]),
        st.fixed_dictionaries({"a": st.integers(-5, 5), "b": _text()}),
    ),
}

#: The scalar types: what every sink is expected to take.
SCALAR_TYPES = tuple(n for n in COLUMN_TYPES if n not in ("list_int64", "struct"))


@st.composite
def schemas(
    draw: st.DrawFn,
    types: Sequence[str] = SCALAR_TYPES,
    partition_types: Sequence[str] = (),
    max_columns: int = 3,
    max_partition_columns: int = 2,
) -> tuple[pa.Schema, tuple[str, ...]]:
    """A schema (``id`` first, then 1..``max_columns`` generated columns) and its partition
    columns (up to ``max_partition_columns`` of ``partition_types``; there is always a data
    column left besides ``id``)."""
    names = draw(st.lists(st.sampled_from(list(types)), min_size=1, max_size=max_columns))
    fields = [pa.field("id", pa.int64(), nullable=False)]
    fields += [pa.field(f"c{i}_{name}", COLUMN_TYPES[name][0]) for i, name in enumerate(names)]
    candidates = [f.name for f in fields[1:] if f.name.split("_", 1)[1] in partition_types]
    partition_by: list[str] = []
    if candidates and max_partition_columns:
        partition_by = draw(
            st.lists(
                st.sampled_from(candidates),
                unique=True,
                max_size=min(max_partition_columns, len(candidates)),
            )
        )
    return pa.schema(fields), tuple(partition_by)


def type_name(field: pa.Field) -> str:
    return field.name.split("_", 1)[1] if field.name != "id" else "int64"


@st.composite
def record_batches(
    draw: st.DrawFn,
    schema: pa.Schema,
    ids: Sequence[int],
    nulls: bool = True,
    values: Mapping[str, st.SearchStrategy[Any]] | None = None,
    wide: bool = False,
    partition_by: Sequence[str] = (),
) -> pa.RecordBatch:
    """One record batch of ``schema`` whose ``id`` column is ``ids``; ``values`` replaces the
    values of some types (type name -> strategy) where a store holds less than Arrow.
    ``wide``: data columns (not those of ``partition_by``, which become folder names) also
    draw :data:`WIDE_STRINGS` and :data:`EXTREME_TIMESTAMPS`."""
    columns = [pa.array(list(ids), pa.int64())]
    for field in list(schema)[1:]:
        name = type_name(field)
        values_of = (values or {}).get(name, COLUMN_TYPES[name][1])
        if wide and field.name not in partition_by:
            values_of = _widened(name, values_of)
        if nulls and field.nullable:
            values_of = st.one_of(st.none(), values_of)
        # A few distinct values per column, so that partition folders hold several rows.
        pool = draw(st.lists(values_of, min_size=1, max_size=3))
        cells = [draw(st.sampled_from(pool)) for _ in ids]
        columns.append(pa.array(cells, field.type))
    return pa.record_batch(columns, schema=schema)


def _widened(name: str, values_of: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    if name == "string":
        return st.one_of(values_of, st.sampled_from(WIDE_STRINGS))
    if name == "timestamp":
        return st.one_of(values_of, st.sampled_from(EXTREME_TIMESTAMPS))
    if name == "timestamp_utc":
        return st.one_of(
            values_of, st.sampled_from([t.replace(tzinfo=UTC) for t in EXTREME_TIMESTAMPS])
        )
    return values_of


def as_float32(value: Any) -> Any:
    """A float as the float32 nearest to it (``None`` stays ``None``)."""
    if value is None:
        return None
    return struct.unpack("<f", struct.pack("<f", value))[0]


def comparable(value: Any) -> Any:
    """A value as readers mean it: NaN equals NaN, an aware timestamp is its UTC instant,
    lists and structs compare by their comparable parts."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, decimal.Decimal):
        return value.normalize() if value.is_finite() else str(value)
    if isinstance(value, list):
        return tuple(comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, comparable(v)) for k, v in value.items()))
    return value
