"""The ``iceberg`` sink: Apache Iceberg tables through pyiceberg, one catalog commit per batch.

* ``init`` (driver) creates the table on the first write if asked (schema from the stream's,
  see :mod:`eosink_iceberg.schema`; spec from ``partition_by``), then checks the stream
  against it: schema, partition spec and its transforms, format version; with ``merge_schema``
  it adds the stream's new columns. It hands the executors the table's layout (location,
  schema, spec) and an attempt tag.
* ``write`` (executors) writes Parquet files with Iceberg field ids and column stats into the
  table's data folder, one per partition tuple of the table's spec, under names unique to the
  task attempt (:mod:`eosink_iceberg.files`); no reader sees them: no snapshot lists them.
* ``commit`` (driver) loads the table, refuses if this writer's proof already covers the batch
  (``AlreadyCommitted``), then makes one catalog commit holding a fast append of the files
  (``complete`` mode: a delete of every current file, then the append; ``mode=upsert``: a
  delete of the table's rows of the batch's keys, :mod:`eosink_iceberg.upsert`, whose rewrites
  a refused commit deletes) whose snapshot summary carries the proof, and the writer's proof
  property (:mod:`eosink_iceberg.proof`), which snapshot expiry never removes. The commit
  asserts the main branch's head it started from: a concurrent commit makes it fail, and then
  it is decided again on the table loaded anew (the proof checked again), up to
  ``commit_retries`` times. pyiceberg's own retries, which would re-commit the same files
  without checking the proof, are off for these commits: a zombie attempt of a batch another
  attempt committed loses cleanly instead of writing it twice.
* ``is_committed`` reads the writer's proof property of the freshly loaded table.
* ``abort`` deletes an attempt's files only when its commit is not in the table and no commit
  of it is in doubt: a commit whose reply was lost may land after anyone looked
  (:mod:`eosink_iceberg.outcome`); then the files stay for ``eosink cleanup``.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    SinkError,
    crash_point,
    hookimpl,
)
from eosink.logs import get_logger
from eosink_iceberg import catalog as catalogs
from eosink_iceberg.files import IcebergFile, IcebergMessage, PartitionWriter, TableLayout, size_of
from eosink_iceberg.history import checks_requirements_itself, expire_beyond, merges_manifests
from eosink_iceberg.operator_hooks import IcebergOperatorHooks
from eosink_iceberg.outcome import CommitMarker, commit_may_land, marker_path
from eosink_iceberg.options import (
    FORMAT_VERSIONS,
    IcebergOptions,
    parquet_codec,
    split_catalog_options,
)
from eosink_iceberg.partitioning import check_spec, new_spec, spec_fields
from eosink_iceberg.proof import (
    NO_RETRIES,
    StoredProof,
    attempt_landed,
    property_key,
    stored_proof,
    summary,
)
from eosink_iceberg.schema import check_schema, iceberg_schema
from eosink_iceberg.transaction import SinkTransaction, replace_rows
from eosink_iceberg.upsert import (
    BatchMatch,
    batch_keys,
    batch_match,
    check_batch_keys,
    check_key_columns,
)

log = get_logger("eosink.iceberg")


class CommitOutcomeUnknown(SinkError):
    """A catalog commit failed without saying whether it landed, and no proof shows it yet:
    the catalog may still apply it, so nothing this attempt wrote is deleted."""


@attrs.frozen
class IcebergState:
    """What ``init`` hands every ``write`` and ``commit``: small and picklable."""

    attempt: str  # unique per init call: names this attempt's files, marks its commit
    table_uuid: str  # the table the attempt was planned on
    base_snapshot: int | None  # the main branch's head init saw
    layout: TableLayout
    codec: str  # the Parquet codec of the attempt's files (options.parquet_codec)


class IcebergSink(IcebergOperatorHooks, Sink):
    """Exactly-once into an Iceberg table: files + proof in one catalog commit."""

    name = "iceberg"
    Options = IcebergOptions

    def __init__(self, options: Any = None, /, **kwargs: Any) -> None:
        if options is None or isinstance(options, dict):
            options = split_catalog_options({**(options or {}), **kwargs})
            kwargs = {}
        super().__init__(options, **kwargs)

    @property
    def table_name(self) -> str:
        return self.options.table

    def _load(self) -> Any | None:
        return catalogs.load(self.options)

    # -- driver ----------------------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        table = self._load()
        if table is None:
            return None
        stored = stored_proof(table, ctx.writer_id)
        if stored is not None and stored.proof.batch_id >= ctx.batch_id:
            return stored.proof
        return None

    @hookimpl
    def upsert_key(self) -> tuple[str, ...] | None:
        """``mode=upsert`` replaces rows by ``key``: Spark's update output mode may write here."""
        return self.options.key if self.options.mode == "upsert" else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> IcebergState:
        if self.options.mode == "upsert":
            if ctx.mode == "complete":
                raise ConfigurationError(
                    f"{ctx.label}: mode 'upsert' and Spark's complete output mode exclude each "
                    "other: complete replaces the table; use outputMode('update') or "
                    "('append') for upserts. Nothing was written."
                )
            check_key_columns(self.options.key, schema, self.table_name)
        table = self._load()
        if table is None:
            table = self._create(schema)
        self._check_table(table, ctx)
        metadata = table.metadata
        check_spec(metadata.spec(), metadata.schema(), self.table_name, self.options.partition_by)
        self._check_partition_sources(table, schema)
        checked = check_schema(
            metadata.schema(), schema, table=self.table_name, merge=self.options.merge_schema
        )
        if checked.new_columns:
            with table.update_schema() as update:
                update.union_by_name(iceberg_schema(pa.schema(list(checked.new_columns))))
            log.info(
                "iceberg.schema_merged",
                table=self.table_name,
                columns=[f.name for f in checked.new_columns],
            )
            table = self._load()
            if table is None:
                raise SinkError(f"sink 'iceberg': table {self.table_name} disappeared")
        head = table.metadata.current_snapshot()
        return IcebergState(
            attempt=uuid.uuid4().hex,
            table_uuid=str(table.metadata.table_uuid),
            base_snapshot=head.snapshot_id if head is not None else None,
            layout=TableLayout.of(table.metadata),
            codec=parquet_codec(
                self.options.compression, table.metadata.properties, self.table_name
            ),
        )

    def _create(self, stream: pa.Schema) -> Any:
        if not self.options.create:
            raise ConfigurationError(
                f"sink 'iceberg': table {self.table_name} does not exist in catalog "
                f"{self.options.catalog_name!r}; create it, or set create=true to have the sink "
                "create it from the stream's schema. Nothing was written."
            )
        schema = iceberg_schema(stream)
        spec = new_spec(self.options.partition_by, schema)
        table = catalogs.create(self.options, schema, spec)
        log.info(
            "iceberg.table_created",
            table=self.table_name,
            partition_by=list(self.options.partition_by),
        )
        return table

    def _check_table(self, table: Any, ctx: BatchContext) -> None:
        version = table.metadata.format_version
        if version not in FORMAT_VERSIONS:
            raise ConfigurationError(
                f"{ctx.label}: table {self.table_name} has format version {version}; this sink "
                f"writes versions {', '.join(map(str, FORMAT_VERSIONS))} only. Write it with an "
                "engine that supports it, or write to another table. Nothing was written."
            )

    def _check_partition_sources(self, table: Any, stream: pa.Schema) -> None:
        schema = table.metadata.schema()
        for field in table.metadata.spec().fields:
            column = schema.find_column_name(field.source_id)
            if column not in stream.names:
                raise ConfigurationError(
                    f"sink 'iceberg': table {self.table_name} is partitioned by {field.transform}"
                    f" of {column!r}, which the stream lacks; select that column in the query. "
                    "Nothing was written."
                )

    @hookimpl
    def commit(
        self, ctx: BatchContext, state: IcebergState, messages: list[IcebergMessage], proof: Proof
    ) -> None:
        files = [f for m in messages for f in m.files]
        self._check_files_exist(ctx, state, files)
        replaced = None
        if self.options.mode == "upsert":
            keys = batch_keys(self._io(state.layout), [f.path for f in files], self.options.key)
            check_batch_keys(keys, self.options.key, ctx.label)
            replaced = batch_match(keys, self.options.key)
        marker = CommitMarker(self._io(state.layout), marker_path(state.layout, state.attempt))
        try:
            self._commit_with_retries(ctx, state, files, proof, marker, replaced)
        finally:
            marker.finish()

    def _commit_with_retries(
        self,
        ctx: BatchContext,
        state: IcebergState,
        files: list[IcebergFile],
        proof: Proof,
        marker: CommitMarker,
        replaced: BatchMatch | None = None,
    ) -> None:
        for attempt in range(self.options.commit_retries + 1):
            table = self._decide(ctx, state)
            if table is None:
                return  # this attempt's own commit landed already (a lost reply)
            if not self._commit_on(table, ctx, state, files, proof, marker, replaced):
                log.info(
                    "iceberg.commit_conflict",
                    table=self.table_name,
                    writer=ctx.writer_id,
                    batch=ctx.batch_id,
                    attempt=attempt,
                )
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
                continue
            crash_point("commit:committed")
            log.debug(
                "iceberg.committed",
                table=self.table_name,
                writer=ctx.writer_id,
                batch=ctx.batch_id,
                files=len(files),
            )
            return
        raise SinkError(
            f"{ctx.label}: the commit lost {self.options.commit_retries + 1} races with other "
            f"writers of table {self.table_name}; nothing of this batch is in the table. "
            "Restart the query (or rerun the job with the same version): the batch is written "
            "again; raise commit_retries if many writers share the table."
        )

    def _decide(self, ctx: BatchContext, state: IcebergState) -> Any | None:
        """The table, loaded now, if this batch is still to be committed on it; ``None`` if
        this attempt's own commit is there; raises ``AlreadyCommitted`` if another's is."""
        table = self._load()
        if table is None:
            raise SinkError(
                f"{ctx.label}: table {self.table_name} disappeared after init; the batch is not "
                "committed and will be written again when the query restarts"
            )
        if str(table.metadata.table_uuid) != state.table_uuid:
            raise SinkError(
                f"{ctx.label}: table {self.table_name} was dropped and created anew while the "
                "batch ran; nothing was committed. Restart the query to write the batch into "
                "the new table."
            )
        self._check_table(table, ctx)
        stored = stored_proof(table, ctx.writer_id)
        if stored is not None and stored.proof.batch_id >= ctx.batch_id:
            if stored.attempt == state.attempt and stored.proof.batch_id == ctx.batch_id:
                return None
            raise AlreadyCommitted(
                f"{ctx.label}: table {self.table_name} holds this writer's batch "
                f"{stored.proof.batch_id}"
            )
        self._check_still_compatible(ctx, table, state)
        return table

    def _commit_on(
        self,
        table: Any,
        ctx: BatchContext,
        state: IcebergState,
        files: list[IcebergFile],
        proof: Proof,
        marker: CommitMarker | None = None,
        replaced: BatchMatch | None = None,
    ) -> bool:
        """One catalog commit: one snapshot whose summary holds the proof, appending the
        files (complete mode: every current file dropped; upsert: the rows ``replaced``
        matches dropped, the files holding them rewritten: :mod:`eosink_iceberg.transaction`),
        and the writer's proof property.

        False when it lost a race (nothing of it landed: the catalog refused it)."""
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.table import Table

        stored = StoredProof(proof, state.attempt, state.table_uuid)
        # The same table with pyiceberg's commit retries off (they are read from the loaded
        # metadata's properties; the catalog applies the commit to its current metadata, so
        # this setting is never written to the table).
        quiet = Table(
            table.name(),
            metadata=table.metadata.model_copy(
                update={"properties": {**table.metadata.properties, **NO_RETRIES}}
            ),
            metadata_location=table.metadata_location,
            io=table.io,
            catalog=table.catalog,
        )
        properties = summary(proof, state.attempt)
        txn = SinkTransaction(quiet)
        txn.set_properties({property_key(ctx.writer_id): stored.to_json()})
        match = BatchMatch(AlwaysTrue(), {}) if ctx.mode == "complete" else replaced
        replacement = None
        if match is not None and table.metadata.current_snapshot() is not None:
            replacement = replace_rows(
                quiet,
                match.row_filter,
                match.may_hold(table.metadata.schema()),
                prefix=f"eosink-{state.attempt}-kept-{uuid.uuid4().hex[:12]}",
                compression=state.codec,
                row_group_rows=self.options.row_group_rows,
            )
        # the rows a rewrite kept: a refused commit deletes them
        rewrites = [f.file_path for f in replacement.kept] if replacement else []
        snapshot = txn.update_snapshot(snapshot_properties=properties)
        if replacement is not None and replacement.dropped:
            with txn.overwrite(properties) as write:
                for dropped in replacement.dropped:
                    write.delete_data_file(dropped)
                for added in [*replacement.kept, *(f.data_file() for f in files)]:
                    write.append_data_file(added)
        else:
            appends = snapshot.merge_append() if merges_manifests(table) else snapshot.fast_append()
            with appends as add:
                for f in files:
                    add.append_data_file(f.data_file())
        if self.options.keep_snapshots:
            expire_beyond(
                txn, self.options.keep_snapshots, guard=checks_requirements_itself(table.catalog)
            )
        crash_point("commit:checked")
        if marker is not None:
            marker.before_send(state.attempt, state.table_uuid)
        try:
            txn.commit_transaction()
        except CommitFailedException:
            if marker is not None:
                marker.known()
            self._delete_rewrites(table.io, rewrites)
            return False
        except Exception as exc:  # noqa: BLE001 - the catalog's reply is lost or unclear
            self._unknown_outcome(ctx, state, exc)
        if marker is not None:
            marker.known()
        return True

    def _delete_rewrites(self, io: Any, paths: list[str]) -> None:
        """Delete the files a refused plan rewrote: no snapshot will ever list them (``eosink
        cleanup`` would find them, but only once past its age threshold). The refusal is certain
        (``CommitFailedException``): nothing can commit them later; the next plan, on the new
        head, rewrites what it needs anew. A file that cannot be deleted stays an orphan, as
        after a crash between plan and commit."""
        for path in paths:
            try:
                io.delete(path)
            except OSError as exc:
                log.warning("iceberg.rewrite_not_deleted", table=self.table_name, error=str(exc))

    def _unknown_outcome(self, ctx: BatchContext, state: IcebergState, exc: Exception) -> None:
        """A commit failed in a way that does not say whether it landed: look."""
        try:
            table = self._load()
        except Exception:  # noqa: BLE001
            table = None
        if table is not None:
            stored = stored_proof(table, ctx.writer_id)
            if stored is not None and stored.attempt == state.attempt:
                log.info("iceberg.commit_landed_despite_error", table=self.table_name)
                return
        raise CommitOutcomeUnknown(
            f"{ctx.label}: the commit to table {self.table_name} failed "
            f"({type(exc).__name__}: {catalogs.scrub(str(exc), self.options)}) and its outcome "
            "is unknown: the catalog may still apply it. Restart the query: the proof decides "
            "whether the batch is written again. This attempt's files are kept (eosink "
            "cleanup removes them if no snapshot lists them)."
        ) from exc

    def _check_still_compatible(self, ctx: BatchContext, table: Any, state: IcebergState) -> None:
        """The files were written for the layout's schema and partition spec: every column must
        still be there, by field id and type, and the spec must still be the one the files'
        partition tuples were computed for (another writer may have evolved the table since)."""
        self._check_same_spec(ctx, table, state)
        current = table.metadata.schema()
        if current.schema_id == state.layout.schema().schema_id:
            return
        for field in state.layout.schema().fields:
            try:
                now = current.find_field(field.field_id)
            except ValueError:
                now = None
            if now is None or now.field_type != field.field_type:
                raise SinkError(
                    f"{ctx.label}: column {field.name!r} of table {self.table_name} was dropped "
                    "or changed while the batch ran; nothing was committed. Restart the query."
                )

    def _check_same_spec(self, ctx: BatchContext, table: Any, state: IcebergState) -> None:
        """pyiceberg files every appended file under the table's current default spec; files
        whose tuples were computed for another spec would be pruned wrongly by every reader
        that filters on the partition (rows skipped). Iceberg allows files of older specs, but
        pyiceberg cannot write their manifest: the batch is refused, and its rerun writes it for
        the new spec."""
        written_for = state.layout.spec()
        current = table.metadata.spec()
        if current.compatible_with(written_for):
            return
        old = [f"{t}({c})" for t, c in spec_fields(written_for, state.layout.schema())]
        new = [f"{t}({c})" for t, c in spec_fields(current, table.metadata.schema())]
        raise SinkError(
            f"{ctx.label}: the partition spec of table {self.table_name} changed while the batch "
            f"ran (from {old or 'unpartitioned'} to {new or 'unpartitioned'}); the batch's files "
            "were written for the old spec, and filed under the new one readers would skip their "
            "rows. Nothing was committed. Restart the query: the batch is written again for the "
            "new spec."
        )

    def _check_files_exist(
        self, ctx: BatchContext, state: IcebergState, files: list[IcebergFile]
    ) -> None:
        if not files:
            return
        io = self._io(state.layout)
        missing = [f.path for f in files if size_of(io, f.path) is None]
        if missing:
            raise SinkError(
                f"{ctx.label}: {len(missing)} data file(s) the executors wrote are gone (e.g. "
                f"{missing[0]}): an executor wrote where the driver cannot read (a local "
                "warehouse on a cluster?), or an orphan-file cleanup ran with a retention shorter "
                "than the batch; nothing was committed. Use a warehouse every process reaches."
            )

    def _io(self, layout: TableLayout) -> Any:
        from pyiceberg.io import load_file_io

        return load_file_io({**self.options.catalog, **layout.properties}, layout.location)

    @hookimpl
    def abort(
        self,
        ctx: BatchContext,
        state: IcebergState | None,
        messages: list[IcebergMessage | None],
    ) -> None:
        if state is None:
            return
        files = [f for m in messages if m is not None for f in m.files]
        if not files:
            return
        table = self._load()
        if table is None:
            return
        landed = attempt_landed(table, ctx.writer_id, state.attempt, state.base_snapshot)
        if landed is not False:
            return  # committed, or cannot tell: keep the files; cleanup handles orphans
        io = self._io(state.layout)
        if commit_may_land(io, state.layout, state.attempt):
            log.warning(
                "iceberg.commit_outcome_unknown",
                table=self.table_name,
                writer=ctx.writer_id,
                batch=ctx.batch_id,
                files=len(files),
            )
            return  # a commit sent may still land: its files stay for cleanup
        for f in files:
            try:
                io.delete(f.path)
            except OSError:
                pass  # an orphan; eosink cleanup removes it

    # -- executors -------------------------------------------------------------------------
    @hookimpl
    def write(
        self,
        state: IcebergState,
        partition_id: int,
        attempt: int,
        batches: Iterator[pa.RecordBatch],
    ) -> IcebergMessage:
        writer = PartitionWriter(
            layout=state.layout,
            io=self._io(state.layout),
            prefix=f"eosink-{state.attempt}-{partition_id:05d}-{attempt}",
            compression=state.codec,
            row_group_rows=self.options.row_group_rows,
        )
        return writer.write_all(batches)


def read_table(table: str, catalog: dict[str, str], catalog_name: str = "eosink") -> pa.Table:
    """What the table holds, read by pyiceberg's scan (a reader independent of the sink)."""
    from pyiceberg.catalog import load_catalog

    return load_catalog(catalog_name, **catalog).load_table(table).scan().to_arrow()
