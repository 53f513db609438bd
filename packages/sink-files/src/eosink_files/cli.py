"""The ``files`` sink's answers to ``eosink status|verify|cleanup`` (the operator hooks).

Thin on purpose: the log is read with :func:`eosink_files.read_log` (as Spark's reader reads
it), leftovers are found by :func:`eosink_files.cleanup`. ``FilesSink`` inherits these hooks.
"""

from __future__ import annotations

import time
from typing import Any

from eosink import hookimpl
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification


class FilesCommands:
    """Operator hooks of the files sink; ``self.options`` are the sink's ``FilesOptions``."""

    options: Any

    def _log_state(self) -> Any:
        from eosink_files.reader import read_log

        return read_log(self.options.path, self.options.compact_interval)

    @hookimpl
    def target_status(self) -> TargetStatus:
        from eosink_files.log import LOG_DIR, log_files
        from eosink_files.reader import _store

        state = self._log_state()
        latest: dict[str, Any] = {}
        for entry in state.proofs:
            known = latest.get(entry.proof.writer_id)
            if known is None or entry.proof.batch_id > known.proof.batch_id:
                latest[entry.proof.writer_id] = entry
        store = _store(self.options.path)
        names = [n for n, is_dir in store.listdir(LOG_DIR) if not is_dir and log_files([n])]
        entries = log_files(names)
        compacts = [i for i, compact in entries.items() if compact]
        return TargetStatus(
            target=self.options.path,
            writers=tuple(latest[w].proof for w in sorted(latest)),
            details={
                "manifest_latest_entry": state.latest_entry,
                "manifest_last_compaction": max(compacts) if compacts else None,
                "manifest_files": len(names),
                "manifest_bytes": sum(store.stat(f"{LOG_DIR}/{n}")[0] for n in names),
                "committed_files": len(state.files),
                "committed_bytes": sum(f.size for f in state.files),
                "format": state.format,
                "partition_by": list(state.partition_by),
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        from eosink_files.reader import _store

        state = self._log_state()
        store = _store(self.options.path)
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
        from eosink_files.reader import _store

        store = _store(self.options.path)
        now_ms = time.time() * 1000

        def leftover(relpath: str, kind: str) -> Leftover:
            try:
                size, mtime = store.stat(relpath)
            except FileNotFoundError:  # deleted by this cleanup: size and age unknown
                return Leftover(relpath, kind)
            return Leftover(relpath, kind, size, (now_ms - mtime) / 1000)

        report = cleanup(
            self.options.path,
            older_than_s=older_than_s,
            dry_run=not delete,
            compact_interval=self.options.compact_interval,
        )
        removable = tuple(leftover(p, "orphan file") for p in report.orphans)  # gone if deleted
        return CleanupReport(
            target=self.options.path,
            removable=removable,
            kept=(
                *(leftover(p, "recent unlisted file") for p in report.young),
                *(leftover(p, "foreign file (never removed)") for p in report.foreign),
            ),
            deleted=report.deleted,
        )
