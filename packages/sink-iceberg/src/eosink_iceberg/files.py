"""The executor half: Arrow batches to Parquet data files with Iceberg field ids and stats.

A file is invisible to readers until a commit adds it to a snapshot; files of failed attempts
stay out of every snapshot (orphans that ``eosink cleanup iceberg`` removes). Every file's name
is unique to the task attempt (``eosink-<attempt tag>-<partition>-<task attempt id>-<n>``), so a
retried or speculative task never overwrites a file another attempt reported.
"""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eosink.encodings import DictionaryChoice
from eosink.plugin import ConfigurationError
from eosink_iceberg.partitioning import Partitioner
from eosink_iceberg.schema import file_schema, to_file_rows

#: Every data file eosink writes starts with this: cleanup removes only such files.
FILE_PREFIX = "eosink-"


@attrs.frozen
class TableLayout:
    """What an executor needs of the table to write its files (JSON: small, picklable)."""

    location: str
    schema_json: str
    spec_json: str
    spec_id: int
    properties: dict[str, str]

    @classmethod
    def of(cls, metadata: Any) -> TableLayout:
        spec = metadata.spec()
        return cls(
            location=metadata.location,
            schema_json=metadata.schema().model_dump_json(),
            spec_json=spec.model_dump_json(),
            spec_id=spec.spec_id,
            properties=dict(metadata.properties),
        )

    def schema(self) -> Any:
        from pyiceberg.schema import Schema

        return Schema.model_validate_json(self.schema_json)

    def spec(self) -> Any:
        from pyiceberg.partitioning import PartitionSpec

        return PartitionSpec.model_validate_json(self.spec_json)


@attrs.frozen
class IcebergFile:
    """One data file an attempt wrote, as the commit's manifest entry will describe it."""

    path: str  # the file's full location (a URI for object stores)
    size: int
    rows: int
    partition: tuple[Any, ...]  # partition values in Iceberg's representation
    spec_id: int
    column_sizes: dict[int, int]
    value_counts: dict[int, int]
    null_value_counts: dict[int, int]
    nan_value_counts: dict[int, int]
    lower_bounds: dict[int, bytes]
    upper_bounds: dict[int, bytes]
    split_offsets: tuple[int, ...] | None

    def data_file(self) -> Any:
        """The pyiceberg ``DataFile`` of this file (on the driver, for the commit)."""
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.path,
            file_format=FileFormat.PARQUET,
            partition=Record(*self.partition),
            record_count=self.rows,
            file_size_in_bytes=self.size,
            column_sizes=dict(self.column_sizes),
            value_counts=dict(self.value_counts),
            null_value_counts=dict(self.null_value_counts),
            nan_value_counts=dict(self.nan_value_counts),
            lower_bounds=dict(self.lower_bounds),
            upper_bounds=dict(self.upper_bounds),
            split_offsets=list(self.split_offsets) if self.split_offsets else None,
            sort_order_id=None,
            spec_id=self.spec_id,
            equality_ids=None,
            key_metadata=None,
        )


@attrs.frozen
class IcebergMessage:
    """One partition attempt's files (the commit message)."""

    files: tuple[IcebergFile, ...]
    rows: int


@attrs.define
class _OpenFile:
    """A data file being written: rows wait in ``pending`` until a row group is full."""

    path: str
    stream: Any
    partition: Any  # the partition Record
    target: pa.Schema  # the file's Arrow schema (field ids in its metadata)
    #: opened at the first row group, whose rows choose the dictionary columns
    writer: Any = None
    pending: list[pa.Table] = attrs.field(factory=list)
    pending_rows: int = 0
    rows: int = 0
    floats: dict[int, _FloatStats] = attrs.field(factory=dict)


