"""eosink's own Delta commit of a blind append: one JSON file, created only if absent.

A batch of the ``append`` mode reads nothing of the table but its txn, schema and protocol, and
adds new files. Delta's protocol calls that a blind append: it conflicts with no concurrent
append or delete, only with a change of ``metaData`` or ``protocol`` (re-validated here) and,
for eosink, with a commit of this writer at or past the batch (the batch is then committed).
So the commit is: the actions (``commitInfo`` with the proof, the ``txn``, one ``add`` per
file) written as ``_delta_log/<v + 1>.json`` with the store's create-if-absent (``If-None-Match:
*`` on S3, a hard link on local disk): one PUT. The store lets one writer create a version;
whoever loses reads the commits it missed and decides as above.

After the commit, a checkpoint is written by delta-rs when the table's
``delta.checkpointInterval`` is due (at the same versions delta-rs' own writer does), and
expired log files are cleaned up with it (``delta.logRetentionDuration``), as before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from eosink.plugin import AlreadyCommitted, BatchContext, Proof, SinkError
from eosink.logs import get_logger
from eosink_delta.log_view import LogView, TableLog, commit_path
from eosink_delta.store import delta_options
from eosink_delta.proof import ATTEMPT_KEY, PROOF_KEY

log = get_logger("eosink.delta")

#: What the commitInfo says wrote the commit (Delta's readers show it in the history).
ENGINE_INFO = "eosink-delta"


def add_path(relative: str) -> str:
    """The add action's path of a file at ``relative`` (its folder already percent-encoded, as
    :func:`eosink_delta.table.partition_dir` names it): URI-encoded once more, as delta-rs'
    writer does, so that a reader decoding it finds the folder on disk."""
    return quote(relative, safe="/=")


class Conflict(SinkError):
    """A commit landed between the snapshot an upsert was planned on and its commit, and it
    touched what the upsert read: the upsert must be planned again on the newer table."""


def actions(
    ctx: BatchContext,
    files: list[Any],
    proof: Proof,
    attempt: str,
    read_version: int,
    *,
    removes: Sequence[Any] = (),
    merge: dict[str, str] | None = None,
    overwrite: bool = False,
) -> list[dict[str, Any]]:
    """The commit's actions: ``commitInfo`` (with the proof), ``txn``, one ``remove`` per
    file of ``removes`` (:class:`eosink_delta.files.TableFile`), one ``add`` per file.
    ``merge``: the operation parameters of an upsert (a MERGE, not a blind append);
    ``overwrite``: complete mode's (a WRITE replacing the table)."""
    now = int(time.time() * 1000)
    if merge is not None:
        operation, parameters = "MERGE", merge
    else:
        operation, parameters = "WRITE", {"mode": "Overwrite" if overwrite else "Append"}
    info = {
        "timestamp": now,
        "operation": operation,
        "operationParameters": parameters,
        "readVersion": read_version,
        "isBlindAppend": merge is None and not overwrite,
        "engineInfo": ENGINE_INFO,
        PROOF_KEY: proof.to_json(),
        ATTEMPT_KEY: attempt,
    }
    out: list[dict[str, Any]] = [
        {"commitInfo": info},
        # lastUpdated: Delta's Spark connector keeps a txn without one for no time at all once
        # a table sets a txn retention (see eosink_delta.proof).
        {
            "txn": {
                "appId": ctx.writer_id,
                "version": ctx.batch_id,
                "lastUpdated": info["timestamp"],
            }
        },
    ]
    for r in removes:
        out.append(
            {
                "remove": {
                    "path": r.path,
                    "deletionTimestamp": now,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": dict(r.partition_values),
                    "size": r.size,
                    **({"deletionVector": r.deletion_vector} if r.deletion_vector else {}),
                }
            }
        )
    for f in files:
        out.append(
            {
                "add": {
                    "path": add_path(f.path),
                    "partitionValues": dict(f.partition_values),
                    "size": f.size,
                    "modificationTime": f.modification_time,
                    "dataChange": True,
                    "stats": f.stats,
                }
            }
        )
    return out


def encode(commit: list[dict[str, Any]]) -> bytes:
    """The commit file's bytes: one JSON object a line, in UTF-8 as delta-rs writes it (not
    ``\\u`` escapes: delta-rs, delta-kernel-rs and DuckDB's extension all read the escaped
    surrogate pair of a character outside the BMP back as another character, so such a
    partition value would read back changed; ``test_readers.py`` shows it)."""
    lines = (json.dumps(a, separators=(",", ":"), ensure_ascii=False) for a in commit)
    return ("\n".join(lines) + "\n").encode("utf-8")


def _attempt_of(commit: list[dict[str, Any]]) -> str | None:
    for action in commit:
        if "commitInfo" in action:
            return action["commitInfo"].get(ATTEMPT_KEY)
    return None


def _changes_table(commit: list[dict[str, Any]]) -> bool:
    return any("metaData" in a or "protocol" in a for a in commit)


