"""The proof of a batch: a proof line in the manifest log file that publishes the batch.

This is the ``files`` sink's exactly-once evidence, in one place:

* **what**: a :class:`ProofEntry`, the core's :class:`eosink.plugin.Proof` (writer id, batch
  id, query id, checkpoint, rows, fingerprint) plus the attempt that wrote it, the log id, the
  folder's format, partitioning and the commit's mode;
* **where**: at the top of the log file ``_spark_metadata/<id>`` that lists the batch's files
  (:mod:`eosink_files.log`), as an entry Spark's reader drops (a directory entry pointing at
  the log folder, with an extra ``"eosink"`` field Spark's parser ignores), so the files and
  their proof are published by one atomic create-if-absent. A compact carries the
  :data:`KEEP_PROOFS` latest proofs of every writer forward (:func:`latest_proofs`), so the
  evidence survives whatever is deleted before it. A file with proof lines counts only with
  its :func:`closing_line` (a torn write must not prove part of a batch);
* **how it is read**: :func:`eosink_files.log.parse` collects the proof lines of each log
  file; :func:`proof_of` answers the skip rule (``is_committed``, and the commit's race check
  in :mod:`eosink_files.manifest_commit`) from the proofs of the files Spark's reader reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import attrs

from eosink.plugin import BatchContext, Proof

PROOF_PREFIX = '{"eosink":'
#: Proofs kept per writer in a compact (the latest one is the skip evidence; older ones let
#: the core compare a replay's fingerprint with the exact batch's).
KEEP_PROOFS = 10


def proof_line(meta: dict[str, Any], log_uri: str, mtime_ms: int) -> str:
    """A line Spark's reader drops (a directory entry) carrying eosink's ``meta``."""
    body = {
        "path": log_uri,
        "size": 0,
        "isDir": True,
        "modificationTime": mtime_ms,
        "blockReplication": 0,
        "blockSize": 0,
        "action": "add",
    }
    return (
        PROOF_PREFIX
        + json.dumps(meta, separators=(",", ":"))
        + ","
        + json.dumps(body, separators=(",", ":"))[1:]
    )


def closing_line(log_id: int, log_uri: str) -> str:
    """The last line of every log file with proofs: without it the file is torn."""
    return proof_line({"end": log_id}, log_uri, now_ms())


@attrs.frozen
class ProofEntry:
    """The proof of one commit, as stored in a proof line."""

    proof: Proof
    attempt: str
    log_id: int
    format: str
    partition_by: tuple[str, ...]
    mode: str

    def to_line(self, log_uri: str) -> str:
        meta = {
            "proof": self.proof.to_dict(),
            "attempt": self.attempt,
            "logId": self.log_id,
            "format": self.format,
            "partitionBy": list(self.partition_by),
            "mode": self.mode,
        }
        return proof_line(meta, log_uri, int(self.proof.committed_at * 1000))

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> ProofEntry:
        return cls(
            proof=Proof.from_dict(meta["proof"]),
            attempt=str(meta.get("attempt", "")),
            log_id=int(meta.get("logId", -1)),
            format=str(meta.get("format", "")),
            partition_by=tuple(meta.get("partitionBy") or ()),
            mode=str(meta.get("mode", "append")),
        )


def latest_proofs(entries: Iterable[ProofEntry], keep: int = KEEP_PROOFS) -> list[ProofEntry]:
    """The ``keep`` latest proofs of every writer (by batch id), the ones a compact carries."""
    by_writer: dict[str, dict[int, ProofEntry]] = {}
    for e in entries:
        by_writer.setdefault(e.proof.writer_id, {})[e.proof.batch_id] = e
    out = []
    for writer in sorted(by_writer):
        batches = by_writer[writer]
        out.extend(batches[b] for b in sorted(batches)[-keep:])
    return out


def proof_of(entries: list[ProofEntry], ctx: BatchContext) -> ProofEntry | None:
    """The proof the skip rule asks for: exactly this batch if kept, else the writer's latest."""
    mine = [
        e
        for e in entries
        if e.proof.writer_id == ctx.writer_id and e.proof.batch_id >= ctx.batch_id
    ]
    if not mine:
        return None
    exact = [e for e in mine if e.proof.batch_id == ctx.batch_id]
    return exact[0] if exact else max(mine, key=lambda e: e.proof.batch_id)


def now_ms() -> int:
    return int(time.time() * 1000)
