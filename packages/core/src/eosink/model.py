"""The messages that travel between the phases of a batch.

Everything here is small, immutable and picklable: a ``BatchContext`` is shipped to every
executor task, a ``Proof`` is stored by the sink next to the data, a ``PartitionResult`` comes
back from every task to the driver. Nothing here grows with the number of rows.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import attrs

BatchKind = Literal["stream", "batch"]
OutputMode = Literal["append", "complete"]


@attrs.frozen
class BatchContext:
    """Who writes which batch, and how.

    ``batch_id`` is Spark's micro-batch id for streams and the caller's version for batch
    jobs (as Delta's ``txnVersion`` in its idempotent writes across jobs); either way the skip
    rule is the same:
    ``batch_id <= last committed batch of writer_id`` means "already done".
    """

    sink: str
    writer_id: str
    batch_id: int
    kind: BatchKind = "stream"
    mode: OutputMode = "append"
    query_id: str | None = None
    checkpoint: str | None = None

    @property
    def label(self) -> str:
        """A short human-readable name of the batch, for errors and logs."""
        return f"{self.sink}:{self.writer_id}#{self.batch_id}"


@attrs.frozen
class Fingerprint:
    """Row count plus an order-independent digest of a batch's rows.

    Partition fingerprints combine by addition, so the fingerprint of a batch does not depend
    on how Spark split it into partitions or ordered the rows.
    """

    rows: int = 0
    digest: int = 0

    MODULUS = 1 << 64

    def combine(self, other: Fingerprint) -> Fingerprint:
        return Fingerprint(self.rows + other.rows, (self.digest + other.digest) % self.MODULUS)

    def hex(self) -> str:
        return f"{self.rows}:{self.digest:016x}"

    @classmethod
    def from_hex(cls, text: str) -> Fingerprint:
        rows, digest = text.split(":")
        return cls(int(rows), int(digest, 16))


@attrs.frozen
class Proof:
    """The evidence that a batch of a writer was committed, stored by the sink with the data.

    A sink stores it in the same atomic step as the data (invariant 1) and hands it back from
    ``is_committed``. ``to_json``/``from_json`` give every sink the same serialized form.
    """

    writer_id: str
    batch_id: int
    query_id: str | None = None
    checkpoint: str | None = None
    rows: int | None = None
    fingerprint: str | None = None
    committed_at: float = attrs.field(factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Proof:
        known = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Proof:
        return cls.from_dict(json.loads(text))


@attrs.frozen
class PartitionResult:
    """What one executor task returns to the driver: the sink's message plus the core's counts.

    ``attempt`` is the task attempt's id, unique among all attempts of the application (Spark's
    ``taskAttemptId``), not Spark's ``attemptNumber``, which restarts at 0 in a resubmitted stage.
    """

    partition_id: int
    attempt: int
    rows: int
    fingerprint: Fingerprint | None
    message: Any
    state: Any = None


@attrs.frozen
class Staged:
    """What ``write_dataframe`` staged for the whole batch: one commit message.

    The core hands ``message`` to ``commit`` as the batch's only message. The proof's row count
    is the one the core observed while :func:`eosink.spark.stage_dataframe` wrote the batch;
    ``rows``, if the sink gives it, is checked against that count.
    """

    message: Any
    rows: int | None = None


@attrs.frozen
class BatchOutcome:
    """The result of running one batch into one sink, as the driver saw it."""

    ctx: BatchContext
    status: Literal["committed", "skipped"]
    rows: int = 0
    partitions: int = 0
    duration_s: float = 0.0
    reason: str | None = None
