"""The executor half: Arrow batches to Parquet files in the table folder, with Delta stats.

Files get names no other attempt can produce (the attempt's id, the partition, Spark's attempt
number), so a retried or speculative task never overwrites another's file. A file is invisible
to readers until a commit adds it to the Delta log; files of failed attempts stay out of the log
(orphans) and Delta's ``VACUUM`` removes them once older than its retention.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from eosink.encodings import DictionaryChoice
from eosink.partitions import group_by_text
from eosink_delta.schema import WritePlan
from eosink_delta.store import filesystem, path_in
from eosink_delta.table import partition_dir, partition_value

#: Delta's writers keep the first 32 characters of a string's bound (``delta.dataSkipping
#: StringPrefixLength``'s default), and make the max an upper bound again (:func:`truncated_max`).
STATS_STRING_LIMIT = 32
#: The tie-breakers Delta's writer appends to a truncated max: the highest ASCII character when
#: the first character cut off is below it, else the highest code point (the highest in UTF-8
#: byte order, the order every reader compares strings in).
ASCII_MAX = "\x7f"
UNICODE_MAX = "\U0010ffff"


def truncated_min(value: str, limit: int = STATS_STRING_LIMIT) -> str:
    """A lower bound of ``value`` at most ``limit`` characters long: its prefix."""
    return value[:limit]


def truncated_max(value: str, limit: int = STATS_STRING_LIMIT) -> str | None:
    """An upper bound of ``value`` at most about ``2 * limit`` characters long, as Delta's
    writer truncates a max: the prefix, extended over highest code points (no character is
    above them), then a character above the first one cut off. ``None`` (no bound) when
    ``value`` runs on with highest code points past twice the limit."""
    if len(value) <= limit:
        return value
    end = limit
    while end <= 2 * limit:
        if end >= len(value):
            return value
        if value[end] == UNICODE_MAX:
            end += 1
        elif value[end] < ASCII_MAX:
            return value[:end] + ASCII_MAX
        else:
            return value[:end] + UNICODE_MAX
    return None


@attrs.frozen
class DeltaFile:
    """One Parquet file an attempt wrote, as its add action will describe it."""

    path: str  # relative to the table root, not URL-encoded
    size: int
    rows: int
    partition_values: dict[str, str | None]
    modification_time: int
    stats: str


@attrs.frozen
class DeltaMessage:
    """One partition attempt's files (the commit message)."""

    files: tuple[DeltaFile, ...]
    rows: int


def _stat_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        # Delta stats hold milliseconds; callers widen min down and max up.
        return value
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None  # a footer's bounds never are NaN (Parquet leaves NaN out of them)
    if isinstance(value, bytes):
        return None
    return value


def _ms_text(value: dt.datetime, *, up: bool, naive: bool) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    micros = value.microsecond % 1000
    value = value.replace(microsecond=value.microsecond - micros)
    if up and micros:
        try:
            value += dt.timedelta(milliseconds=1)
        except OverflowError:
            # the last millisecond of year 9999 has no millisecond above it: the max is
            # truncated, as delta-rs' own writer writes every max, and delta-rs and
            # delta-kernel still read the row with a filter on its value (test_file_stats.py)
            pass
    text = value.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return text if naive else text + "Z"


def _json(value: Any) -> str:
    if isinstance(value, dict):
        items = (f"{_json(str(k))}:{_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, float) and math.isinf(value):
        # JSON has no infinity: Delta's Spark writer writes the bound as the string
        # "Infinity" ("-Infinity"), which delta-rs and delta-kernel read as the float. Left
        # out, delta-rs' pyarrow dataset reads the missing bound as ``col >= null`` and a
        # filtered read skips the file.
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if isinstance(value, decimal.Decimal):
        # Plain digits, never Python's exponent form ("0E-10", "1.000E-7"): delta-rs parses a
        # decimal bound from the number's text and cannot read an exponent (the bound becomes
        # null and a filtered read skips the file); a JSON string is not a number at all.
        return format(value, "f")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def stats_json(stats: dict[str, Any]) -> str:
    """An add action's ``stats`` string, in UTF-8 rather than ``\\u`` escapes: Delta's Rust
    readers (delta-rs, delta-kernel-rs) and DuckDB read an escaped character beyond Unicode's
    BMP (a surrogate pair) back as another one, and a min/max changed that way prunes a file
    holding the row. Decimal bounds are JSON numbers in plain digits."""
    return _json(stats)


def _bounded_type(t: pa.DataType) -> bool:
    """Types whose min/max go into the stats, as delta-rs' writer puts them there."""
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
        or pa.types.is_boolean(t)
    )


