"""The ``iceberg`` sink's operator hooks: its answers to ``eosink status|verify|cleanup``."""

from __future__ import annotations

from typing import Any

from eosink.plugin import ConfigurationError, hookimpl
from eosink.reports import CleanupReport, TargetStatus, Verification


class IcebergOperatorHooks:
    """Operator hooks of the iceberg sink; ``self.options`` are its ``IcebergOptions``."""

    options: Any

    def _existing(self) -> Any:
        from eosink_iceberg.catalog import load

        table = load(self.options)
        if table is None:
            raise ConfigurationError(
                f"sink 'iceberg': table {self.options.table} does not exist in catalog "
                f"{self.options.catalog_name!r}; check the table name and catalog options"
            )
        return table

    @hookimpl
    def target_status(self) -> TargetStatus:
        from eosink_iceberg.proof import all_proofs

        table = self._existing()
        proofs = all_proofs(table)
        head = table.metadata.current_snapshot()
        return TargetStatus(
            target=self.options.table,
            writers=tuple(proofs[w].proof for w in sorted(proofs)),
            details={
                "table_uuid": str(table.metadata.table_uuid),
                "format_version": table.metadata.format_version,
                "snapshots": len(table.metadata.snapshots),
                "current_snapshot": head.snapshot_id if head else None,
                "location": table.metadata.location,
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        """Every data file of the current snapshot exists with its recorded size."""
        from eosink_iceberg.files import size_of

        table = self._existing()
        problems = []
        checked = 0
        for task in table.scan().plan_files():
            checked += 1
            f = task.file
            size = size_of(table.io, f.file_path)
            if size is None:
                problems.append(f"data file {f.file_path} is missing")
            elif size != f.file_size_in_bytes:
                problems.append(
                    f"data file {f.file_path} has {size} bytes, the manifest says "
                    f"{f.file_size_in_bytes}"
                )
        return Verification(self.options.table, checked, tuple(problems))

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        from eosink_iceberg.cleanup import cleanup

        return cleanup(self.options, self._existing(), older_than_s, delete)
