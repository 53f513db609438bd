"""The ``delta`` sink: Delta Lake tables through delta-rs, one Delta commit per batch.

* ``init`` (driver) creates the table on the first write and checks the stream against it:
  schema, partition columns, table features; with ``merge_schema`` it adds new columns.
* ``write`` (executors) writes Parquet files straight into the table folder under names unique
  to the attempt; readers do not see them: they are not in the Delta log. Where the batch is a
  DataFrame, ``write_dataframe`` lets Spark's own Parquet writer write them instead
  (:mod:`eosink_delta.spark_file_writer`).
* ``commit`` (driver), in append mode, checks the batch against eosink's own view of the log
  (:mod:`eosink_delta.log_view`), refuses if this writer's txn already covers the batch
  (``AlreadyCommitted``), then commits the files' add actions, the ``txn(appId=writer id,
  version=batch id)`` and the proof (in ``commitInfo``) as one Delta blind append, created
  only if absent (:mod:`eosink_delta.log_commit`); a commit of the same writer that took the
  version first reads as "already committed". ``complete`` mode commits through delta-rs,
  which removes every current file in that same commit (a concurrent commit of the same app id
  makes delta-rs fail ours with a conflict, read as "already committed"; when log cleanup
  removed the snapshot's own commit meanwhile, the commit is decided again on the table
  brought up to date).
* ``is_committed`` is ``txn(writer id) >= batch id`` in the view brought up to date.
* ``abort`` deletes an attempt's files only when no commit of that attempt is in the log.

The driver keeps one log view per table between batches, "fresh" meaning brought up to date
with the commits since (never a listing of the log, never the table's files), so a batch costs
the same on a table with a long history as on a new one. The delta-rs snapshot it also keeps
(:mod:`eosink_delta.snapshot`) serves what an append does not need: complete mode, the proof's
details from the history, ``abort``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import (
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    SinkError,
    Staged,
    crash_point,
    hookimpl,
)
from eosink.logs import get_logger
from eosink_delta import log_commit, spark_file_writer, upsert
from eosink_delta.complete_mode import check_files_exist, commit_complete
from eosink_delta.log_view import LogView, check_txn, table_gone, viewed
from eosink_delta.operator_hooks import DeltaOperatorHooks
from eosink_delta.options import DeltaOptions
from eosink_delta.parquet import DeltaMessage, PartitionWriter
from eosink_delta.proof import ATTEMPT_KEY, stored_proof
from eosink_delta.schema import (
    WritePlan,
    check_schema,
    delta_schema_of,
    fields_of,
    normalize_schema,
)
from eosink_delta.snapshot import latest
from eosink_delta.store import check_store, delta_options, filesystem, path_in
from eosink_delta.table import (
    check_not_other_data,
    check_partitions,
    check_table_features,
    is_delta_table,
    unsupported_partition_type,
)
from eosink_delta.writer_features import check_blind_append, check_upsert

log = get_logger("eosink.delta")


@attrs.frozen
class DeltaState:
    """What ``init`` hands every ``write`` and ``commit``: small and picklable."""

    attempt: str  # unique per init call: names this attempt's files and its commit
    read_version: int  # the table version init saw; this attempt's commit can only be later
    plan: WritePlan
    partition_by: tuple[str, ...]
    table_schema: str  # the table's Delta schema (JSON) the plan was checked against


class DeltaSink(DeltaOperatorHooks, Sink):
    """Exactly-once into a Delta table: files + ``txn`` + proof in one Delta commit."""

    name = "delta"
    Options = DeltaOptions

    @property
    def uri(self) -> str:
        return self.options.path

    @property
    def storage(self) -> dict[str, Any]:
        return self.options.storage_options

    def _check_store(self) -> None:
        """Refuse, before anything is written, a store this sink cannot commit to safely."""
        check_store(self.uri, self.storage, self.options.single_writer)

    # -- driver ----------------------------------------------------------------------------
    @hookimpl
    def upsert_key(self) -> tuple[str, ...] | None:
        """The key rows are replaced by in ``mode="upsert"`` (:mod:`eosink_delta.upsert`)."""
        return tuple(self.options.key) if self.options.upsert else None

    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        self._check_store()
        # eosink's view of the log decides (a HEAD and a GET when nothing is new); only a batch
        # it covers reads delta-rs' history, for the proof's details.
        with viewed(self.uri, self.storage, mark=(ctx.writer_id, ctx.batch_id)) as seen:
            last = seen.view.txns.get(ctx.writer_id) if seen.view is not None else None
        if last is None or last < ctx.batch_id:
            return None
        with latest(self.uri, self.storage) as table:
            return stored_proof(self.uri, ctx, last, table) if table is not None else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> DeltaState:
        if self.options.engine == "delta-spark":
            raise ConfigurationError(
                "sink 'delta': engine 'delta-spark' writes through Spark's Delta writer, which "
                "the eosink front doors do not drive; use eosink_delta.delta_spark.foreach_batch("
                "...) or eosink_delta.delta_spark.write_batch(...) for it, or engine='delta-rs' "
                "here"
            )
        self._check_store()
        stream = normalize_schema(schema)
        wanted = self.options.partition_by
        if self.options.upsert:  # before the table is created: the stream's own problems
            upsert.check_options(self.uri, self.options, stream, wanted, ctx.mode)
        # The kept view as it is: what init checks rarely changes, and commit checks it again
        # against every commit after it.
        with viewed(self.uri, self.storage, fresh=False) as seen:
            if seen.view is None:
                self._create(stream, wanted)
        with viewed(self.uri, self.storage, fresh=False) as seen:
            if seen.view is None:
                raise SinkError(f"sink 'delta': the Delta table at {self.uri} disappeared")
            return self._plan(ctx, seen.view, stream, wanted)

    def _create(self, stream: pa.Schema, wanted: tuple[str, ...]) -> None:
        from deltalake import DeltaTable

        check_not_other_data(self.uri, self.storage)
        self._check_new_partitions(stream, wanted)
        try:
            DeltaTable.create(
                self.uri,
                delta_schema_of(stream),
                mode="ignore",
                partition_by=list(wanted),
                storage_options=delta_options(self.storage),
            )
        except Exception:
            if not is_delta_table(self.uri, self.storage):
                raise
            # another writer created it at the same moment: theirs is checked by the caller
        else:
            log.info("delta.table_created", table=self.uri, partition_by=list(wanted))

    def _plan(
        self, ctx: BatchContext, view: LogView, stream: pa.Schema, wanted: tuple[str, ...]
    ) -> DeltaState:
        """The batch's write plan, checked against the table's schema, partitions, features."""
        self._check_features(ctx, view)
        partition_by = tuple(view.partition_columns)
        check_partitions(self.uri, list(partition_by), wanted)
        missing = [c for c in partition_by if c not in stream.names]
        if missing:
            raise ConfigurationError(
                f"sink 'delta': the table at {self.uri} is partitioned by {list(partition_by)} but "
                f"the stream lacks {missing}; select those columns in the query"
            )
        self._check_partition_types(stream, partition_by)
        if self.options.upsert:
            upsert.check_options(self.uri, self.options, stream, partition_by, ctx.mode)
            upsert.check_table_key(self.uri, self.options, list(fields_of(view.schema_string)))
        checked = check_schema(
            fields_of(view.schema_string),
            stream,
            where=self.uri,
            merge_schema=self.options.merge_schema,
        )
        if checked.new_columns:
            added = delta_schema_of(pa.schema(list(checked.new_columns))).fields
            with latest(self.uri, self.storage) as table:
                table.alter.add_columns(list(added))
            log.info("delta.schema_merged", table=self.uri, columns=[f.name for f in added])
            with viewed(self.uri, self.storage) as seen:  # reads the commit of the new columns
                if seen.view is None:
                    raise SinkError(f"sink 'delta': the Delta table at {self.uri} disappeared")
                view = seen.view
            self._check_features(ctx, view)
        fields = fields_of(view.schema_string)
        data = pa.schema(
            [
                f.with_type(checked.casts.get(f.name, f.type))
                for f in stream
                if f.name not in partition_by
            ]
        )
        not_null = tuple(n for n, f in fields.items() if not f.get("nullable", True))
        keys = pa.schema(
            [
                stream.field(c).with_type(checked.casts.get(c, stream.field(c).type))
                for c in partition_by
            ]
        )
        missing = tuple(
            (n, json.dumps(f["type"]))
            for n, f in fields.items()
            if n not in stream.names and n not in partition_by
        )
        return DeltaState(
            attempt=uuid.uuid4().hex,
            read_version=view.version,
            plan=WritePlan(
                data_schema=data, not_null=not_null, partition_schema=keys, missing=missing
            ),
            partition_by=partition_by,
            table_schema=view.schema_string,
        )

    def _check_features(self, ctx: BatchContext, view: LogView) -> None:
        """The table's features against what this batch's commit writes, the same in both
        modes: a blind append (``append``) is eosink's own commit; ``complete`` is delta-rs',
        which does not enforce generated columns or invariants on the files it adds either."""
        check_table_features(self.uri, view.configuration, engine="delta-rs", mode=ctx.mode)
        check_blind_append(self.uri, view)
        if self.options.upsert:
            check_upsert(self.uri, view)

    def _check_new_partitions(self, stream: pa.Schema, wanted: tuple[str, ...]) -> None:
        missing = [c for c in wanted if c not in stream.names]
        if missing:
            raise ConfigurationError(
                f"sink 'delta': partitionBy names {missing}, which the stream lacks (it has "
                f"{stream.names}); partition by columns of the query"
            )
        if wanted and len(wanted) == len(stream.names):
            raise ConfigurationError(
                "sink 'delta': partitionBy names every column of the stream; a Delta table needs "
                "at least one data column: partition by fewer columns"
            )
        self._check_partition_types(stream, wanted)

    def _check_partition_types(self, stream: pa.Schema, partition_by: tuple[str, ...]) -> None:
        for column in partition_by:
            problem = unsupported_partition_type(stream.field(column).type)
            if problem:
                raise ConfigurationError(
                    f"sink 'delta': partition column {column!r} has type "
                    f"{stream.field(column).type}, which cannot be a partition column: {problem}"
                    " in the query. Nothing was written."
                )

    @hookimpl
    def commit(
        self, ctx: BatchContext, state: DeltaState, messages: list[DeltaMessage], proof: Proof
    ) -> None:
        files = [f for m in messages for f in m.files]
        if self.options.upsert:
            upsert.commit_upsert(self, ctx, state, files, proof)
        elif ctx.mode != "complete":
            self._append(ctx, state, files, proof)
        else:
            commit_complete(
                self.uri, self.storage, ctx, state, files, proof, self._check_view_compatible
            )
        crash_point("commit:committed")
        log.debug(
            "delta.committed",
            table=self.uri,
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            files=len(files),
        )

    def _append(self, ctx: BatchContext, state: DeltaState, files: list[Any], proof: Proof) -> None:
        """eosink's own commit of a blind append (:mod:`eosink_delta.log_commit`), on the view
        ``is_committed`` brought up to date (not probed again in the same process): the
        store's create-if-absent arbitrates every commit after it."""
        reuse = (ctx.writer_id, ctx.batch_id)
        with viewed(self.uri, self.storage, reuse=reuse) as seen:
            view = seen.view
            if view is None:
                raise table_gone(ctx, self.uri)
            check_txn(ctx, view)
            self._check_view_compatible(ctx, view, state)
            check_files_exist(self.uri, self.storage, ctx, files)
            crash_point("commit:checked")
            commit = log_commit.actions(ctx, files, proof, state.attempt, view.version)
            version = log_commit.publish(
                seen.log,
                view,
                ctx,
                commit,
                state.attempt,
                revalidate=lambda newer: self._check_view_compatible(ctx, newer, state),
            )
            log_commit.after_commit(self.uri, self.storage, view, version)

    def _check_view_compatible(self, ctx: BatchContext, view: LogView, state: DeltaState) -> None:
        """The batch still fits the table as ``view`` has it: its features, partitioning and
        schema (another writer may have changed them since init)."""
        self._check_features(ctx, view)
        if tuple(view.partition_columns) != state.partition_by:
            raise SinkError(
                f"{ctx.label}: the table at {self.uri} is now partitioned by "
                f"{view.partition_columns}, not {list(state.partition_by)} as when the batch "
                "started; nothing was committed. Restart the query to write the batch again."
            )
        if view.schema_string != state.table_schema:
            check_schema(
                fields_of(view.schema_string),
                state.plan.data_schema,
                where=self.uri,
                merge_schema=False,
            )

    @hookimpl
    def abort(
        self, ctx: BatchContext, state: DeltaState | None, messages: list[DeltaMessage | None]
    ) -> None:
        if state is None:
            return
        files = [f for m in messages if m is not None for f in m.files]
        if not files:
            return
        with latest(self.uri, self.storage) as table:
            if table is None:
                return
            newer = table.version() - state.read_version
            history = table.history(newer) if newer > 0 else []
        if len(history) < newer or any(h.get(ATTEMPT_KEY) == state.attempt for h in history):
            return  # committed (or cannot tell): keep the files; cleanup handles orphans
        fs, base = filesystem(self.uri, self.storage)
        for f in files:
            try:
                fs.delete_file(path_in(base, f.path))
            except OSError:
                pass  # an orphan; VACUUM removes it

    @hookimpl
    def write_dataframe(self, state: DeltaState, df: Any) -> Staged | None:
        if not spark_file_writer.chooses_spark(self.options, self.uri, df, state.partition_by):
            return None
        message = spark_file_writer.stage(
            self.uri, self.options, df, state.attempt, state.plan, state.partition_by
        )
        return Staged(message, message.rows)

    # -- executors -------------------------------------------------------------------------
    @hookimpl
    def write(
        self, state: DeltaState, partition_id: int, attempt: int, batches: Iterator[pa.RecordBatch]
    ) -> DeltaMessage:
        writer = PartitionWriter(
            root=self.uri,
            storage_options=self.storage,
            prefix=f"part-{partition_id:05d}-{state.attempt}-{attempt}",
            plan=state.plan,
            partition_by=state.partition_by,
            compression=self.options.compression,
            row_group_rows=self.options.row_group_rows,
            stats=self.options.stats,
        )
        return writer.write_all(batches)


def read_table(path: str, storage_options: dict[str, Any] | None = None) -> pa.Table:
    """What the table holds, read by delta-rs (an independent reader of the Delta log)."""
    from deltalake import DeltaTable

    options = delta_options(storage_options or {})
    return DeltaTable(path, storage_options=options).to_pyarrow_table()
