"""The ``yt-static`` sink's operator hooks: its answers to ``eosink status|verify|cleanup``.

The proofs are the table's proof attribute (one per writer id, set inside each batch's MainTx,
:mod:`eosink_yt_static.proof`); the state store (:mod:`eosink_yt_static.state_store`, one
document per (table, writer id)) names each writer's MainTx. A MainTx that is still alive holds
a batch that has not committed, with its SubTxs and PartTxs nested in it: everything it staged
vanishes when it is aborted (or expires), which is what cleanup does to the old ones.
``YtStaticSink`` inherits these hooks.
"""

from __future__ import annotations

from typing import Any

from eosink.plugin import Proof, clock, hookimpl
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification


def _alive(client: Any, tx: str | None) -> bool:
    """Whether a transaction exists, without pinging it (a status must not extend its life)."""
    return bool(tx) and bool(client.exists(f"//sys/transactions/{tx}"))


def _writer_of(client: Any, tx: str) -> str | None:
    """The writer id a MainTx was started for (its ``eosink_writer`` attribute)."""
    try:
        return str(client.get(f"#{tx}/@eosink_writer"))
    except Exception:  # noqa: BLE001 - ended meanwhile, or started without the attribute
        return None


class YtStaticOperatorHooks:
    """Operator hooks of the yt-static sink (``self.options``: ``YtStaticOptions``)."""

    options: Any
    client: Any  # the sink's method: a YT client for its options

    def _target(self, client: Any) -> dict[str, Any] | None:
        from eosink_yt_static import target

        return target.attributes(client, self.options.path)

    @staticmethod
    def _proofs(attributes: dict[str, Any] | None) -> dict[str, Proof | None]:
        from eosink_yt_static.proof import PROOFS_ATTR, read_proof

        raw = (attributes or {}).get(PROOFS_ATTR) or {}
        proofs: dict[str, Proof | None] = {}
        for writer in sorted(raw):
            try:
                proofs[writer] = read_proof(raw, writer)
            except (ValueError, TypeError, KeyError):
                proofs[writer] = None
        return proofs

    def _main_txs(self, client: Any, writers: list[str]) -> list[dict[str, Any]]:
        """The state store's documents of this table: writer, MainTx, batch, start, alive.

        A document is named after its writer id escaped (``tx.node_key``); the writer id is
        read back from the proofs or from the MainTx's ``eosink_writer`` attribute.
        """
        from eosink_yt_static import tx as txs

        folder = f"{self.options.state_dir}/{txs.node_key(self.options.path)}"
        by_key = {txs.node_key(w): w for w in writers}
        found = []
        with txs.in_tx(client, None):
            if not client.exists(folder):
                return []
            for name in client.list(folder):
                doc = client.get(f"{folder}/{name}")
                if not isinstance(doc, dict):
                    continue
                main_tx = doc.get("main_tx")
                alive = _alive(client, main_tx)
                writer = by_key.get(str(name))
                if alive and writer is None:
                    writer = _writer_of(client, main_tx)
                found.append(
                    {
                        "writer_id": writer,
                        "document": f"{folder}/{name}",
                        "main_tx": main_tx,
                        "batch_id": doc.get("batch_id"),
                        "started_at": doc.get("started_at"),
                        "committed_batch": doc.get("committed_batch"),
                        "alive": alive,
                        "nested": len(txs.nested(client, main_tx)) if alive else 0,
                    }
                )
        return found

    @hookimpl
    def target_status(self) -> TargetStatus:
        client = self.client()
        attributes = self._target(client)
        proofs = self._proofs(attributes)
        open_txs = [
            {k: t[k] for k in ("writer_id", "main_tx", "batch_id", "started_at", "nested")}
            for t in self._main_txs(client, list(proofs))
            if t["alive"]
        ]
        return TargetStatus(
            target=self.options.path,
            writers=tuple(p for p in proofs.values() if p is not None),
            details={
                "table": "missing" if attributes is None else attributes.get("type"),
                "row_count": (attributes or {}).get("row_count"),
                "state_store": self.options.state_dir,
                "open_transactions": open_txs,
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        client = self.client()
        attributes = self._target(client)
        proofs = self._proofs(attributes)
        problems = []
        if attributes is None:
            pass  # no table, so no proofs: nothing was committed here
        elif attributes.get("type") != "table" or attributes.get("dynamic"):
            problems.append(f"{self.options.path} is not a static table")
        else:  # append mode: a batch's rows stay, so the table holds at least a proof's rows
            rows = int(attributes.get("row_count") or 0)
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
        now = clock.now()  # the clock started_at was taken by (state_store.py)
        removable, kept = [], []
        for t in self._main_txs(client, list(self._proofs(self._target(client)))):
            if not t["alive"]:
                continue
            age = now - float(t["started_at"]) if t.get("started_at") else None
            item = Leftover(
                f"{t['main_tx']} (writer {t['writer_id']}, batch {t['batch_id']}, "
                f"{t['nested']} nested)",
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
