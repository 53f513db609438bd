"""The commit's transaction: rows replaced (complete mode, upserts) in the batch's own snapshot.

A batch that replaces rows commits **one** ``overwrite`` snapshot: the data files it drops,
the files it rewrites (the rows they keep, in new files), and its own files, the proof in the
snapshot's summary; a batch that only appends commits one ``append``. (pyiceberg's
``Transaction.delete`` would add a delete snapshot and an overwrite one before the batch's
append: three snapshots a batch, and a table history growing three times as fast.)

:func:`replace_rows` plans the files that may hold matching rows as a scan does (partition
values, then column bounds; the manifests read through :mod:`eosink_iceberg.manifests`), reads
each one (its delete files applied), and keeps the rows that do not match, each file's in a
file of its own (within its bounds: gathered, a batch's recent keys and the table's oldest rows
would make one file every later batch rewrites), written by the sink's own writer
(:class:`eosink_iceberg.files.PartitionWriter`: the table's current spec and schema, NaN and
``-0.0`` partitions, float bounds and NaN counts as for the batch's files) under ``eosink-``
names, which ``eosink cleanup`` removes if the commit never lands.

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
them (a complete batch drops every file, so reads every manifest anyway; an upsert's read
them to plan: :data:`eosink_iceberg.manifests.MANIFESTS` decodes each once). The overwrite
merges manifests by the table's ``commit.manifest-merge.*`` properties, as Iceberg's own
overwrites do (pyiceberg's merge only its appends).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.table import Transaction
from pyiceberg.table.update.snapshot import _OverwriteFiles

from eosink_iceberg.files import PartitionWriter, TableLayout
from eosink_iceberg.manifests import MANIFESTS, CachedPlanner


class SinkTransaction(Transaction):
    """pyiceberg's ``Transaction``, whose snapshots find the files they drop in every manifest
    (module doc)."""

    def _build_partition_predicate(
        self, partition_records: set[Any], partition_fields: list[str]
    ) -> BooleanExpression:
        """Every manifest may hold a dropped file, whatever its partition values read as."""
        return AlwaysTrue()

    def overwrite(self, snapshot_properties: dict[str, str]) -> Any:
        """The batch's overwrite snapshot, merging the table's manifests when the table asks
        (``commit.manifest-merge.enabled``) as Iceberg's overwrites do (module doc)."""
        from pyiceberg.table.snapshots import Operation

        return _BatchOverwrite(
            operation=Operation.OVERWRITE,
            transaction=self,
            io=self._table.io,
            snapshot_properties=snapshot_properties,
        )


class _BatchOverwrite(_OverwriteFiles):
    """pyiceberg's overwrite snapshot, reading the table's manifests through
    :data:`eosink_iceberg.manifests.MANIFESTS`, and merging them by the table's properties as
    its merge-append does (pyiceberg merges only appends; Iceberg's own overwrites merge too).

    The files it drops are looked for in every manifest of the parent snapshot and matched
    by path (module doc), as pyiceberg's overwrite does with a predicate that keeps them all.
    """

    def fetch_manifest_entry(self, manifest: Any, discard_deleted: bool = True) -> list[Any]:
        return MANIFESTS.entries(manifest, self._io, discard_deleted)

    @functools.cached_property
    def _parent_manifests(self) -> list[Any]:
        """The parent's manifest list, read once for both passes over it."""
        parent = self._transaction.table_metadata.snapshot_by_name(name=self._target_branch)
        return parent.manifests(io=self._io) if parent else []

    def _refresh_for_retry(self) -> None:
        super()._refresh_for_retry()
        self.__dict__.pop("_parent_manifests", None)

    def _deleted_entries(self) -> list[Any]:
        from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

        deleted = [
            _as(entry, ManifestEntryStatus.DELETED, self._snapshot_id)
            for manifest in self._parent_manifests
            for entry in self.fetch_manifest_entry(manifest)
            if entry.data_file.content == DataFileContent.DATA
            and entry.data_file in self._deleted_data_files
        ]
        self._validate_required_deletes(deleted)
        return deleted

    def _existing_manifests(self) -> list[Any]:
        """The parent's manifests, each kept as it is unless it lists a dropped file: then
        written anew without it (or left out, when it listed nothing else)."""
        from pyiceberg.manifest import ManifestEntryStatus

        existing = []
        for manifest in self._parent_manifests:
            entries = self.fetch_manifest_entry(manifest)
            kept = [e for e in entries if e.data_file not in self._deleted_data_files]
            if len(kept) == len(entries):
                existing.append(manifest)
                continue
            if not kept:
                continue
            with self.new_manifest_writer(self.spec(manifest.partition_spec_id)) as writer:
                for entry in kept:
                    writer.add_entry(_as(entry, ManifestEntryStatus.EXISTING, entry.snapshot_id))
            existing.append(writer.to_manifest_file())
        return existing

    def _process_manifests(self, manifests: list[Any]) -> list[Any]:
        from pyiceberg.manifest import ManifestContent
        from pyiceberg.table import TableProperties
        from pyiceberg.table.update.snapshot import _ManifestMergeManager
        from pyiceberg.utils.properties import property_as_bool, property_as_int

        properties = self._transaction.table_metadata.properties
        merger = _ManifestMergeManager(
            target_size_bytes=property_as_int(
                properties,
                TableProperties.MANIFEST_TARGET_SIZE_BYTES,
                TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
            ),
            min_count_to_merge=property_as_int(
                properties,
                TableProperties.MANIFEST_MIN_MERGE_COUNT,
                TableProperties.MANIFEST_MIN_MERGE_COUNT_DEFAULT,
            ),
            merge_enabled=property_as_bool(
                properties,
                TableProperties.MANIFEST_MERGE_ENABLED,
                TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT,
            ),
            snapshot_producer=self,
        )
        data = [m for m in manifests if m.content == ManifestContent.DATA]
        deletes = [m for m in manifests if m.content != ManifestContent.DATA]
        return merger.merge_manifests(data) + deletes