@attrs.define
class _ColumnStats:
    """One column's stats, gathered over a file's row groups."""

    nulls: int = 0
    nulls_known: bool = True
    lo: Any = None
    hi: Any = None
    #: False once a row group holding values has no min/max (a Parquet writer drops those of
    #: a value over 4 KiB): the other row groups' bounds would be narrower than the file.
    bounded: bool = True


def _leaf_paths(schema: pa.Schema) -> list[tuple[str, ...] | None]:
    """The Parquet leaf columns of ``schema`` in the file's order: the path of a leaf reached
    through structs only (the leaves Delta's nested stats describe), ``None`` for a leaf inside
    a list or a map (no stats, as in Delta's writers)."""
    out: list[tuple[str, ...] | None] = []

    def walk(t: pa.DataType, path: tuple[str, ...] | None) -> None:
        if pa.types.is_struct(t):
            for f in t:
                walk(f.type, None if path is None else (*path, f.name))
        elif pa.types.is_map(t):
            walk(t.key_type, None)
            walk(t.item_type, None)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(t.value_type, None)
        else:
            out.append(path)

    for field in schema:
        walk(field.type, (field.name,))
    return out


def _gather(metadata: Any, schema: pa.Schema) -> dict[tuple[str, ...], _ColumnStats]:
    """Each leaf column's stats over the row groups, by its path (a struct field's leaf: the
    struct's name, then the fields'). A leaf's null count counts the rows where it or a struct
    around it is null, as Delta's writers count a nested field's nulls."""
    paths = _leaf_paths(schema)
    columns: dict[tuple[str, ...], _ColumnStats] = {}
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for i in range(group.num_columns):
            column = group.column(i)
            path = paths[i] if i < len(paths) else None
            if path is None or ".".join(path) != column.path_in_schema:
                continue  # inside a list or a map
            c = columns.setdefault(path, _ColumnStats())
            s = column.statistics
            if s is None or not s.has_null_count:
                c.nulls_known = c.bounded = False
                continue
            c.nulls += s.null_count
            if s.null_count >= group.num_rows:
                continue  # only nulls: nothing to bound
            if not s.has_min_max:
                c.bounded = False
                continue
            lo, hi = _stat_value(s.min), _stat_value(s.max)
            if lo is None or hi is None:
                c.bounded = False
                continue
            c.lo = lo if c.lo is None else min(c.lo, lo)
            c.hi = hi if c.hi is None else max(c.hi, hi)
    return columns


def _from_data(column: Any) -> tuple[Any, Any]:
    import pyarrow.compute as pc

    found = pc.min_max(column)
    return found["min"].as_py(), found["max"].as_py()


def _field_data(column: Any, fields: tuple[str, ...]) -> Any:
    """A struct column's field's values, null where a struct around it is null."""
    import pyarrow.compute as pc

    for name in fields:
        column = pc.struct_field(column, name)
    return column


@attrs.define
class _Stats:
    """The nested dicts of one struct level (the file's top level the outermost)."""

    mins: dict[str, Any] = attrs.field(factory=dict)
    maxs: dict[str, Any] = attrs.field(factory=dict)
    nulls: dict[str, Any] = attrs.field(factory=dict)


