"""The ``yt-dynamic`` sink's operator hooks: its answers to ``eosink status|verify|cleanup``.

The proofs are rows of the progress table (:mod:`eosink_yt_dynamic.proof`), one per (output
table, its node id, writer id); rows of an earlier table at the same path (another node id)
are stale. The sink opens no master transactions (only short tablet transactions), so there
is nothing open to show. What failed attempts leave behind are key registrations of the
duplicate check (:mod:`eosink_yt_dynamic.registrations`) and stale proof rows: the rows an
attempt upserted are data by design (a replay overwrites them with the same values).
``YtDynamicSink`` inherits these hooks.
"""

from __future__ import annotations

from typing import Any

from eosink.plugin import Proof, hookimpl
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification


class YtDynamicOperatorHooks:
    """Operator hooks of the yt-dynamic sink (``self.options``: ``YtDynamicOptions``)."""

    options: Any
    client: Any  # the sink's method: a YT client for its options

    def _progress_rows(self, client: Any) -> list[dict[str, Any]]:
        """Every proof row of this output (any node id), lock rows left out."""
        from eosink_yt_dynamic.proof import LOCK_ROW, ProgressTable
        from eosink_yt_dynamic.tables import ql_string

        progress = ProgressTable(self.options.progress_table, self.options.path)
        if not progress.exists(client):
            return []
        rows = client.select_rows(
            f"output, output_id, writer_id, batch_id, proof, sources from [{progress.path}] "
            f"where output = {ql_string(progress.output)}"
        )
        return [r for r in rows if r["writer_id"] != LOCK_ROW]

    def _proofs(self, rows: list[dict[str, Any]], output_id: str | None) -> dict[str, Proof]:
        return {
            r["writer_id"]: Proof.from_json(r["proof"]) for r in rows if r["output_id"] == output_id
        }

    def _key_registrations(self, client: Any, output_ids: set[str | None]) -> list[dict[str, Any]]:
        """The registrations of these tables (a keys table may be shared through keys_path)."""
        from eosink_yt_dynamic.registrations import KEYS_SCHEMA
        from eosink_yt_dynamic.tables import ensure_aux_table

        table = self.options.keys_table
        if not ensure_aux_table(client, table, KEYS_SCHEMA, create=False):
            return []
        rows = client.select_rows(f"output_id, writer_id, batch_id, attempt, slot from [{table}]")
        return [r for r in rows if r["output_id"] in output_ids]

    def _table_attributes(self, client: Any) -> dict[str, Any] | None:
        path = self.options.path
        if not client.exists(path):
            return None
        node = client.get(path, attributes=["type", "dynamic", "tablet_state", "id"])
        return dict(getattr(node, "attributes", {}) or {})

    @hookimpl
    def target_status(self) -> TargetStatus:
        from eosink_yt_dynamic.sources import decode_spans

        client = self.client()
        table = self._table_attributes(client) or {}
        output_id = table.get("id")
        rows = self._progress_rows(client)
        proofs = self._proofs(rows, output_id)
        sources = {}  # per writer: the source tablets it covered, and the rows between
        for r in rows:
            if r["output_id"] == output_id:
                spans = decode_spans(r["sources"]).values()
                sources[r["writer_id"]] = {
                    "tablets": len(spans),
                    "rows": sum(hi - lo + 1 for lo, hi in spans),
                }
        return TargetStatus(
            target=self.options.path,
            writers=tuple(proofs[w] for w in sorted(proofs)),
            details={
                "table_id": output_id,
                "tablet_state": table.get("tablet_state"),
                "progress_table": self.options.progress_table,
                "sources_covered": sources,
                "stale_proof_rows": sum(r["output_id"] != output_id for r in rows),
                "key_registrations": len(
                    self._key_registrations(client, {output_id} | {r["output_id"] for r in rows})
                ),
                "open_transactions": [],  # tablet transactions only: none outlives a request
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        client = self.client()
        problems = []
        table = self._table_attributes(client)
        output_id = (table or {}).get("id")
        rows = self._progress_rows(client)
        if table is None:
            if rows:
                problems.append(f"{self.options.path} is missing, but proofs of it exist")
        elif not table.get("dynamic"):
            problems.append(f"{self.options.path} is not a dynamic table")
        elif table.get("tablet_state") != "mounted":
            problems.append(f"{self.options.path} is {table.get('tablet_state')}, not mounted")
        checked = 1
        for row in rows:
            if row["output_id"] != output_id:
                continue
            checked += 1
            proof = Proof.from_json(row["proof"])
            if proof.writer_id != row["writer_id"] or proof.batch_id != row["batch_id"]:
                problems.append(
                    f"progress row of writer {row['writer_id']!r} batch {row['batch_id']} holds "
                    f"the proof of writer {proof.writer_id!r} batch {proof.batch_id}"
                )
        return Verification(self.options.path, checked, tuple(problems))

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        """Key registrations of batches at or below their writer's committed one, and those
        and the proof rows of earlier tables at the path.

        Registrations carry no time: those of uncommitted batches may belong to a live
        attempt and are kept whatever their age. Those of other outputs (a keys table shared
        through ``keys_path``) are left alone.
        """
        client = self.client()
        output_id = (self._table_attributes(client) or {}).get("id")
        rows = self._progress_rows(client)
        proofs = self._proofs(rows, output_id)
        removable, kept, keys = [], [], []
        for row in self._key_registrations(client, {output_id} | {r["output_id"] for r in rows}):
            proof = proofs.get(row["writer_id"])
            name = (
                f"{self.options.keys_table}: table {row['output_id']} writer {row['writer_id']} "
                f"batch {row['batch_id']} attempt {row['attempt']} slot {row['slot']}"
            )
            stale = row["output_id"] != output_id
            if stale or (proof is not None and row["batch_id"] <= proof.batch_id):
                removable.append(Leftover(name, "key registration"))
                keys.append(row)
            else:
                kept.append(Leftover(name, "key registration"))
        stale_proofs = [
            {k: r[k] for k in ("output", "output_id", "writer_id")}
            for r in rows
            if r["output_id"] != output_id
        ]
        removable += [
            Leftover(
                f"{self.options.progress_table}: table {r['output_id']} writer {r['writer_id']}",
                "stale proof row",
            )
            for r in stale_proofs
        ]
        if delete and keys:
            client.delete_rows(self.options.keys_table, keys)
        if delete and stale_proofs:
            client.delete_rows(self.options.progress_table, stale_proofs)
        return CleanupReport(self.options.path, tuple(removable), tuple(kept), delete)
