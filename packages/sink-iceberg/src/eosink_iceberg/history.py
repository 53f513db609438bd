"""What a batch's commit does about the table's growing history, within the commit itself.

An Iceberg commit writes new table metadata, which lists every snapshot (and pyiceberg copies
that metadata whole several times per commit), and a manifest list naming every live manifest
(a fast append adds one). Without table maintenance both grow with the stream, and so does each
commit's cost. Two things are cheap enough to do inside a batch's commit, both opt-in:

* ``keep_snapshots`` (a sink option): the commit also removes every snapshot but the newest N
  from the metadata, as ``expire_snapshots`` does. It is safe for exactly-once because the proof
  is a table property, which expiry does not touch. (It deletes no file: the files that only
  expired snapshots listed become orphans for the table's orphan-file removal, or for
  ``eosink cleanup``, which removes eosink's files that no snapshot lists.)
* the table's own ``commit.manifest-merge.enabled`` property (Iceberg's, true by default in
  Java Iceberg's writers, false in pyiceberg's): when it is true the batch is a merge append,
  which folds small manifests into one once ``commit.manifest.min-count-to-merge`` (100) of them
  pile up, keeping the manifest list short at the price of a heavier commit now and then.
"""

from __future__ import annotations

from typing import Any

#: Iceberg's table property, and its default in pyiceberg.
MANIFEST_MERGE = "commit.manifest-merge.enabled"


def merges_manifests(table: Any) -> bool:
    """Whether the table asks appends to merge manifests (``commit.manifest-merge.enabled``)."""
    return str(table.metadata.properties.get(MANIFEST_MERGE, "false")).strip().lower() == "true"


def snapshots_beyond(metadata: Any, keep: int) -> list[int]:
    """The ids of every snapshot but the newest ``keep`` (by sequence number, then time), less
    the heads of branches and tags, which always stay."""
    protected = {ref.snapshot_id for ref in metadata.refs.values()}
    ordered = sorted(
        metadata.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms), reverse=True
    )
    return [s.snapshot_id for s in ordered[keep:] if s.snapshot_id not in protected]


def expire_beyond(txn: Any, keep: int) -> list[int]:
    """Stage, in the batch's transaction, the removal of every snapshot but the newest ``keep``
    (counting the snapshot the transaction adds). Returns the ids removed.

    One ``RemoveSnapshotsUpdate`` staged directly: pyiceberg's ``ExpireSnapshots.by_ids``
    copies the whole table metadata twice per id it checks, which would make the first commit
    after opting in on a long table cost O(snapshots^2)."""
    from pyiceberg.table.update import RemoveSnapshotsUpdate

    expired = snapshots_beyond(txn.table_metadata, keep)
    if expired:
        txn._apply((RemoveSnapshotsUpdate(snapshot_ids=expired),), ())
    return expired
