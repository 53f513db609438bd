"""The example sink's answers to ``eosink status`` and ``eosink verify``.

A third-party sink implements only the operator hooks it can answer well: this one has no
``cleanup_target`` (its staged rows carry no time, so it could not tell a live attempt's rows
from a dead one's), and ``eosink cleanup sqlite ...`` says so.
"""

from __future__ import annotations

from typing import Any

from eosink.plugin import Proof, hookimpl
from eosink.reports import TargetStatus, Verification


class SqliteCommands:
    """``status`` and ``verify`` for ``SqliteSink`` (which provides ``connect`` and ``options``)."""

    options: Any
    connect: Any

    def _proofs(self, conn: Any) -> list[Proof]:
        from eosink_sqlite.sink import PROOFS

        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (PROOFS,)
        ).fetchone():
            return []
        return [Proof.from_json(r[0]) for r in conn.execute(f"SELECT proof FROM {PROOFS}")]

    @hookimpl
    def target_status(self) -> TargetStatus:
        with self.connect() as conn:
            proofs = self._proofs(conn)
        latest: dict[str, Proof] = {}
        for proof in proofs:
            if proof.writer_id not in latest or proof.batch_id > latest[proof.writer_id].batch_id:
                latest[proof.writer_id] = proof
        return TargetStatus(
            target=self.options.path,
            writers=tuple(latest[w] for w in sorted(latest)),
            details={"table": self.options.table, "batches": len(proofs)},
        )

    @hookimpl
    def verify_target(self) -> Verification:
        """The table holds as many rows as the proofs of all batches say (append mode)."""
        with self.connect() as conn:
            proofs = self._proofs(conn)
            try:
                (rows,) = conn.execute(f'SELECT count(*) FROM "{self.options.table}"').fetchone()
            except Exception:  # noqa: BLE001 - no table yet
                rows = 0
        expected = sum(p.rows or 0 for p in proofs)
        problems = (
            () if rows == expected else (f"the proofs count {expected} rows, the table {rows}",)
        )
        return Verification(self.options.path, len(proofs), problems)
