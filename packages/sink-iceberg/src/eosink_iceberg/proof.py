"""The proof of a batch: where it lives in an Iceberg table, how it is written and read back.

Iceberg's own exactly-once writers keep their proof in snapshot summaries only (Spark:
``spark.sql.streaming.queryId``/``epochId``; Flink: ``flink.max-committed-checkpoint-id``) and
find it by walking parent snapshots, so expiring snapshots erases it and a replay is written
again. eosink writes the proof twice, in the one catalog commit that adds the batch's snapshot:

* the snapshot's summary: ``eosink.writer``, ``eosink.batch``, ``eosink.attempt`` and the whole
  proof under ``eosink.proof`` (what a reader of the history sees, and what ``abort`` looks for);
* the table's properties: ``eosink.proof.<writer id>`` holds this writer's latest proof, the
  attempt that committed it and the table's uuid. Snapshot expiry never removes a property, and
  there is one per writer, not per batch, so it stays small.

``is_committed`` reads the property. It carries the table's uuid: a table dropped and created
anew under the same name (or one whose properties were copied from another) holds none of the
data, so a proof of another table's uuid is no proof here.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from eosink.plugin import Proof
from eosink.logs import get_logger

log = get_logger("eosink.iceberg")

PROPERTY_PREFIX = "eosink.proof."
SUMMARY_PROOF = "eosink.proof"
SUMMARY_WRITER = "eosink.writer"
SUMMARY_BATCH = "eosink.batch"
SUMMARY_ATTEMPT = "eosink.attempt"
#: pyiceberg's own commit retries re-commit the same proof without checking it again: eosink's
#: commits run with them off and retry themselves.
NO_RETRIES = {"commit.retry.num-retries": "0"}


@attrs.frozen
class StoredProof:
    """A writer's proof property: the proof, the attempt that committed it, the table's uuid."""

    proof: Proof
    attempt: str
    table_uuid: str

    def to_json(self) -> str:
        return json.dumps(
            {"proof": self.proof.to_dict(), "attempt": self.attempt, "table": self.table_uuid},
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> StoredProof:
        data = json.loads(text)
        return cls(Proof.from_dict(data["proof"]), str(data["attempt"]), str(data["table"]))


def property_key(writer_id: str) -> str:
    return f"{PROPERTY_PREFIX}{writer_id}"


def stored_proof(table: Any, writer_id: str) -> StoredProof | None:
    """The writer's proof property of ``table`` (its loaded metadata), if it is this table's."""
    text = table.metadata.properties.get(property_key(writer_id))
    if text is None:
        return None
    try:
        stored = StoredProof.from_json(text)
    except (ValueError, KeyError, TypeError):
        log.warning("iceberg.proof_unreadable", table=str(table.name()), writer=writer_id)
        return None
    if stored.table_uuid != str(table.metadata.table_uuid):
        log.warning(
            "iceberg.proof_of_other_table",
            table=".".join(table.name()),
            writer=writer_id,
            proof_table=stored.table_uuid,
            table_uuid=str(table.metadata.table_uuid),
        )
        return None
    return stored


def all_proofs(table: Any) -> dict[str, StoredProof]:
    """Every writer's proof property of this table."""
    out = {}
    for key in table.metadata.properties:
        if key.startswith(PROPERTY_PREFIX):
            stored = stored_proof(table, key[len(PROPERTY_PREFIX) :])
            if stored is not None:
                out[stored.proof.writer_id] = stored
    return out


def summary(proof: Proof, attempt: str) -> dict[str, str]:
    """The snapshot summary properties of a batch's snapshot."""
    return {
        SUMMARY_PROOF: proof.to_json(),
        SUMMARY_WRITER: proof.writer_id,
        SUMMARY_BATCH: str(proof.batch_id),
        SUMMARY_ATTEMPT: attempt,
    }


def attempt_landed(table: Any, writer_id: str, attempt: str, since: int | None) -> bool | None:
    """Whether a commit of ``attempt`` is in the table: True, False, or None (cannot tell).

    Looks at the writer's proof property, then walks the main branch from its head back to the
    snapshot ``since`` (the head the attempt started from): O(commits since), not O(history).
    ``None`` when that walk breaks on an expired snapshot before reaching ``since``.
    """
    stored = stored_proof(table, writer_id)
    if stored is not None and stored.attempt == attempt:
        return True
    snapshot = table.metadata.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != since:
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if props.get(SUMMARY_ATTEMPT) == attempt:
            return True
        parent = snapshot.parent_snapshot_id
        if parent is None:
            return False if since is None else None
        snapshot = table.metadata.snapshot_by_id(parent)
        if snapshot is None:
            return None
    return False
