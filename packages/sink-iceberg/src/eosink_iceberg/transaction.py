"""The commit's transaction: rows replaced (complete mode, upserts) in the batch's own snapshot.

A batch that replaces rows commits **one** ``overwrite`` snapshot: the data files it drops,
the files it rewrites (the rows they keep, in new files), and its own files, the proof in the
snapshot's summary; a batch that only appends commits one ``append``. (pyiceberg's
``Transaction.delete`` would add a delete snapshot and an overwrite one before the batch's
append: three snapshots a batch, and a table history growing three times as fast.)

:func:`replace_rows` plans the files that may hold matching rows as a scan does (partition
values, then column bounds), reads each one (its delete files applied), and keeps the rows
that do not match, written by the sink's own writer (:class:`eosink_iceberg.files.PartitionWriter`:
the table's current spec and schema, NaN and ``-0.0`` partitions, float bounds and NaN counts
as for the batch's files) under ``eosink-`` names, which ``eosink cleanup`` removes if the
commit never lands.

Dropping a file by its entry: pyiceberg's snapshot producer first narrows the manifests to
read to those whose partition summaries may hold the dropped files' partition values, by a
predicate it builds from those values (``Transaction._build_partition_predicate``). Those
values, read back from the manifests, are not always the values: ``EqualTo`` refuses NaN
("Cannot create expression literal from NaN": a batch dropping a file of a NaN partition failed,
and so did every rerun of it), and pyiceberg 0.12's compiled decoder reads a double partition
value through a 32-bit float (:mod:`eosink_iceberg.avro_doubles`: -2.26e-276 as -0.0), which
the manifest's own summary (the true value) excludes: the file is not found and the commit
fails ("Missing required files to delete"). The entries are
matched by path; :class:`SinkTransaction` reads every manifest of the parent snapshot for
them (a complete batch drops every file, so reads every manifest anyway; an upsert's scan has
read those its filter keeps).
"""

from __future__ import annotations

from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.table import Transaction

from eosink_iceberg.files import PartitionWriter, TableLayout


class SinkTransaction(Transaction):
    """pyiceberg's ``Transaction``, whose snapshots find the files they drop in every manifest
    (module doc)."""

    def _build_partition_predicate(
        self, partition_records: set[Any], partition_fields: list[str]
    ) -> BooleanExpression:
        """Every manifest may hold a dropped file, whatever its partition values read as."""
        return AlwaysTrue()


@attrs.frozen
class Replacement:
    """What a batch's snapshot does to the files before it: drops ``dropped`` (data files)
    and adds ``kept`` (the rows of them that do not match, in new data files)."""

    dropped: list[Any]
    kept: list[Any]


def replace_rows(
    table: Any, row_filter: BooleanExpression, prefix: str, compression: str, row_group_rows: int
) -> Replacement:
    """The data files of ``table``'s current snapshot holding rows that match ``row_filter``,
    and the rows they keep, written under ``prefix`` (the new files of a rewrite that fails
    are deleted). Only the files a scan with the filter plans are read."""
    from pyiceberg.expressions.visitors import bind
    from pyiceberg.io.pyarrow import ArrowScan, expression_to_pyarrow

    metadata, io = table.metadata, table.io
    tasks = table.scan(row_filter=row_filter).plan_files()
    if isinstance(row_filter, AlwaysTrue):
        return Replacement(dropped=[task.file for task in tasks], kept=[])
    schema = metadata.schema()
    # a row the filter gives null (a null key) does not match: it stays
    match = expression_to_pyarrow(bind(schema, row_filter, case_sensitive=True))
    stays = pc.invert(pc.coalesce(match, pa.scalar(False)))
    dropped = []

    def kept_rows():
        for task in tasks:
            rows = ArrowScan(metadata, io, schema, AlwaysTrue()).to_table(tasks=[task])
            kept = rows.filter(stays)
            if kept.num_rows == rows.num_rows:
                continue  # planned by its bounds, but no row of it matches
            dropped.append(task.file)
            yield from kept.to_batches()

    writer = PartitionWriter(
        layout=TableLayout.of(metadata),
        io=io,
        prefix=prefix,
        compression=compression,
        row_group_rows=row_group_rows,
    )
    written = writer.write_all(kept_rows())
    return Replacement(dropped=dropped, kept=[f.data_file() for f in written.files])
