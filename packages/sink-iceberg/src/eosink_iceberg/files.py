"""The executor half: Arrow batches to Parquet data files with Iceberg field ids and stats.

A file is invisible to readers until a commit adds it to a snapshot; files of failed attempts
stay out of every snapshot (orphans that ``eosink cleanup iceberg`` removes). Every file's name
is unique to the task attempt (``eosink-<attempt tag>-<partition>-<task attempt id>-<n>``), so a
retried or speculative task never overwrites a file another attempt reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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
class PartitionWriter:
    """Writes one Spark partition's rows: one file per partition tuple of the table's spec."""

    layout: TableLayout
    io: Any  # the catalog's FileIO
    prefix: str  # file name prefix unique to the task attempt
    compression: str
    row_group_rows: int

    def write_all(self, batches: Iterator[pa.RecordBatch]) -> IcebergMessage:
        schema = self.layout.schema()
        spec = self.layout.spec()
        target = file_schema(schema)
        buffered = [b for b in batches if b.num_rows]
        if not buffered:
            return IcebergMessage(files=(), rows=0)
        rows = to_file_rows(pa.Table.from_batches(buffered), target)
        files = []
        for n, (partition, part) in enumerate(Partitioner(spec, schema).split(rows)):
            files.append(self._write(n, partition, part, schema, spec))
        return IcebergMessage(files=tuple(files), rows=rows.num_rows)

    def _write(self, n: int, partition: Any, rows: pa.Table, schema: Any, spec: Any) -> IcebergFile:
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
        )
        from pyiceberg.table.locations import load_location_provider

        name = f"{self.prefix}-{n:05d}.parquet"
        provider = load_location_provider(self.layout.location, self.layout.properties)
        key = _PathKey(spec, schema, partition) if spec.fields else None
        path = provider.new_data_location(name, key)  # type: ignore[arg-type]
        output = self.io.new_output(path)
        compression = None if self.compression == "none" else self.compression
        with output.create(overwrite=False) as stream:
            with pq.ParquetWriter(stream, rows.schema, compression=compression) as writer:
                writer.write_table(rows, row_group_size=self.row_group_rows)
        # the footer the writer wrote (pyarrow keeps it on the closed writer)
        metadata = writer.writer.metadata
        stats = data_file_statistics_from_parquet_metadata(
            parquet_metadata=metadata,
            stats_columns=compute_statistics_plan(schema, self.layout.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(schema),
        ).to_serialized_dict()
        return IcebergFile(
            path=path,
            size=len(output),
            rows=rows.num_rows,
            partition=tuple(partition),
            spec_id=self.layout.spec_id,
            column_sizes=stats["column_sizes"],
            value_counts=stats["value_counts"],
            null_value_counts=stats["null_value_counts"],
            nan_value_counts=_nan_counts(rows, schema),
            lower_bounds=stats["lower_bounds"],
            upper_bounds=stats["upper_bounds"],
            split_offsets=tuple(stats["split_offsets"]) if stats["split_offsets"] else None,
        )


@attrs.frozen
class _PathKey:
    """What a location provider asks of a partition key: its folder text."""

    spec: Any
    schema: Any
    partition: Any

    def to_path(self) -> str:
        return self.spec.partition_to_path(self.partition, self.schema)


def _nan_counts(rows: pa.Table, schema: Any) -> dict[int, int]:
    """NaN counts of the top-level float columns (Parquet's metadata has none): readers
    prune ``isnan`` filters on them, and the bounds leave NaN out."""
    out = {}
    for field in schema.fields:
        column = rows.column(field.name)
        if pa.types.is_floating(column.type):
            out[field.field_id] = int(pc.sum(pc.is_nan(column)).as_py() or 0)
    return out
