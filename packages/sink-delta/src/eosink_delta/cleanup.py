"""Cleanup: remove what failed attempts left in a table folder, with a dry run first.

Attempts that fail leave files no commit lists: Parquet files of a killed executor or driver
(invisible to readers, but taking space) and, for Spark's file writer, the staging folder of a
driver killed mid-write. ``cleanup`` removes both once they are older than ``older_than_s``:

* orphan data files through Delta's own VACUUM in its *full* mode (the default, *lite* mode
  only removes files that a commit removed, never files no commit added), which also removes
  files that commits removed (complete mode) longer ago than the same threshold;
* staging folders (``_eosink_staging/<attempt>``), which VACUUM skips like every ``_`` folder.

A live batch's files are not in the log yet either: set the threshold above your longest batch.
``vacuum`` is the same under Delta's name and unit (hours).

From the command line, through the sink's operator hooks
(:class:`eosink_delta.operator_hooks.DeltaOperatorHooks`)::

    eosink cleanup delta /data/orders --older-than 24h            # dry run
    eosink cleanup delta /data/orders --older-than 24h --delete
"""

from __future__ import annotations

import math
from typing import Any

from eosink.logs import get_logger
from eosink.reports import CleanupReport, Leftover
from eosink_delta.spark_file_writer import remove_stale_staging
from eosink_delta.store import delta_options, is_local

log = get_logger("eosink.delta")

DEFAULT_OLDER_THAN_S = 24 * 3600.0


#: The kinds of leftovers in the report (:class:`eosink.reports.Leftover`).
ORPHAN = "orphan file"  # a data file, relative to the table, that no live commit lists
STAGING = "staging folder"  # of a killed attempt


def cleanup(
    path: str,
    *,
    older_than_s: float = DEFAULT_OLDER_THAN_S,
    dry_run: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> CleanupReport:
    """Find (and unless ``dry_run``, delete) what failed attempts left in the table at ``path``.

    ``storage_options``: delta-rs' options of the table's object store, as the sink takes them.
    ``report.paths(ORPHAN)`` and ``report.paths(STAGING)`` give what was found.
    """
    from deltalake import DeltaTable

    if older_than_s < 0:
        raise ValueError("older_than_s must be >= 0")
    options = delta_options(storage_options or {})
    orphans = DeltaTable(path, storage_options=options).vacuum(
        retention_hours=math.ceil(older_than_s / 3600),
        dry_run=dry_run,
        enforce_retention_duration=False,
        full=True,
    )
    # Spark's file writer stages only in local or shared folders
    staging = (
        remove_stale_staging(path, older_than_s=older_than_s, dry_run=dry_run)
        if is_local(path)
        else []
    )
    report = CleanupReport(
        path,
        (*(Leftover(p, ORPHAN) for p in sorted(orphans)), *(Leftover(f, STAGING) for f in staging)),
        deleted=not dry_run,
    )
    log.info(
        "delta.cleanup", table=path, orphans=len(orphans), staging=len(staging), dry_run=dry_run
    )
    return report


def vacuum(
    path: str,
    *,
    retention_hours: float = 7 * 24,
    dry_run: bool = True,
    storage_options: dict[str, Any] | None = None,
) -> CleanupReport:
    """Delta's full VACUUM plus the staging folders it skips (``cleanup`` in hours)."""
    return cleanup(
        path,
        older_than_s=retention_hours * 3600,
        dry_run=dry_run,
        storage_options=storage_options,
    )