def _as(entry: Any, status: Any, snapshot_id: int | None) -> Any:
    """``entry``'s file in an entry of ``status`` (a snapshot's entries are written anew, never
    changed: the cached ones are shared)."""
    from pyiceberg.manifest import ManifestEntry

    return ManifestEntry.from_args(
        status=status,
        snapshot_id=snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=entry.data_file,
    )


@attrs.frozen
class Replacement:
    """What a batch's snapshot does to the files before it: drops ``dropped`` (data files)
    and adds ``kept`` (the rows of them that do not match, in new data files)."""

    dropped: list[Any]
    kept: list[Any]


def replace_rows(
    table: Any,
    row_filter: BooleanExpression,
    may_hold: Callable[[Any], bool] | None,
    prefix: str,
    compression: str,
    row_group_rows: int,
) -> Replacement:
    """The data files of ``table``'s current snapshot holding rows that match ``row_filter``,
    and the rows they keep, written under ``prefix`` (the new files of a rewrite that fails
    are deleted). Only the files a scan with the filter plans are read, of those ``may_hold``
    (when given) lets through: a quicker check of the same filter's bounds
    (:meth:`eosink_iceberg.upsert.BatchMatch.may_hold`)."""
    from pyiceberg.expressions.visitors import bind
    from pyiceberg.io.pyarrow import ArrowScan, expression_to_pyarrow

    metadata, io = table.metadata, table.io
    snapshot = metadata.current_snapshot()
    planner = CachedPlanner(metadata, io, row_filter, may_hold=may_hold)
    tasks = planner.plan_files(snapshot.manifests(io)) if snapshot else []
    if isinstance(row_filter, AlwaysTrue):
        return Replacement(dropped=[task.file for task in tasks], kept=[])
    schema = metadata.schema()
    # a row the filter gives null (a null key) does not match: it stays
    match = expression_to_pyarrow(bind(schema, row_filter, case_sensitive=True))
    stays = pc.invert(pc.coalesce(match, pa.scalar(False)))
    layout = TableLayout.of(metadata)
    dropped, kept = [], []
    try:
        for i, task in enumerate(tasks):
            rows = ArrowScan(metadata, io, schema, AlwaysTrue()).to_table(tasks=[task])
            stay = rows.filter(stays)
            if stay.num_rows == rows.num_rows:
                continue  # planned by its bounds, but no row of it matches
            dropped.append(task.file)
            if not stay.num_rows:
                continue
            # each file's kept rows in a file of their own, within that file's bounds: gathered
            # with other files' rows (a batch's recent keys with the table's oldest), they
            # would make one file that every later batch rewrites whole
            writer = PartitionWriter(
                layout=layout,
                io=io,
                prefix=f"{prefix}-{i:05d}",
                compression=compression,
                row_group_rows=row_group_rows,
            )
            kept.extend(writer.write_all(iter(stay.to_batches())).files)
    except BaseException:
        for f in kept:
            io.delete(f.path)
        raise
    return Replacement(dropped=dropped, kept=[f.data_file() for f in kept])
