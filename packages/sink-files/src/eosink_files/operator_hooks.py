"""The ``files`` sink's operator hooks: its answers to ``eosink status|verify|cleanup``.

Thin on purpose: the log is read with :func:`eosink_files.read_log` (as Spark's reader reads
it), leftovers are found by :func:`eosink_files.cleanup`. ``FilesSink`` inherits these hooks;
``eosink cleanup files PATH`` is the package's only cleanup command (sink options such as
``compact_interval`` and ``storage.<key>`` go with ``-o KEY=VALUE``).
"""

from __future__ import annotations

from typing import Any

from eosink.plugin import hookimpl
from eosink.reports import CleanupReport, TargetStatus, Verification


class FilesOperatorHooks:
    """Operator hooks of the files sink; ``self.options`` are the sink's ``FilesOptions``."""

    options: Any

    def _log_state(self) -> Any:
        from eosink_files.reader import read_log

        o = self.options
        return read_log(o.path, o.compact_interval, o.storage_options)

    def _store(self) -> Any:
        from eosink_files.store import open_store

        return open_store(self.options.path, storage_options=self.options.storage_options)

    @hookimpl
    def target_status(self) -> TargetStatus:
        from eosink_files.log import LOG_DIR, log_name
        from eosink_files.log_view import LogFolder

        state = self._log_state()
        latest: dict[str, Any] = {}
        for entry in state.proofs:
            known = latest.get(entry.proof.writer_id)
            if known is None or entry.proof.batch_id > known.batch_id:
                latest[entry.proof.writer_id] = entry.proof
        store = self._store()
        listing = LogFolder(store, self.options.compact_interval).listing()
        compacts = [log_id for log_id, compact in listing.items() if compact]
        return TargetStatus(
            target=self.options.path,
            writers=tuple(latest[w] for w in sorted(latest)),
            details={
                "manifest_latest_entry": state.latest_entry,
                "manifest_last_compaction": max(compacts) if compacts else None,
                "manifest_files": len(listing),
                "manifest_bytes": sum(
                    store.stat(f"{LOG_DIR}/{log_name(i, c)}")[0] for i, c in listing.items()
                ),
                "committed_files": len(state.files),
                "committed_bytes": sum(f.size for f in state.files),
                "format": state.format,
                "partition_by": list(state.partition_by),
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        state = self._log_state()
        store = self._store()
        problems = []
        for f in state.files:
            try:
                size, _ = store.stat(f.relpath)
            except FileNotFoundError:
                problems.append(f"missing: {f.relpath} (listed with {f.size} bytes)")
                continue
            if size != f.size:
                problems.append(f"size differs: {f.relpath} is {size} bytes, listed {f.size}")
        return Verification(self.options.path, len(state.files), tuple(problems))

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        from eosink_files.cleanup import cleanup

        o = self.options
        return cleanup(
            o.path,
            older_than_s=older_than_s,
            dry_run=not delete,
            compact_interval=o.compact_interval,
            storage_options=o.storage_options,
        )