def publish(
    table_log: TableLog,
    view: LogView,
    ctx: BatchContext,
    commit: list[dict[str, Any]],
    attempt: str,
    revalidate: Callable[[LogView], None],
    conflicts: Callable[[list[tuple[int, list[dict[str, Any]]]]], str | None] | None = None,
) -> int:
    """Create the commit at the version after ``view``'s; the version it got.

    First the view's own commit must still be in the log (one HEAD): if log cleanup removed
    it while the batch ran, the version numbers after it may be free again below the newest
    checkpoint, and the view is read anew from that checkpoint (a commit never lands at or
    below it, where no reader would replay it).

    Another commit at that version: the view reads the commits it missed (each once). One of
    them made by this attempt (an answer lost on the way, the request retried) means ours is
    in; this writer's txn at or past the batch means another attempt committed it
    (:class:`AlreadyCommitted`); a new ``metaData`` or ``protocol`` is checked by
    ``revalidate``, which raises when the batch no longer fits. Otherwise the next version is
    tried. ``view`` ends at the version of our commit, applied without reading it back.

    ``conflicts`` (an upsert's): the reason why commits that landed after ``view`` make the
    planned commit wrong, or ``None``; a reason raises :class:`Conflict` (nothing committed,
    the view moved past those commits). When the log was cleaned up past ``view``, the
    commits in between cannot be read: that is a conflict too.
    """
    import obstore
    from obstore.exceptions import AlreadyExistsError

    body = encode(commit)
    while True:
        if not table_log.kept_past(view):
            # The batch ran longer than delta.logRetentionDuration while other writers
            # committed, checkpointed and cleaned the log up: the view's next version number
            # may be one the cleanup freed, below the newest checkpoint, where no reader
            # would see our commit. Read the table anew from that checkpoint.
            log.info("delta.log_view_reopened", table=table_log.uri, version=view.version)
            newer = table_log.reopen(view)
            if view.version < 0:
                raise SinkError(
                    f"{ctx.label}: the Delta table at {table_log.uri} has no log any more; "
                    "the batch is not committed and will be written again when the query "
                    "restarts"
                )
            _decide(view, ctx, newer, attempt, revalidate, conflicts, changed=True)
            if conflicts is not None:
                raise Conflict(
                    f"{ctx.label}: the log was cleaned up past the version the upsert was "
                    "planned on"
                )
        version = view.version + 1
        try:
            obstore.put(table_log.store, table_log.key(commit_path(version)), body, mode="create")
        except AlreadyExistsError:
            pass
        except Exception:
            # The store's answer was lost (no retry left): the commit may have landed.
            landed = _read_quietly(table_log, version)
            if landed is None or _attempt_of(landed) != attempt:
                raise
            view.apply(version, commit)
            return version
        else:
            view.apply(version, commit)
            return version
        newer = table_log.advance(view)
        landed_at = _decide(view, ctx, newer, attempt, revalidate, conflicts)
        if landed_at is not None:
            return landed_at
        log.debug("delta.commit_retried", writer=ctx.writer_id, version=view.version + 1)


def _decide(
    view: LogView,
    ctx: BatchContext,
    newer: list[tuple[int, list[dict[str, Any]]]],
    attempt: str,
    revalidate: Callable[[LogView], None],
    conflicts: Callable[[list[tuple[int, list[dict[str, Any]]]]], str | None] | None = None,
    *,
    changed: bool = False,
) -> int | None:
    """The commits ``newer`` the view read: the version of ours among them, or ``None`` to
    try the next version; :class:`AlreadyCommitted` when another attempt of this batch
    committed it. ``changed``: the table's schema and protocol are checked again anyway."""
    if any(_attempt_of(c) == attempt for _, c in newer):
        log.info("delta.commit_found_landed", writer=ctx.writer_id, batch=ctx.batch_id)
        return next(v for v, c in newer if _attempt_of(c) == attempt)
    last = view.txns.get(ctx.writer_id)
    if last is not None and last >= ctx.batch_id:
        raise AlreadyCommitted(
            f"{ctx.label}: a concurrent commit of this writer won (its txn is at {last})"
        )
    if changed or any(_changes_table(c) for _, c in newer):
        revalidate(view)
    reason = conflicts(newer) if conflicts is not None else None
    if reason is not None:
        raise Conflict(f"{ctx.label}: {reason}")
    return None


def _read_quietly(table_log: TableLog, version: int) -> list[dict[str, Any]] | None:
    try:
        return table_log.commit(version)
    except Exception:  # noqa: BLE001 - the store still fails: the caller raises its own error
        return None


def checkpoint_due(view: LogView, version: int) -> bool:
    """Whether delta-rs' writer would checkpoint after committing ``version``."""
    interval = int(view.configuration.get("delta.checkpointInterval", 100))
    return interval > 0 and (version + 1) % interval == 0


def after_commit(uri: str, storage_options: dict[str, Any], view: LogView, version: int) -> None:
    """A checkpoint at the table's interval, and expired log cleanup with it only.

    delta-rs writes the checkpoint (readable by every Delta reader, ``_last_checkpoint``
    updated) from the table loaded at ``version``: a load of all its files, once per
    ``delta.checkpointInterval`` commits. Cleanup deletes only commits older than the
    checkpoint, which carries every txn on, so no replay loses its evidence. The batch is
    committed already: a failure here is logged, and the next due commit checkpoints.
    """
    if not checkpoint_due(view, version):
        return
    from deltalake import DeltaTable

    enabled = view.configuration.get("delta.enableExpiredLogCleanup", "true").lower() == "true"
    try:
        table = DeltaTable(uri, version=version, storage_options=delta_options(storage_options))
        table.create_checkpoint()
        if enabled:
            table.cleanup_metadata()
    except Exception as exc:  # noqa: BLE001 - the commit stands; a later checkpoint follows
        log.warning("delta.checkpoint_failed", table=uri, version=version, reason=str(exc))