@attrs.define
class _FloatStats:
    """A top-level float column's counts and bounds, kept by the writer itself: Parquet's
    footer statistics of such a column are not written (:func:`_footer_statistics`)."""

    nans: int = 0
    nulls: int = 0
    lower: float | None = None
    upper: float | None = None

    def add(self, column: pa.ChunkedArray) -> None:
        self.nulls += column.null_count
        nan = pc.is_nan(column)
        self.nans += int(pc.sum(nan).as_py() or 0)
        numbers = pc.filter(column, pc.invert(nan))  # nulls are dropped too
        if len(numbers):
            low, high = pc.min_max(numbers).values()
            low, high = low.as_py(), high.as_py()
            self.lower = low if self.lower is None else min(self.lower, low)
            self.upper = high if self.upper is None else max(self.upper, high)

    def bounds(self) -> tuple[float, float] | None:
        """The bounds, NaN left out (as the spec says), widened over the zeros' signs as
        Parquet's are: a bound of 0 could hide a ``-0.0`` or a ``0.0`` (``min`` keeps
        whichever came first), and a reader comparing ``-0.0 < 0.0`` would skip the file."""
        if self.lower is None or self.upper is None:
            return None
        lower = -0.0 if self.lower == 0 else self.lower
        upper = 0.0 if self.upper == 0 else self.upper
        return lower, upper


@attrs.frozen
class _TaskShape:
    """What every file of a task shares, worked out once per task rather than per file (a
    partitioned task writes one file per partition): the table's schema and spec, the files'
    Arrow schema, which footer statistics they carry, and how pyiceberg maps their statistics."""

    schema: Any
    spec: Any
    target: pa.Schema
    footer_statistics: list[str]
    statistics_plan: Any
    column_ids: dict[str, int]
    floats: tuple[Any, ...]  # the top-level float fields, whose bounds the writer keeps
    locations: Any

    @classmethod
    def of(cls, layout: TableLayout) -> _TaskShape:
        from pyiceberg.io.pyarrow import compute_statistics_plan, parquet_path_to_id_mapping
        from pyiceberg.table.locations import load_location_provider

        schema = layout.schema()
        target = file_schema(schema)
        return cls(
            schema=schema,
            spec=layout.spec(),
            target=target,
            footer_statistics=_footer_statistics(target),
            statistics_plan=compute_statistics_plan(schema, layout.properties),
            column_ids=parquet_path_to_id_mapping(schema),
            floats=tuple(
                f for f in schema.fields if pa.types.is_floating(target.field(f.name).type)
            ),
            locations=load_location_provider(layout.location, layout.properties),
        )


