"""Complete output mode: one commit of eosink's own log writer removes every live file and
adds the batch's, with the ``txn`` and the proof (:mod:`eosink_delta.log_commit`).

The commit replaces the table as the log holds it just before it: the live files come from
the view (:mod:`eosink_delta.files`), and the commit is created at the next version with the
check that no commit landed after that view touching the table's files. One did (another
application's append, a compaction, a delete): the view moves past it and the files are
listed again, so the batch never leaves a file beside it that it did not see (before, through
delta-rs' overwrite, a compaction landing between the snapshot and the commit left the
previous batch's rows, rewritten into a file the snapshot did not name, beside the batch).
Delta's own conflict rules would let a concurrent blind append stand (its ``WriteSerializable``
level); here it is removed with the rest: complete mode's table holds the query's result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eosink.plugin import BatchContext, Proof, SinkError, crash_point
from eosink.logs import get_logger
from eosink_delta import files as file_index
from eosink_delta import log_commit
from eosink_delta.log_view import LogView, check_txn, table_gone, viewed
from eosink_delta.store import existence

if TYPE_CHECKING:
    from collections.abc import Callable

    from eosink_delta.sink import DeltaState

log = get_logger("eosink.delta")

#: How often a complete-mode commit is listed again after other commits changed the table's
#: files before it landed.
MAX_PLANS = 8


def commit_complete(
    uri: str,
    storage: dict[str, Any],
    ctx: BatchContext,
    state: DeltaState,
    files: list[Any],
    proof: Proof,
    check_compatible: Callable[[BatchContext, LogView, DeltaState], None],
) -> None:
    """``complete`` mode: remove every live file and add the batch's, in one commit.
    ``check_compatible``: the sink's check that the batch still fits the table (its
    features, partitioning and schema), run on the view and on every newer metadata."""
    with viewed(uri, storage, reuse=(ctx.writer_id, ctx.batch_id)) as seen:
        view = seen.view
        if view is None:
            raise table_gone(ctx, uri)
        check_txn(ctx, view)
        check_compatible(ctx, view, state)
        check_files_exist(uri, storage, ctx, files)
        crash_point("commit:checked")
        for _ in range(MAX_PLANS):
            index = file_index.files_at(seen.log, view)
            commit = log_commit.actions(
                ctx,
                files,
                proof,
                state.attempt,
                index.version,
                removes=list(index.files.values()),
                overwrite=True,
            )
            try:
                version = log_commit.publish(
                    seen.log,
                    view,
                    ctx,
                    commit,
                    state.attempt,
                    revalidate=lambda newer: check_compatible(ctx, newer, state),
                    conflicts=_files_changed,
                )
            except log_commit.Conflict as exc:
                log.info("delta.complete_replanned", table=uri, reason=str(exc))
                continue
            file_index.applied(seen.log, version, commit)
            log_commit.after_commit(uri, storage, view, version)
            return
    raise SinkError(
        f"{ctx.label}: the complete-mode commit into {uri} met other writers' commits "
        f"{MAX_PLANS} times in a row; nothing of this batch was committed. Restart the query "
        "(it writes the batch again)."
    )


def _files_changed(newer: list[tuple[int, list[dict[str, Any]]]]) -> str | None:
    """Why commits after the view make the planned replacement wrong: they added or removed
    files (the replacement must remove what is live when it lands), or changed the schema."""
    for version, actions in newer:
        for action in actions:
            if "add" in action or "remove" in action:
                return f"commit {version} changed the table's files"
            if "metaData" in action or "protocol" in action:
                return f"commit {version} changed the table's schema or protocol"
    return None


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
