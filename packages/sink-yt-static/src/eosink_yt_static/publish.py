"""SubTx -> Commit: the pipeline that publishes a batch inside MainTx.

On the driver, after the tasks: the PartTxs of the task attempts Spark kept are committed into
MainTx (the others aborted), then one Commit SubTx of MainTx

1. waits for the table's locks (another writer's commit into the table holds them until its
   MainTx commits; the wait is bounded by ``lock_wait_timeout_s``);
2. **sort**: with key columns, sorts ``tmp`` into ``sorted.<attempt>`` (O(batch log batch));
3. **merge or append** the batch into the table, keeping the table node (its id, ACL and
   attributes), or **move** it onto the path:

   =======================  ==========================================  ==================
   case                     what runs                                   cost
   =======================  ==========================================  ==================
   new table, ``drop``      move the staged table onto the path         O(1)
   ``truncate``             merge the batch into the table (overwrite)  O(batch)
   unsorted, append         merge the batch into ``<append=%true>``     O(batch)
                            (``combine_chunks``), else ``concatenate``  O(batch chunks)
   sorted, keys after the   sorted merge into ``<append=%true>``        O(batch)
   table's last key
   sorted, keys overlap     sorted merge of table + batch into the      O(table + batch)
                            table itself
   =======================  ==========================================  ==================

4. **proof**: removes this writer's staging folder and sets the proof attribute.

When MainTx then commits, rows and proof become visible together.
"""

from __future__ import annotations

import json
import time
from typing import Any

from eosink.logs import get_logger
from eosink.plugin import AlreadyCommitted, BatchContext, Proof, SinkError, crash_point
from eosink_yt_static import target
from eosink_yt_static import tx as txs
from eosink_yt_static.options import YtStaticOptions
from eosink_yt_static.proof import PROOFS_ATTR, proof_in, read_proof, write_proof
from eosink_yt_static.staging import YtStaticMessage, YtStaticState, create_table

log = get_logger("eosink.yt_static")


class PreparedByOther(Exception):
    """Another attempt of the batch prepared its commit inside the shared MainTx first."""


def commit_parts(
    client: Any,
    options: YtStaticOptions,
    ctx: BatchContext,
    state: YtStaticState,
    messages: list[YtStaticMessage],
) -> None:
    """Commit the PartTxs of the successful attempts into MainTx; check that all rows are in."""
    for message in messages:
        if message is None or message.part_tx is None:
            continue
        try:
            txs.commit(client, message.part_tx)
        except Exception as exc:
            if not txs.is_no_such_transaction(exc):
                raise
            # Committed by an earlier call of this commit, or gone: the count tells.
    expected = sum(m.rows for m in messages if m is not None)
    with txs.in_tx(client, state.main_tx):
        staged = int(client.get(f"{state.tmp}/@row_count"))
    if staged != expected:
        raise SinkError(
            f"{ctx.label}: {staged} rows staged in {state.tmp} but the tasks wrote {expected}: "
            "a part transaction ended between its task and the commit (aborted, or the driver "
            "that pinged it was gone longer than part_tx_timeout_s), so nothing was published "
            "and the batch is written again when it is retried"
        )


def abort_nested(client: Any, main_tx: str) -> None:
    """Abort what is still open under MainTx: PartTxs of failed or superseded task attempts
    (their rows are not wanted), zombie tasks' PartTxs and leftovers of dead attempts."""
    for child in txs.nested(client, main_tx):
        if txs.abort(client, child):
            log.info("yt_static.nested_tx_aborted", main_tx=main_tx, tx=child)