def _describe(
    name: str,
    t: pa.DataType,
    path: tuple[str, ...],
    gathered: dict[tuple[str, ...], _ColumnStats],
    read_column: Callable[[str], Any] | None,
    out: _Stats,
) -> bool:
    """Puts column ``name``'s stats into ``out``; True when it has a type with bounds (a
    struct: a field of one), whose bounds then go in, as an empty object if none is known:
    delta-rs' writer writes one, and its pyarrow dataset reads a struct without one as
    ``s >= null`` (``s IS NULL`` then reads no row, ``s IS NOT NULL`` every row)."""
    if pa.types.is_struct(t):
        inner = _Stats()
        bounded = False
        for f in t:
            bounded |= _describe(f.name, f.type, (*path, f.name), gathered, read_column, inner)
        if inner.nulls:
            out.nulls[name] = inner.nulls
        if bounded:
            out.mins[name], out.maxs[name] = inner.mins, inner.maxs
        return bounded
    c = gathered.get(path)
    if c is None:
        return False  # a list or map: no stats
    if not _bounded_type(t):
        if c.nulls_known and len(path) == 1:
            out.nulls[name] = c.nulls
        return False  # in a struct, no stats at all: delta-rs' writer writes none
    if c.nulls_known:
        out.nulls[name] = c.nulls
    lo, hi = c.lo, c.hi
    if not c.bounded:
        lo = hi = None
        if read_column is not None and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            lo, hi = _from_data(_field_data(read_column(path[0]), path[1:]))
    if lo is None or hi is None:
        return True
    if isinstance(lo, str):
        lo, hi = truncated_min(lo), truncated_max(hi)
    elif isinstance(lo, dt.datetime):
        naive = t.tz is None
        lo, hi = _ms_text(lo, up=False, naive=naive), _ms_text(hi, up=True, naive=naive)
    out.mins[name] = lo
    if hi is not None:
        out.maxs[name] = hi
    return True


