"""Complete output mode: delta-rs replaces every current file with the batch's in one commit.

An append is eosink's own blind-append commit (:mod:`eosink_delta.log_commit`); ``complete``
mode needs the table's file list, so it commits through delta-rs on a snapshot
(:mod:`eosink_delta.snapshot`), with the ``txn`` and the proof (:mod:`eosink_delta.proof`) in
that same commit. A concurrent commit of the same app id makes delta-rs fail ours with a
conflict, read as "already committed"; when log cleanup removed the snapshot's own commit
meanwhile, the commit is decided again on the table brought up to date.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from eosink.plugin import AlreadyCommitted, BatchContext, Proof, SinkError, crash_point
from eosink.logs import get_logger
from eosink_delta.proof import ATTEMPT_KEY, PROOF_KEY, last_version
from eosink_delta.schema import check_schema, delta_fields, fields_of
from eosink_delta.snapshot import latest
from eosink_delta.store import existence
from eosink_delta.log_view import LogView, table_gone
from eosink_delta.table import check_table_features, post_commit_hooks
from eosink_delta.writer_features import check_blind_append

if TYPE_CHECKING:
    from eosink_delta.sink import DeltaState

log = get_logger("eosink.delta")


def commit_complete(
    uri: str,
    storage: dict[str, Any],
    ctx: BatchContext,
    state: DeltaState,
    files: list[Any],
    proof: Proof,
) -> None:
    """``complete`` mode: delta-rs removes every current file and adds the batch's in one
    commit (it needs the table's file list, which a blind append does not)."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    # Fresh; not probed again if this process's is_committed of this batch did it: delta-rs
    # checks our commit against every commit after the snapshot (another attempt of this
    # writer is a conflict, read as "already committed" below).
    with latest(uri, storage, reuse=(ctx.writer_id, ctx.batch_id)) as table:
        try:
            _commit_on(uri, storage, table, ctx, state, files, proof)
        except CommitFailedError as exc:
            _lost(uri, storage, ctx, exc)
        except DeltaError as exc:
            if _log_holds(uri, storage, table):
                raise
            # delta-rs checks our commit against the commits after the snapshot, but a
            # checkpoint and log cleanup removed the snapshot's own commit meanwhile (a
            # driver that stalled, a short delta.logRetentionDuration): it cannot, and fails
            # whatever happened since. Decide again on the table brought up to date.
            log.info("delta.snapshot_outdated", table=uri, reason=str(exc))
            with latest(uri, storage) as fresh:
                try:
                    _commit_on(uri, storage, fresh, ctx, state, files, proof)
                except CommitFailedError as lost:
                    _lost(uri, storage, ctx, lost)


def _commit_on(
    uri: str,
    storage: dict[str, Any],
    table: Any,
    ctx: BatchContext,
    state: DeltaState,
    files: list[Any],
    proof: Proof,
) -> None:
    """Check the batch against the snapshot ``table``, then commit it on that snapshot:
    the files' add actions, the txn and the proof in one Delta commit."""
    from deltalake.transaction import AddAction, CommitProperties, Transaction

    if table is None:
        raise table_gone(ctx, uri)
    last = last_version(table, ctx.writer_id)
    if last is not None and last >= ctx.batch_id:
        raise AlreadyCommitted(f"{ctx.label}: the table's txn of this writer is at {last}")
    _check_still_compatible(uri, table, state)
    check_files_exist(uri, storage, ctx, files)
    crash_point("commit:checked")
    actions = [
        AddAction(f.path, f.size, f.partition_values, f.modification_time, True, f.stats)
        for f in files
    ]
    properties = CommitProperties(
        # last_updated: Delta's Spark connector keeps a txn without one for no time at all once
        # a table sets a txn retention (see eosink_delta.proof).
        app_transactions=[Transaction(ctx.writer_id, ctx.batch_id, int(time.time() * 1000))],
        custom_metadata={PROOF_KEY: proof.to_json(), ATTEMPT_KEY: state.attempt},
    )
    table.create_write_transaction(
        actions,
        "overwrite" if ctx.mode == "complete" else "append",
        table.schema(),
        partition_by=list(state.partition_by),
        commit_properties=properties,
        post_commithook_properties=post_commit_hooks(table),
    )


def _log_holds(uri: str, storage: dict[str, Any], table: Any) -> bool:
    """Whether the table's log still holds the commit of ``table``'s version."""
    return existence(uri, storage)([f"_delta_log/{table.version():020d}.json"])[0]


def _lost(uri: str, storage: dict[str, Any], ctx: BatchContext, exc: Exception) -> None:
    """Our commit lost a race: to another attempt of this batch, or to another writer."""
    with latest(uri, storage) as fresh:
        now = last_version(fresh, ctx.writer_id) if fresh is not None else None
    if now is not None and now >= ctx.batch_id:
        raise AlreadyCommitted(
            f"{ctx.label}: a concurrent commit of this writer won ({exc})"
        ) from None
    raise SinkError(
        f"{ctx.label}: the Delta commit failed on a conflict with another writer "
        f"({exc}); nothing of this batch is in the table. Restart the query (or rerun "
        "the job with the same version): the batch is written again."
    ) from exc


def view_of(table: Any) -> LogView:
    """The delta-rs snapshot ``table`` as a :class:`LogView` (for the feature checks)."""
    protocol = table.protocol()
    return LogView(
        version=table.version(),
        metadata={
            "schemaString": table.schema().to_json(),
            "configuration": dict(table.metadata().configuration or {}),
            "partitionColumns": list(table.metadata().partition_columns),
        },
        protocol={
            "minReaderVersion": protocol.min_reader_version,
            "minWriterVersion": protocol.min_writer_version,
            "readerFeatures": protocol.reader_features,
            "writerFeatures": protocol.writer_features,
        },
    )


def _check_still_compatible(uri: str, table: Any, state: DeltaState) -> None:
    """The batch still fits the snapshot it is committed on: the table's features (another
    writer may have added an invariant or a generated column since init) and its schema."""
    view = view_of(table)
    check_table_features(uri, view.configuration, engine="delta-rs", mode="complete")
    check_blind_append(uri, view)
    current = delta_fields(table.schema())
    if current == fields_of(state.table_schema):
        return
    check_schema(
        current,
        state.plan.data_schema,
        where=uri,
        merge_schema=False,
    )


def check_files_exist(
    uri: str, storage: dict[str, Any], ctx: BatchContext, files: list[Any]
) -> None:
    """Refuse to commit files that are gone (a VACUUM with a short retention during the batch)."""
    if not files:
        return
    found = existence(uri, storage)([f.path for f in files])
    missing = [f.path for f, there in zip(files, found) if not there]
    if missing:
        raise SinkError(
            f"{ctx.label}: {len(missing)} file(s) the executors wrote are gone (e.g. "
            f"{missing[0]}), likely removed by a VACUUM with a short retention while the batch "
            "ran; nothing was committed. Restart the query to rewrite the batch, and keep "
            "VACUUM's retention above the longest batch duration (the default 7 days is safe)."
        )
