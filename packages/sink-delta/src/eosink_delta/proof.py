"""The proof of a batch: a Delta app transaction, with eosink's proof in the same commit.

This is the ``delta`` sink's exactly-once evidence, in one place:

* **what**: the evidence that batch ``b`` of writer ``w`` is in the table is a Delta app
  transaction ``txn(appId=w, version=b)`` committed with the batch's files. Delta keeps only
  the latest version per app id in the table's state, so "committed" means
  ``transaction_version(w) >= b`` on a fresh snapshot (:func:`last_version`), and nothing
  else. The rest of eosink's proof (query id, checkpoint, rows, fingerprint) does not fit in a
  ``txn``;
* **where**: it goes into the ``commitInfo`` of the same commit (key :data:`PROOF_KEY`, with
  the attempt under :data:`ATTEMPT_KEY`; Delta's own Spark writer puts it in
  ``userMetadata``), and is read back from the table's history, for the details only
  (:func:`find_proof`, :func:`stored_proof`);
* **how it is written**: by eosink's blind-append commit (:mod:`eosink_delta.log_commit`), by
  delta-rs for complete mode (:mod:`eosink_delta.complete_mode`), or by Delta's Spark writer
  (:mod:`eosink_delta.delta_spark`); the append path reads the txns from eosink's own view of
  the log (:mod:`eosink_delta.log_view`).

Txn retention: Delta expires an app transaction (``delta.setTransactionRetentionDuration``)
by its ``lastUpdated`` time, and Delta's Spark connector drops a txn *without* one as soon as
a table sets a retention (its log replay keeps only a ``lastUpdated`` newer than the cut-off;
its next checkpoint then lacks the txn), while delta-rs keeps such a txn for ever. So both
engines stamp the txn with ``lastUpdated``, and a retention shorter than the time a query may
take to replay a batch is refused (:func:`eosink_delta.table.check_txn_retention`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from eosink.plugin import BatchContext, EosinkError, Proof
from eosink.logs import get_logger

log = get_logger("eosink.delta")

#: commitInfo keys eosink writes next to the txn.
PROOF_KEY = "eosink.proof"
ATTEMPT_KEY = "eosink.attempt"
#: History entries read per step when looking for a proof's details.
HISTORY_STEP = 200


class ForeignTransactionError(EosinkError):
    """The table holds this writer id's txn, but not written by eosink."""


#: The attribute of a table handle that remembers txn versions: (version, writer) -> txn.
#: delta-rs 1.6 answers ``transaction_version`` by reading every commit file since the last
#: checkpoint (one request each on an object store); a snapshot's answer never changes.
TXNS_SEEN = "_eosink_txns"


def last_version(table: Any, writer_id: str) -> int | None:
    """The latest batch (txn version) of ``writer_id`` in ``table``'s snapshot."""
    key = (table.version(), writer_id)
    known = getattr(table, TXNS_SEEN, None)
    if known is None or key not in known:
        if known is None or any(v != key[0] for v, _ in known):
            known = {}  # older versions of this handle are never asked again
            setattr(table, TXNS_SEEN, known)
        known[key] = table.transaction_version(writer_id)
    return known[key]


def proof_of_commit(commit_info: Mapping[str, Any]) -> Proof | None:
    """The eosink proof stored in a commitInfo (delta-rs engine: a key; Spark: userMetadata)."""
    text = commit_info.get(PROOF_KEY)
    if text is None:
        meta = commit_info.get("userMetadata")
        if isinstance(meta, str) and PROOF_KEY in meta:
            try:
                text = json.loads(meta).get(PROOF_KEY)
            except ValueError:
                text = None
    if text is None:
        return None
    try:
        return Proof.from_json(text) if isinstance(text, str) else Proof.from_dict(text)
    except (ValueError, TypeError):
        return None


def find_proof(table: Any, writer_id: str, batch_id: int, last: int) -> tuple[Proof | None, bool]:
    """The stored proof of ``batch_id`` (if kept) else of ``last``, from the commit history.

    Reads the history newest first, in steps, and stops at the first proof of this writer at or
    below ``batch_id``: versions only grow per writer, so nothing older can match. Also says
    whether the history it read is complete (reaches the table's first commit): log retention
    removes old commit files, and with them the proofs, while the txn lives on in checkpoints.
    """
    latest: Proof | None = None
    seen, limit = 0, HISTORY_STEP
    while True:
        history = table.history(limit)
        for commit in history[seen:]:
            proof = proof_of_commit(commit)
            if proof is None or proof.writer_id != writer_id:
                continue
            if latest is None and proof.batch_id == last:
                latest = proof
            if proof.batch_id == batch_id:
                return proof, True
            if proof.batch_id < batch_id:
                return latest, True
        if len(history) < limit:
            return latest, not history or history[-1].get("version") == 0
        seen, limit = len(history), limit * 2


def committed_proof(uri: str, ctx: BatchContext, table: Any) -> Proof | None:
    """``is_committed`` of both engines: a fresh snapshot's txn decides, the history details it."""
    last = last_version(table, ctx.writer_id)
    if last is None or last < ctx.batch_id:
        return None
    return stored_proof(uri, ctx, last, table)


def stored_proof(uri: str, ctx: BatchContext, last: int, table: Any) -> Proof:
    """The proof of a batch the writer's txn (at ``last``) covers, with the details the
    history of ``table`` (a delta-rs snapshot) still holds."""
    proof, complete = find_proof(table, ctx.writer_id, ctx.batch_id, last)
    if proof is not None:
        return proof
    if ctx.kind == "stream" and complete:
        raise ForeignTransactionError(
            f"{ctx.label}: the Delta table at {uri} already records app id {ctx.writer_id!r} at "
            f"version {last}, but not from eosink (e.g. a Spark job with txnAppId="
            f"{ctx.writer_id!r}), so this stream would skip every batch up to {last}. To "
            "proceed: give this query a writer id no other job uses (its rows are then added to "
            "what the table holds); or write to a new table."
        )
    log.info(
        "delta.proof_without_details",
        writer=ctx.writer_id,
        batch=ctx.batch_id,
        last=last,
        reason=(
            "the txn's commit carries no eosink proof (a batch job of another tool)"
            if complete
            else "log retention removed the commits that carried the proof; the txn decides"
        ),
    )
    return Proof(writer_id=ctx.writer_id, batch_id=last)