def file_stats(
    metadata: Any,
    schema: pa.Schema,
    rows: int,
    *,
    missing: tuple[tuple[str, str], ...] = (),
    read_column: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """numRecords, nullCount and minValues/maxValues of a Parquet file, from its footer.

    Never narrower than the data: a column with a row group whose footer has no bounds gets
    its bounds from the data (``read_column``, a top-level column by name; strings only: a
    Parquet writer drops the min/max of a value over 4 KiB) or none. Strings are truncated as
    Delta's writers truncate them, booleans bounded as delta-rs' writer does. A struct's stats
    are nested as its fields are (Delta's protocol, "Per-file Statistics"): each field's null
    count and bounds. ``missing``: the table's columns the file does not hold (name, Delta
    type as JSON), counted as all null, as delta-rs' writer counts them (no nullCount reads
    as "unknown", no bound as ``col >= null`` in delta-rs' pyarrow dataset, where a filtered
    read then skips the file)."""
    gathered = _gather(metadata, schema)
    out = _Stats()
    for field in schema:
        _describe(field.name, field.type, (field.name,), gathered, read_column, out)
    for name, type_json in missing:
        type_ = json.loads(type_json)
        out.nulls[name] = _all_null(type_, rows)
        empty = _no_bounds(type_)
        if empty is not None:
            out.mins[name], out.maxs[name] = empty, dict(empty)
    stats: dict[str, Any] = {"numRecords": rows}
    if out.mins:
        stats["minValues"] = out.mins
    if out.maxs:
        stats["maxValues"] = out.maxs
    if out.nulls:
        stats["nullCount"] = out.nulls
    return stats


def _all_null(type_: Any, rows: int) -> Any:
    """The nullCount of a column the file lacks (``type_`` its Delta type): every row, in each
    field of a struct that has bounds (delta-rs' writer counts no other field, and polars'
    delta-kernel scan fails on a struct's count it does not expect)."""
    if isinstance(type_, dict) and type_.get("type") == "struct":
        return {
            f["name"]: _all_null(f["type"], rows)
            for f in type_.get("fields", [])
            if _bounded_delta_type(f["type"]) or _no_bounds(f["type"]) is not None
        }
    return rows


def _bounded_delta_type(type_: Any) -> bool:
    return isinstance(type_, str) and (type_ in _BOUNDED_DELTA_TYPES or type_.startswith("decimal"))


#: Delta's primitive types that have bounds in the stats (decimals besides: ``decimal(p,s)``).
_BOUNDED_DELTA_TYPES = frozenset(
    "byte short integer long float double string date timestamp timestamp_ntz boolean".split()
)


def _no_bounds(type_: Any) -> dict[str, Any] | None:
    """The bounds of a struct column the file lacks, as delta-rs' writer writes them: an
    object per struct level that has a type with bounds (no value in it); ``None`` for a
    column without such a type."""
    if not (isinstance(type_, dict) and type_.get("type") == "struct"):
        return None
    out: dict[str, Any] = {}
    bounded = False
    for f in type_.get("fields", []):
        inner = _no_bounds(f["type"])
        if inner is not None:
            out[f["name"]] = inner
            bounded = True
        elif _bounded_delta_type(f["type"]):
            bounded = True
    return out if bounded else None


@attrs.define
class _OpenFile:
    relative: str
    stream: Any
    values: dict[str, str | None]
    #: opened at the first row group, whose rows choose the dictionary columns
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = attrs.field(factory=list)
    pending_rows: int = 0
    rows: int = 0


@attrs.define
class PartitionWriter:
    """Writes one task attempt's rows, one file per Delta partition value."""

    root: str
    storage_options: dict[str, Any]
    prefix: str  # unique per attempt
    plan: WritePlan
    partition_by: tuple[str, ...]
    compression: str
    row_group_rows: int
    stats: bool
    fs: Any = None
    base: str = ""
    files: dict[tuple, _OpenFile] = attrs.field(factory=dict)
    made_dirs: set = attrs.field(factory=set)
    dictionaries: DictionaryChoice = attrs.field(factory=DictionaryChoice)  # once per task

    def __attrs_post_init__(self) -> None:
        self.fs, self.base = filesystem(self.root, self.storage_options)

    def write_all(self, batches: Iterator[pa.RecordBatch]) -> DeltaMessage:
        try:
            for batch in batches:
                if batch.num_rows:
                    self.add(batch)
            done = tuple(self.close(f) for f in self.files.values())
        except BaseException:
            self.discard()
            raise
        return DeltaMessage(files=done, rows=sum(f.rows for f in done))

    def add(self, batch: pa.RecordBatch) -> None:
        if not self.partition_by:
            self.buffer((), self.plan.prepare(batch))
            return
        # Grouped by the partition value strings, never by value equality: "" and null (both
        # null in Delta), or every NaN, are one partition; -0.0 and 0.0 two (eosink.partitions).
        groups = group_by_text(self.plan.partition_keys(batch), self.partition_by, partition_value)
        for values, part in groups.split(self.plan.prepare(batch)):
            self.buffer(values, part)

    def buffer(self, values: tuple[str | None, ...], batch: pa.RecordBatch) -> None:
        open_file = self.files.get(values) or self.open(values)
        open_file.pending.append(batch)
        open_file.pending_rows += batch.num_rows
        if open_file.pending_rows >= self.row_group_rows:
            self.flush(open_file)

    def open(self, values: tuple[str | None, ...]) -> _OpenFile:
        folder = partition_dir(self.partition_by, values) if self.partition_by else ""
        name = f"{self.prefix}-{len(self.files):04d}.{self.compression.lower()}.parquet"
        relative = f"{folder}/{name}" if folder else name
        if folder and folder not in self.made_dirs:
            self.fs.create_dir(path_in(self.base, folder), recursive=True)
            self.made_dirs.add(folder)
        stream = self.fs.open_output_stream(path_in(self.base, relative))
        opened = _OpenFile(relative, stream, dict(zip(self.partition_by, values)))
        self.files[values] = opened
        return opened

    def flush(self, f: _OpenFile) -> None:
        if f.pending:
            rows = pa.Table.from_batches(f.pending, schema=self.plan.data_schema)
            if f.writer is None:
                f.writer = pq.ParquetWriter(
                    f.stream,
                    self.plan.data_schema,
                    compression=None if self.compression.lower() == "none" else self.compression,
                    write_statistics=self.stats,
                    use_dictionary=self.dictionaries(rows),
                )
            f.writer.write_table(rows)
            f.rows += f.pending_rows
            f.pending, f.pending_rows = [], 0

    def close(self, f: _OpenFile) -> DeltaFile:
        self.flush(f)
        assert f.writer is not None  # a file is opened for rows, and flushed here
        f.writer.close()
        size = f.stream.tell()
        f.stream.close()
        stats: dict[str, Any] = {"numRecords": f.rows}
        if self.stats:
            path = path_in(self.base, f.relative)
            stats = file_stats(
                f.writer.writer.metadata,
                self.plan.data_schema,
                f.rows,
                missing=self.plan.missing,
                read_column=lambda name: pq.read_table(
                    self.fs.open_input_file(path), columns=[name]
                ).column(name),
            )
        return DeltaFile(
            path=f.relative,
            size=size,
            rows=f.rows,
            partition_values=f.values,
            modification_time=int(time.time() * 1000),
            stats=stats_json(stats),
        )

    def discard(self) -> None:
        """A failed attempt removes what it wrote; what it cannot remove stays an orphan."""
        for f in self.files.values():
            try:
                f.stream.close()
                self.fs.delete_file(path_in(self.base, f.relative))
            except Exception:  # noqa: BLE001, S110 - best effort: VACUUM removes orphans
                pass