def wait_lock(
    client: Any,
    path: str,
    mode: str,
    *,
    timeout_s: float,
    label: str,
    child_key: str | None = None,
) -> None:
    """Take a waitable lock in the current transaction and wait until it is acquired."""
    extra = {"child_key": child_key} if child_key else {}
    response = client.lock(path, mode=mode, waitable=True, **extra)
    lock_id = response.get("lock_id") if isinstance(response, dict) else response
    if not lock_id or lock_id == txs.NULL_TX:
        return
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while client.get(f"#{lock_id}/@state") != "acquired":
        if time.monotonic() > deadline:
            raise SinkError(
                f"{label}: waited {timeout_s:g} s for the {mode} lock on {path}: another "
                "writer's commit into the table holds it. Nothing was published; the batch is "
                "written again when it is retried. If commits into this table take longer, "
                "raise option lock_wait_timeout_s"
            )
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def run(
    client: Any,
    options: YtStaticOptions,
    ctx: BatchContext,
    state: YtStaticState,
    proof: Proof,
    stages: Any,
) -> str:
    """The Commit SubTx; returns how the batch went into the table (for the logs)."""
    path = options.path
    parent, name = target.split(path)
    with txs.sub_tx(client, state.main_tx, options.sub_tx_timeout_s, f"commit {ctx.label}") as sub:
        with stages("locks"):
            # Serialize commits into this table: another writer's commit holds these locks
            # until its MainTx commits; a concurrent attempt of this batch, until its SubTx does.
            wait = {"timeout_s": options.lock_wait_timeout_s, "label": ctx.label}
            wait_lock(client, parent, "shared", child_key=name, **wait)
            exists = client.exists(path)
            if exists:
                wait_lock(client, path, "exclusive", **wait)
        committed = target.attributes(client, path, None)
        done = proof_in(committed, ctx.writer_id)
        if done is not None and done.batch_id >= ctx.batch_id:
            raise AlreadyCommitted(f"{ctx.label}: batch {done.batch_id} already committed")
        current = target.attributes(client, path, sub) if exists else None
        proofs = dict((current or {}).get(PROOFS_ATTR) or {})
        prepared = read_proof(proofs, ctx.writer_id)
        if prepared is not None and prepared.batch_id >= ctx.batch_id:
            raise PreparedByOther()  # set inside MainTx after our first check
        inherited = {k: current[k] for k in target.INHERITED_ATTRS if current and k in current}
        result = state.tmp
        if state.keys:
            sorted_path = f"{state.staging}/sorted.{state.attempt}"
            create_table(client, sorted_path, json.loads(state.schema), inherited)
            with stages("sort"):
                client.run_sort(result, sorted_path, sort_by=list(state.keys))
            result = sorted_path
            crash_point("commit:sorted")
        way = _publish(client, options, state, result, current, stages)
        crash_point("commit:published")
        with stages("proof"):
            client.remove(state.staging, recursive=True, force=True)
            write_proof(client, path, proofs, ctx.writer_id, proof)
        stages.start("sub_tx_commit")
    return way


def _publish(
    client: Any,
    options: YtStaticOptions,
    state: YtStaticState,
    result: str,
    current: dict[str, Any] | None,
    stages: Any,
) -> str:
    """Step 3 of the pipeline (see the module's table); returns its name."""
    from yt.wrapper import TablePath

    path = options.path
    if current is None or state.cleanup == "drop":
        with stages("move"):
            client.move(result, path, force=True, recursive=True)
        return "move"
    spec = {"combine_chunks": options.combine_chunks}
    if state.cleanup == "truncate":
        with stages("merge"):
            client.run_merge(result, path, mode="sorted" if state.keys else "ordered", spec=spec)
        return "truncate"
    append = TablePath(path, append=True)
    if not state.keys:
        with stages("append"):
            if options.combine_chunks:
                client.run_merge(result, append, mode="ordered", spec=spec)
                return "merge-append"
            client.concatenate([result], append)
            return "concatenate"
    if _sorts_after(client, path, result, state.keys, current):
        with stages("append"):
            client.run_merge(result, append, mode="sorted", spec=spec)
        return "sorted-append"
    with stages("merge"):
        client.run_merge([path, result], path, mode="sorted", spec=spec)
    return "merge"


def _sorts_after(
    client: Any, path: str, batch: str, keys: tuple[str, ...], current: dict[str, Any]
) -> bool:
    """Whether the (sorted) batch's first key sorts after the table's last key: two rows
    read by row index, whatever the table's size."""
    from yt.wrapper import TablePath

    count = int(current.get("row_count") or 0)
    if count == 0:
        return True
    last = list(client.read_table(TablePath(path, start_index=count - 1, columns=list(keys))))
    first = list(
        client.read_table(TablePath(batch, start_index=0, end_index=1, columns=list(keys)))
    )
    if not first or not last:
        return True
    mine, theirs = _key(first[0], keys), _key(last[-1], keys)
    unique = str(current.get("unique_keys", False)).lower() in ("true", "%true")
    return mine > theirs if unique else mine >= theirs


def _key(row: dict[str, Any], keys: tuple[str, ...]) -> tuple:
    """A row's key in YT's order for one schema (null first)."""
    return tuple((row.get(k) is not None, row.get(k)) for k in keys)
