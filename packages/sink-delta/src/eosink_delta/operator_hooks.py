"""The ``delta`` sink's operator hooks: its answers to ``eosink status|verify|cleanup``.

Thin on purpose: the table is read with delta-rs (its txns, its history's commitInfo, where
the eosink proofs are, and its add actions), leftovers are found by :func:`eosink_delta.cleanup`
(delta-rs' full VACUUM and the stale staging folders). ``DeltaSink`` inherits these hooks;
``eosink cleanup delta PATH`` is the package's only cleanup command (store options go with
``-o storage.<key>=VALUE``).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote

from eosink.plugin import ConfigurationError, Proof, hookimpl
from eosink.reports import CleanupReport, TargetStatus, Verification


def _proofs(table: Any) -> dict[str, Proof]:
    """The latest eosink proof of every writer id, from the table's history (newest first)."""
    from eosink_delta.proof import proof_of_commit

    latest: dict[str, Proof] = {}
    for commit in table.history():
        proof = proof_of_commit(commit)
        if proof is not None and proof.writer_id not in latest:
            latest[proof.writer_id] = proof
    return latest


def _adds(table: Any) -> dict[str, list[Any]]:
    """The snapshot's add actions as columns (path, size_bytes, ...)."""
    import pyarrow as pa

    return pa.table(table.get_add_actions(flatten=True)).to_pydict()


def _local(uri: str) -> str | None:
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return None if "://" in uri else uri


class DeltaOperatorHooks:
    """Operator hooks of the delta sink; ``self.options`` are the sink's ``DeltaOptions``."""

    options: Any

    def _table(self) -> Any:
        from eosink_delta.snapshot import open_table

        table = open_table(self.options.path, self.options.storage_options)
        if table is None:
            raise ConfigurationError(f"{self.options.path} is not a Delta table; check the path")
        return table

    @hookimpl
    def target_status(self) -> TargetStatus:
        table = self._table()
        proofs = _proofs(table)
        actions = _adds(table)
        return TargetStatus(
            target=self.options.path,
            writers=tuple(proofs[w] for w in sorted(proofs)),
            details={
                "table_version": table.version(),
                "txns": {w: table.transaction_version(w) for w in sorted(proofs)},
                "files": len(actions.get("path", [])),
                "bytes": sum(actions.get("size_bytes", [])),
                "partition_columns": list(table.metadata().partition_columns),
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        table = self._table()
        problems = []
        proofs = _proofs(table)
        for writer, proof in sorted(proofs.items()):
            txn = table.transaction_version(writer)
            if txn != proof.batch_id:
                problems.append(
                    f"writer {writer!r}: txn version {txn} but the log's latest proof is batch "
                    f"{proof.batch_id}"
                )
        actions = _adds(table)
        root = table.table_uri.rstrip("/")
        for path, size in zip(actions.get("path", []), actions.get("size_bytes", [])):
            local = _local(f"{root}/{unquote(path)}")
            if local is None:
                continue  # object stores: delta-rs read the log; sizes are checked on read
            if not os.path.exists(local):
                problems.append(f"missing: {path} (the log adds it with {size} bytes)")
            elif os.path.getsize(local) != size:
                problems.append(f"size differs: {path} is {os.path.getsize(local)}, log {size}")
        return Verification(
            self.options.path, len(proofs) + len(actions.get("path", [])), tuple(problems)
        )

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        from eosink_delta.cleanup import cleanup

        self._table()  # a clear error when the path holds no table
        return cleanup(
            self.options.path,
            older_than_s=older_than_s,
            dry_run=not delete,
            storage_options=self.options.storage_options,
        )
