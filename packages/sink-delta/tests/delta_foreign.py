"""What other programs do to a Delta table between any two steps of a generated history
(:mod:`eosink.testing.simulation_foreign`), each by delta-rs, as an operator or another
application would: append rows of their own, compact, checkpoint, vacuum, and clean the log
up past its retention.

Log cleanup judges by the log files' modification times on the real clock: the step ages every
log file past ``delta.logRetentionDuration``'s default of 30 days first (a batch in flight has
then run for a month), so that a checkpoint made now frees every version number below it.
"""

from __future__ import annotations

from collections.abc import Mapping

from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError
from delta_history import age_log

from eosink.testing.simulation import ForeignHand, ForeignOutcome, ForeignStep, HistorySpec

NO_TABLE = ForeignOutcome(skipped="no table yet")


def too_long_a_name(exc: Exception) -> bool:
    """delta-rs failed to create a file whose partition folder's name is longer than the file
    system takes (a float partition value written out digit by digit, e.g. 1e+244): its
    limit, which it reports as a file it cannot open."""
    text = str(exc)
    return "Unable to open file" in text and any(
        len(part) > 255 for part in text.split("Unable to open file", 1)[1].split("/")
    )


def digit_by_digit(exc: Exception) -> bool:
    """delta-rs could not open a file in a partition folder named by a float written out digit
    by digit (``x=-0.00000000000000000000...``), as its own writer names them."""
    text = str(exc)
    return "Unable to open file" in text and "0" * 20 in text.split("Unable to open file", 1)[1]


def delta_foreign_steps(spec: HistorySpec, path: str) -> Mapping[str, ForeignStep]:
    """The foreign steps on the local table at ``path``."""

    def table() -> DeltaTable | None:
        return DeltaTable(path) if DeltaTable.is_deltatable(path) else None

    def append(hand: ForeignHand) -> ForeignOutcome:
        """Another application appends rows with delta-rs' own writer."""
        if table() is None:
            return NO_TABLE
        rows = hand.rows()
        try:
            write_deltalake(path, rows, mode="append", partition_by=list(spec.partition_by) or None)
        except DeltaError as exc:
            if not too_long_a_name(exc):
                raise
            return ForeignOutcome(skipped="delta-rs cannot name the partition's folder")
        return ForeignOutcome(appended=rows)

    def optimize(hand: ForeignHand) -> ForeignOutcome:
        """Compaction: every partition's small files rewritten into one (a commit that removes
        and adds files without changing the data)."""
        t = table()
        if t is None:
            return NO_TABLE
        try:
            t.optimize.compact()
        except DeltaError as exc:
            if not digit_by_digit(exc):
                raise
            # delta-rs cannot read back a file its own append put in a folder it named digit
            # by digit (a tiny float partition value, ``x=-0.0000...``); eosink's folders,
            # named as Delta's writers name them (``x=-1.0E-80``), it reads and compacts
            return ForeignOutcome(skipped="delta-rs cannot open a file of its own append")
        return ForeignOutcome()

    def checkpoint(hand: ForeignHand) -> ForeignOutcome:
        t = table()
        if t is None:
            return NO_TABLE
        t.create_checkpoint()
        return ForeignOutcome()

    def vacuum(hand: ForeignHand) -> ForeignOutcome:
        """Every file the table no longer lists, deleted at once (no retention). Delta tells
        operators never to do this while a write is in flight (its files are not listed yet):
        only between batches."""
        t = table()
        if t is None:
            return NO_TABLE
        if hand.in_flight:
            return ForeignOutcome(skipped="a batch is in flight")
        t.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        return ForeignOutcome()

    def log_cleanup(hand: ForeignHand) -> ForeignOutcome:
        """Another application's commits (two appends of its rows), then its checkpoint and
        the log files past their retention removed: every commit below the checkpoint (a
        batch in flight ran past ``delta.logRetentionDuration``), so that the version numbers
        after a view taken before are free again below the checkpoint."""
        if table() is None:
            return NO_TABLE
        rows = hand.rows()
        partition_by = list(spec.partition_by) or None
        for part in (rows.slice(0, 1), rows.slice(1)):
            write_deltalake(path, part, mode="append", partition_by=partition_by)
        DeltaTable(path).create_checkpoint()
        age_log(path, 31)
        DeltaTable(path).cleanup_metadata()
        return ForeignOutcome(appended=rows)

    return {
        "append": append,
        "optimize": optimize,
        "checkpoint": checkpoint,
        "vacuum": vacuum,
        "log_cleanup": log_cleanup,
    }
