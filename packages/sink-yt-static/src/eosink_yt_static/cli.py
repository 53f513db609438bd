"""The ``yt-static`` sink's answers to ``eosink status|verify|cleanup`` (the operator hooks).

The proofs are the table's proof attribute (one per writer id, set inside each batch's MainTx);
the state store (``<path>_eosink_state``, a document per writer) names each writer's MainTx.
A MainTx that is still alive holds a batch that has not committed: everything it staged
vanishes when it is aborted (or expires), which is what cleanup does to the old ones.
``YtStaticSink`` inherits these hooks.
"""

from __future__ import annotations

import time
from typing import Any

from eosink import hookimpl
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification


def _alive(client: Any, tx: str | None) -> bool:
    """Whether a transaction exists, without pinging it (a status must not extend its life)."""
    return bool(tx) and client.exists(f"//sys/transactions/{tx}")


class YtStaticCommands:
    """Operator hooks of the yt-static sink (``self.options``: ``YtStaticOptions``)."""

    options: Any
    client: Any  # the sink's methods and properties
    state_dir: Any
    committed_proof: Any
    target_attrs: Any

    def _proofs(self, client: Any) -> dict[str, Any]:
        from eosink_yt_static.sink import PROOFS_ATTR, _read_proof

        raw = (self.target_attrs(client) or {}).get(PROOFS_ATTR) or {}
        return {w: _read_proof(raw, w) for w in sorted(raw)}

    def _main_txs(self, client: Any) -> list[dict[str, Any]]:
        """The state store's documents: writer, MainTx, batch, start time, alive or not."""
        from eosink_yt_static import tx as txs

        if not client.exists(self.state_dir):
            return []
        found = []
        with txs.in_tx(client, None):
            for name in client.list(self.state_dir):
                doc = client.get(f"{self.state_dir}/{name}")
                if isinstance(doc, dict) and doc.get("main_tx"):
                    found.append(
                        {
                            "document": str(name),
                            "main_tx": str(doc["main_tx"]),
                            "batch_id": doc.get("batch_id"),
                            "started_at": doc.get("started_at"),
                            "alive": _alive(client, str(doc["main_tx"])),
                        }
                    )
        return found

    @hookimpl
    def target_status(self) -> TargetStatus:
        client = self.client()
        attrs_ = self.target_attrs(client)
        proofs = self._proofs(client)
        return TargetStatus(
            target=self.options.path,
            writers=tuple(p for p in proofs.values() if p is not None),
            details={
                "table": "missing" if attrs_ is None else attrs_.get("type"),
                "state_store": self.state_dir,
                "open_transactions": [t for t in self._main_txs(client) if t["alive"]],
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        client = self.client()
        attrs_ = self.target_attrs(client)
        problems = []
        proofs = self._proofs(client)
        if attrs_ is None:
            if proofs:
                problems.append(f"{self.options.path} is missing")
        elif attrs_.get("type") != "table" or attrs_.get("dynamic"):
            problems.append(f"{self.options.path} is not a static table")
        else:
            rows = client.get(f"{self.options.path}/@row_count")
            for writer, proof in proofs.items():
                if proof is None or proof.writer_id != writer:
                    problems.append(f"the proof of writer {writer!r} does not parse as its own")
                elif (
                    proof.rows is not None
                    and proof.rows > rows
                    and self.options.cleanup == "disabled"
                ):
                    problems.append(
                        f"writer {writer!r}: batch {proof.batch_id} committed {proof.rows} rows, "
                        f"the table holds {rows}"
                    )
        return Verification(self.options.path, 1 + len(proofs), tuple(problems))

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        """Abort MainTxs of uncommitted batches that started more than ``older_than_s`` ago."""
        from eosink_yt_static import tx as txs

        client = self.client()
        now = time.time()
        removable, kept = [], []
        for t in self._main_txs(client):
            if not t["alive"]:
                continue
            age = now - float(t["started_at"]) if t.get("started_at") else None
            item = Leftover(
                f"{t['main_tx']} (writer document {t['document']}, batch {t['batch_id']})",
                "transaction",
                None,
                age,
            )
            if age is not None and age >= older_than_s:
                removable.append(item)
                if delete:
                    txs.abort(client, t["main_tx"])
            else:
                kept.append(item)
        return CleanupReport(self.options.path, tuple(removable), tuple(kept), delete)
