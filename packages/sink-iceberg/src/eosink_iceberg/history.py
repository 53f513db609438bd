"""What a batch's commit does about the table's growing history, within the commit itself.

An Iceberg commit writes new table metadata, which lists every snapshot (and pyiceberg copies
that metadata whole several times per commit), and a manifest list naming every live manifest
(a fast append adds one). Without table maintenance both grow with the stream, and so does each
commit's cost. Two things are cheap enough to do inside a batch's commit, both opt-in:

* ``keep_snapshots`` (a sink option): the commit also removes every snapshot but the newest N
  from the metadata, as ``expire_snapshots`` does. It is safe for exactly-once because the proof
  is a table property, which expiry does not touch. (It deletes no file: the files that only
  expired snapshots listed become orphans for the table's orphan-file removal, or for
  ``eosink cleanup``, which removes eosink's files that no snapshot lists.) Expiring a snapshot
  also drops every branch and tag on it, and the catalog applies the expiry to the table as it
  is then, so a ref another program creates after the sink read the table would go with it:
  the commit carries a requirement, :class:`NoRefOnExpired`, that the catalog checks against
  that table, and a new ref on an expired snapshot makes the commit a conflict, decided again
  on the table loaded anew (which spares the snapshot).
* the table's own ``commit.manifest-merge.enabled`` property (Iceberg's, true by default in
  Java Iceberg's writers, false in pyiceberg's): when it is true the batch is a merge append,
  which folds small manifests into one once ``commit.manifest.min-count-to-merge`` (100) of them
  pile up, keeping the manifest list short at the price of a heavier commit now and then.
"""

from __future__ import annotations

from typing import Any, Literal

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import ValidatableTableRequirement

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


class NoRefOnExpired(ValidatableTableRequirement):
    """No branch or tag may point at a snapshot the commit expires.

    Iceberg's requirements assert refs by name only, so one created under an unknown name
    cannot be asserted with them; pyiceberg's catalogs that check a commit's requirements
    themselves against the table they swap (SQL, Hive, Glue, DynamoDB) check this one as well.
    A REST catalog checks requirements on its server, which knows only the spec's: for it the
    sink does not send this one (see :func:`expire_beyond`)."""

    type: Literal["eosink-no-ref-on-expired"] = "eosink-no-ref-on-expired"
    snapshot_ids: list[int]
    #: refs the commit itself moves (the main branch, to the batch's snapshot): not checked
    moved: list[str] = []

    def validate(self, base_metadata: TableMetadata | None) -> None:
        if base_metadata is None:
            return
        expired = set(self.snapshot_ids)
        for name, ref in base_metadata.refs.items():
            if ref.snapshot_id in expired and name not in self.moved:
                raise CommitFailedException(
                    f"Requirement failed: {ref.snapshot_ref_type} {name} was created on "
                    f"snapshot {ref.snapshot_id}, which this commit expires"
                )


def checks_requirements_itself(catalog: Any) -> bool:
    """Whether the catalog checks a commit's requirements in this process (every pyiceberg
    catalog but REST, whose server checks them)."""
    from pyiceberg.catalog.rest import RestCatalog

    return not isinstance(catalog, RestCatalog)


def expire_beyond(txn: Any, keep: int, guard: bool = True) -> list[int]:
    """Stage, in the batch's transaction, the removal of every snapshot but the newest ``keep``
    (counting the snapshot the transaction adds), with the requirement that no ref is on them
    when the catalog applies it (``guard``: the catalog checks requirements itself). Returns
    the ids removed.

    One ``RemoveSnapshotsUpdate`` staged directly: pyiceberg's ``ExpireSnapshots.by_ids``
    copies the whole table metadata twice per id it checks, which would make the first commit
    after opting in on a long table cost O(snapshots^2)."""
    from pyiceberg.table.update import RemoveSnapshotsUpdate, SetSnapshotRefUpdate

    expired = snapshots_beyond(txn.table_metadata, keep)
    if expired:
        moved = [u.ref_name for u in txn._updates if isinstance(u, SetSnapshotRefUpdate)]
        guards = (NoRefOnExpired(snapshot_ids=expired, moved=moved),) if guard else ()
        txn._apply((RemoveSnapshotsUpdate(snapshot_ids=expired),), guards)
    return expired
