"""The executor half: Arrow batches to Parquet files in the table folder, with Delta stats.

Files get names no other attempt can produce (the attempt's id, the partition, Spark's attempt
number), so a retried or speculative task never overwrites another's file. A file is invisible
to readers until a commit adds it to the Delta log; files of failed attempts stay out of the log
(orphans) and Delta's ``VACUUM`` removes them once older than its retention.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from eosink.partitions import group_by_text
from eosink_delta.schema import WritePlan
from eosink_delta.store import filesystem, path_in
from eosink_delta.table import partition_dir, partition_value

#: Longest string whose min/max go into the stats (Delta's own default prefix is 32).
STATS_STRING_LIMIT = 32


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


def _stat_value(value: Any, physical: pa.DataType) -> Any:
    if isinstance(value, dt.datetime):
        # Delta stats hold milliseconds; callers widen min down and max up.
        return value
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        # NaN and infinities have no JSON form (json.dumps writes NaN, Infinity, which Delta's
        # readers refuse): no bounds for the column
        return None
    if isinstance(value, bytes):
        return None
    return value


def _ms_text(value: dt.datetime, *, up: bool, naive: bool) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    micros = value.microsecond % 1000
    value = value.replace(microsecond=value.microsecond - micros)
    if up and micros:
        value += dt.timedelta(milliseconds=1)
    text = value.replace(tzinfo=None).isoformat(timespec="milliseconds")
    return text if naive else text + "Z"


def stats_json(stats: dict[str, Any]) -> str:
    """An add action's ``stats`` string, in UTF-8 rather than ``\\u`` escapes: Delta's Rust
    readers (delta-rs, delta-kernel-rs) and DuckDB read an escaped character beyond Unicode's
    BMP (a surrogate pair) back as another one, and a min/max changed that way prunes a file
    holding the row."""
    return json.dumps(stats, separators=(",", ":"), ensure_ascii=False)


def file_stats(metadata: Any, schema: pa.Schema, rows: int) -> dict[str, Any]:
    """numRecords, nullCount and (for simple types) minValues/maxValues from Parquet metadata."""
    nulls: dict[str, int] = {}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    top = {i: f for i, f in enumerate(schema)}
    simple = {
        i
        for i, f in top.items()
        if pa.types.is_integer(f.type)
        or pa.types.is_floating(f.type)
        or pa.types.is_string(f.type)
        or pa.types.is_large_string(f.type)
        or pa.types.is_date(f.type)
        or pa.types.is_timestamp(f.type)
        or pa.types.is_decimal(f.type)
    }
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for i in range(group.num_columns):
            column = group.column(i)
            name = column.path_in_schema
            if name not in schema.names or column.statistics is None:
                continue
            s = column.statistics
            if s.has_null_count:
                nulls[name] = nulls.get(name, 0) + s.null_count
            index = schema.get_field_index(name)
            if index not in simple or not s.has_min_max:
                continue
            lo, hi = _stat_value(s.min, schema.field(index).type), _stat_value(s.max, None)
            if lo is None or hi is None:
                mins[name] = maxs[name] = None
                continue
            if name in mins and mins[name] is None:
                continue
            mins[name] = lo if name not in mins else min(mins[name], lo)
            maxs[name] = hi if name not in maxs else max(maxs[name], hi)
    out_min, out_max = {}, {}
    for name, lo in mins.items():
        hi = maxs[name]
        if lo is None or hi is None:
            continue
        if isinstance(lo, str) and (len(lo) > STATS_STRING_LIMIT or len(hi) > STATS_STRING_LIMIT):
            continue
        if isinstance(lo, dt.datetime):
            naive = schema.field(name).type.tz is None
            lo, hi = _ms_text(lo, up=False, naive=naive), _ms_text(hi, up=True, naive=naive)
        elif not isinstance(lo, (int, float, str)):
            lo, hi = str(lo), str(hi)
        out_min[name], out_max[name] = lo, hi
    stats: dict[str, Any] = {"numRecords": rows}
    if out_min:
        stats["minValues"], stats["maxValues"] = out_min, out_max
    if nulls:
        stats["nullCount"] = nulls
    return stats


@attrs.define
class _OpenFile:
    relative: str
    stream: Any
    writer: pq.ParquetWriter
    values: dict[str, str | None]
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
        writer = pq.ParquetWriter(
            stream,
            self.plan.data_schema,
            compression=None if self.compression.lower() == "none" else self.compression,
            write_statistics=self.stats,
        )
        opened = _OpenFile(relative, stream, writer, dict(zip(self.partition_by, values)))
        self.files[values] = opened
        return opened

    def flush(self, f: _OpenFile) -> None:
        if f.pending:
            f.writer.write_table(pa.Table.from_batches(f.pending, schema=self.plan.data_schema))
            f.rows += f.pending_rows
            f.pending, f.pending_rows = [], 0

    def close(self, f: _OpenFile) -> DeltaFile:
        self.flush(f)
        f.writer.close()
        size = f.stream.tell()
        f.stream.close()
        stats = {"numRecords": f.rows}
        if self.stats:
            stats = file_stats(f.writer.writer.metadata, self.plan.data_schema, f.rows)
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