@attrs.define
class PartitionWriter:
    """Writes one task attempt's rows: one file per partition tuple of the table's spec.

    Rows stream through: each Arrow batch is split by partition and appended to its tuple's
    open file, a row group at a time, so a task holds at most a row group per open file, not
    its whole partition.
    """

    layout: TableLayout
    io: Any  # the catalog's FileIO
    prefix: str  # file name prefix unique to the task attempt
    compression: str
    row_group_rows: int
    files: dict[tuple, _OpenFile] = attrs.field(factory=dict)
    dictionaries: DictionaryChoice = attrs.field(factory=DictionaryChoice)  # once per task

    def write_all(self, batches: Iterator[pa.RecordBatch]) -> IcebergMessage:
        shape = _TaskShape.of(self.layout)
        partitioner = Partitioner(shape.spec, shape.schema)
        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                rows = to_file_rows(pa.Table.from_batches([batch]), shape.target)
                for key, partition, part in partitioner.split_keyed(rows):
                    self._buffer(key, partition, part, shape)
            done = tuple(self._close(f, shape) for f in self.files.values())
        except BaseException:
            self._discard()
            raise
        return IcebergMessage(files=done, rows=sum(f.rows for f in done))

    def _buffer(self, key: tuple, partition: Any, rows: pa.Table, shape: _TaskShape) -> None:
        opened = self.files.get(key) or self._open(key, partition, shape)
        opened.pending.append(rows)
        opened.pending_rows += rows.num_rows
        if opened.pending_rows >= self.row_group_rows:
            self._flush(opened, shape)

    def _open(self, key: tuple, partition: Any, shape: _TaskShape) -> _OpenFile:
        name = f"{self.prefix}-{len(self.files):05d}.parquet"
        path_key = _PathKey(shape.spec, shape.schema, partition) if shape.spec.fields else None
        path = shape.locations.new_data_location(name, path_key)
        try:
            stream = self.io.new_output(path).create(overwrite=False)
        except OSError as error:
            if error.errno != errno.ENAMETOOLONG and "name too long" not in str(error):
                raise
            raise _name_too_long(path, shape.spec, shape.schema) from error
        opened = _OpenFile(path, stream, partition, shape.target)
        self.files[key] = opened
        return opened

    def _flush(self, opened: _OpenFile, shape: _TaskShape) -> None:
        if not opened.pending:
            return
        rows = pa.concat_tables(opened.pending)
        if opened.writer is None:
            opened.writer = pq.ParquetWriter(
                opened.stream,
                opened.target,
                compression=None if self.compression == "none" else self.compression,
                write_statistics=shape.footer_statistics,
                use_dictionary=self.dictionaries(rows),
            )
        opened.writer.write_table(rows, row_group_size=self.row_group_rows)
        for field in shape.floats:
            stats = opened.floats.setdefault(field.field_id, _FloatStats())
            stats.add(rows.column(field.name))
        opened.rows += rows.num_rows
        opened.pending, opened.pending_rows = [], 0

    def _close(self, opened: _OpenFile, shape: _TaskShape) -> IcebergFile:
        from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata

        self._flush(opened, shape)
        opened.writer.close()
        opened.stream.close()
        # the footer the writer wrote (pyarrow keeps it on the closed writer)
        metadata = opened.writer.writer.metadata
        with _quiet_about_float_statistics():
            stats = data_file_statistics_from_parquet_metadata(
                parquet_metadata=metadata,
                stats_columns=shape.statistics_plan,
                parquet_column_mapping=shape.column_ids,
            ).to_serialized_dict()
        _drop_partial_bounds(stats, metadata, shape.column_ids)
        nans = _add_float_stats(stats, opened.floats, shape.statistics_plan)
        return IcebergFile(
            path=opened.path,
            size=len(self.io.new_input(opened.path)),
            rows=opened.rows,
            partition=tuple(opened.partition),
            spec_id=self.layout.spec_id,
            column_sizes=stats["column_sizes"],
            value_counts=stats["value_counts"],
            null_value_counts=stats["null_value_counts"],
            nan_value_counts=nans,
            lower_bounds=stats["lower_bounds"],
            upper_bounds=stats["upper_bounds"],
            split_offsets=tuple(stats["split_offsets"]) if stats["split_offsets"] else None,
        )

    def _discard(self) -> None:
        """A failed task: close and delete what it wrote (no message will name it)."""
        for opened in self.files.values():
            try:
                if opened.writer is not None:
                    opened.writer.close()
                opened.stream.close()
            except Exception:  # noqa: BLE001 - best effort; cleanup finds what stays
                pass
            try:
                self.io.delete(opened.path)
            except Exception:  # noqa: BLE001
                pass


@attrs.frozen
class _PathKey:
    """What a location provider asks of a partition key: its folder text."""

    spec: Any
    schema: Any
    partition: Any

    def to_path(self) -> str:
        return self.spec.partition_to_path(self.partition, self.schema)


