"""The ``yt-dynamic`` sink's answers to ``eosink status|verify|cleanup`` (the operator hooks).

The proofs are the rows of the progress table (one per writer id); the key registrations of
the duplicate check (``<path>_eosink_keys``) are the only thing failed attempts leave behind:
the rows an attempt upserted are data by design (a replay overwrites them with the same
values). ``YtDynamicSink`` inherits these hooks.
"""

from __future__ import annotations

from typing import Any

from eosink import Proof, hookimpl
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification


class YtDynamicCommands:
    """Operator hooks of the yt-dynamic sink (``self.options``: ``YtDynamicOptions``)."""

    options: Any
    client: Any  # the sink's method: a YT client for its options

    def _proofs(self, client: Any) -> dict[str, Proof]:
        from eosink_yt_dynamic.sink import read_table

        table = self.options.progress_table
        if not client.exists(table):
            return {}
        return {r["writer_id"]: Proof.from_json(r["proof"]) for r in read_table(client, table)}

    def _key_registrations(self, client: Any) -> list[dict[str, Any]]:
        table = self.options.keys_table
        if not client.exists(table):
            return []
        return list(
            client.select_rows(f"writer_id, batch_id, attempt, partition_id, chunk from [{table}]")
        )

    def _table_attributes(self, client: Any) -> dict[str, Any] | None:
        path = self.options.path
        if not client.exists(path):
            return None
        node = client.get(path, attributes=["type", "dynamic", "tablet_state"])
        return dict(getattr(node, "attributes", {}) or {})

    @hookimpl
    def target_status(self) -> TargetStatus:
        client = self.client()
        proofs = self._proofs(client)
        table = self._table_attributes(client) or {}
        return TargetStatus(
            target=self.options.path,
            writers=tuple(proofs[w] for w in sorted(proofs)),
            details={
                "tablet_state": table.get("tablet_state"),
                "progress_table": self.options.progress_table,
                "key_registrations": len(self._key_registrations(client)),
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        client = self.client()
        problems = []
        table = self._table_attributes(client)
        proofs = self._proofs(client)
        if table is None:
            if proofs:
                problems.append(f"{self.options.path} is missing, but proofs of it exist")
        elif not table.get("dynamic"):
            problems.append(f"{self.options.path} is not a dynamic table")
        elif table.get("tablet_state") != "mounted":
            problems.append(f"{self.options.path} is {table.get('tablet_state')}, not mounted")
        for writer, proof in proofs.items():
            if proof.writer_id != writer:
                problems.append(
                    f"progress row of {writer!r} holds the proof of {proof.writer_id!r}"
                )
        return Verification(self.options.path, 1 + len(proofs), tuple(problems))

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        """Key registrations of batches at or below their writer's committed one.

        Registrations carry no time: those of uncommitted batches may belong to a live
        attempt and are kept whatever their age.
        """
        client = self.client()
        proofs = self._proofs(client)
        removable, kept, keys = [], [], []
        for row in self._key_registrations(client):
            proof = proofs.get(row["writer_id"])
            name = (
                f"{self.options.keys_table}: writer {row['writer_id']} batch {row['batch_id']} "
                f"attempt {row['attempt']} partition {row['partition_id']} chunk {row['chunk']}"
            )
            if proof is not None and row["batch_id"] <= proof.batch_id:
                removable.append(Leftover(name, "key registration"))
                keys.append(row)
            else:
                kept.append(Leftover(name, "key registration"))
        if delete and keys:
            client.delete_rows(self.options.keys_table, keys)
        return CleanupReport(self.options.path, tuple(removable), tuple(kept), delete)