def _footer_statistics(target: pa.Schema) -> list[str]:
    """The Parquet columns whose footer statistics the writer writes: all but the top-level
    float columns. pyarrow's writer leaves NaN out of a float column's min and max, so a row
    group of ``[1.5, NaN]`` says min = max = 1.5, and pyarrow's reader (under pyiceberg's scan)
    took that as every value being 1.5 and skipped the row group for ``isnan``: NaN rows were
    lost. Iceberg's own (Java) writer, through parquet-mr, writes NaN as such a row group's
    max, which no reader takes for NaN-free; pyarrow cannot, so it writes none. The manifest
    keeps the column's counts and bounds, which the writer computes itself
    (:class:`_FloatStats`)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(target.empty_table(), buffer)
    schema = pq.read_metadata(pa.BufferReader(buffer.getvalue())).schema
    floats = {f.name for f in target if pa.types.is_floating(f.type)}
    paths = [schema.column(i).path for i in range(len(schema))]
    return [path for path in paths if path not in floats]


def _drop_partial_bounds(stats: dict[str, Any], metadata: Any, mapping: dict[str, int]) -> None:
    """No bounds for a column that a row group holds values of without a footer min/max
    (pyarrow writes none for a string or binary value over 4 KiB): pyiceberg's aggregation
    skips such row groups, so its bounds would leave those values out and every reader that
    prunes by them would skip their rows. Absent bounds prune nothing; narrower ones lose rows.
    """
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for i in range(row_group.num_columns):
            chunk = row_group.column(i)
            field_id = mapping.get(chunk.path_in_schema)
            statistics = chunk.statistics if chunk.is_stats_set else None
            if field_id is None or statistics is None or statistics.has_min_max:
                continue  # no footer statistics at all: pyiceberg drops the bounds itself
            if statistics.has_null_count and statistics.null_count >= chunk.num_values:
                continue  # only nulls: nothing a bound must cover
            stats["lower_bounds"].pop(field_id, None)
            stats["upper_bounds"].pop(field_id, None)


def _add_float_stats(stats: dict[str, Any], floats: dict[int, _FloatStats], plan: Any) -> dict:
    """The float columns' null counts and bounds into ``stats`` (as the metrics plan asks);
    their NaN counts."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.io.pyarrow import MetricModeTypes

    nans = {}
    for field_id, column in floats.items():
        mode = plan[field_id].mode.type
        if mode == MetricModeTypes.NONE:
            continue
        nans[field_id] = column.nans
        stats["null_value_counts"][field_id] = column.nulls
        bounds = column.bounds()
        if mode == MetricModeTypes.COUNTS or bounds is None:
            continue
        kind = plan[field_id].iceberg_type
        stats["lower_bounds"][field_id] = to_bytes(kind, bounds[0])
        stats["upper_bounds"][field_id] = to_bytes(kind, bounds[1])
    return nans


def _name_too_long(path: str, spec: Any, schema: Any) -> ConfigurationError:
    """The file system refused the file's path: a partition folder named by a long value."""
    identity = [
        schema.find_field(f.source_id).name for f in spec.fields if str(f.transform) == "identity"
    ]
    way_out = " or ".join(f"truncate(N, {name})" for name in identity) or "another transform"
    return ConfigurationError(
        f"sink 'iceberg': the file system refused the data file's path {path[:120]!r}... "
        f"({len(path)} characters) as too long: a partition folder is named by its partition "
        f"value, and an identity partition of a long value makes a name past the file system's "
        f"limit. Partition by {way_out} instead, or filter such values out in the query. "
        "Nothing was committed."
    )


class _FloatStatisticsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyArrow statistics missing")


@contextlib.contextmanager
def _quiet_about_float_statistics() -> Iterator[None]:
    """pyiceberg warns of every column chunk without footer statistics: for the float
    columns that is by design (:func:`_footer_statistics`)."""
    logger, quiet = logging.getLogger("pyiceberg.io.pyarrow"), _FloatStatisticsFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def size_of(io: Any, path: str) -> int | None:
    """The file's size (one HEAD), ``None`` if it is not there. Not ``exists()``: pyiceberg's
    fsspec FileIO answers it False for every ``file://`` URI; its ``len`` reads the status."""
    try:
        return len(io.new_input(path))
    except FileNotFoundError:
        return None
