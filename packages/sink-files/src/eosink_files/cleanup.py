"""Orphan cleanup: delete part files of failed attempts that no manifest lists.

A task attempt writes its part files before the commit lists them; when the attempt fails
(crash, retry, speculation, lost commit race) its files stay behind, invisible to Spark's
reader but taking space. ``cleanup`` deletes them, with three safety rules:

* only files named like part files (``part-*``) are candidates; anything else (a stray file a
  user dropped, ``_SUCCESS``, hidden files) is reported, never deleted;
* a file younger than ``older_than_s`` is kept: a live writer may still publish it (set the
  threshold above your longest batch);
* the folder is listed *before* the log is read, so a file committed meanwhile is seen as
  committed.

Staging folders the ``spark`` file writer left behind (``_eosink_staging/<attempt>``, after a crash
of the driver mid-write) are removed whole once every file in them is old enough.

Run it from Python (``eosink_files.cleanup(path, dry_run=False)``) or the ``eosink`` command
(through :meth:`eosink_files.operator_hooks.FilesOperatorHooks.cleanup_target`)::

    eosink cleanup files /data/orders --older-than 24h            # dry run
    eosink cleanup files /data/orders --older-than 24h --delete
    eosink cleanup files /data/orders -o compactInterval=5      # any sink option, e.g. this
"""

from __future__ import annotations

import functools
from typing import Any

from eosink.logs import get_logger
from eosink.plugin import clock
from eosink.reports import CleanupReport, Leftover
from eosink_files.log import LOG_DIR
from eosink_files.reader import _store, read_log
from eosink_files.spark_file_writer import STAGING_DIR

log = get_logger("eosink.files")

DEFAULT_OLDER_THAN_S = 24 * 3600.0


#: The kinds of leftovers in the report (:class:`eosink.reports.Leftover`).
ORPHAN = "orphan file"  # an unlisted part file or staged file, old enough to delete
YOUNG = "recent unlisted file"  # kept: a writer may still publish it
FOREIGN = "foreign file"  # not a part file: reported, never deleted


def cleanup(
    path: str,
    *,
    older_than_s: float = DEFAULT_OLDER_THAN_S,
    dry_run: bool = True,
    compact_interval: int = 10,
    storage_options: dict[str, Any] | None = None,
) -> CleanupReport:
    """Find (and unless ``dry_run``, delete) part files of ``path`` that the log does not list.

    The report's ``removable`` are the orphans, its ``kept`` the young and the foreign files
    (``report.paths(ORPHAN)`` etc. give their paths).
    """
    if older_than_s < 0:
        raise ValueError("older_than_s must be >= 0")
    store = _store(path, storage_options)
    listed_files = list(store.walk(""))  # before reading the log: see the module's rules
    staged = list(store.walk(STAGING_DIR))  # all of it an attempt's leftovers
    temps = [
        (f"{LOG_DIR}/{name}", *store.stat(f"{LOG_DIR}/{name}"))
        for name, is_dir in store.listdir(LOG_DIR)
        if not is_dir and name.startswith(".") and name.endswith(".tmp")
    ]
    state = read_log(path, compact_interval, storage_options)
    committed = {f.relpath for f in state.files}
    now_ms = clock.now() * 1000
    cutoff = now_ms - older_than_s * 1000
    orphans, kept = [], []
    for relpath, nbytes, mtime in [*listed_files, *temps, *staged]:
        base = relpath.rsplit("/", 1)[-1]
        if relpath in committed:
            continue
        leftover = functools.partial(Leftover, relpath, size=nbytes, age_s=(now_ms - mtime) / 1000)
        is_temp = relpath.startswith((f"{LOG_DIR}/", f"{STAGING_DIR}/"))
        if not is_temp and (not base.startswith("part-") or base.startswith((".", "_"))):
            if not base.startswith((".", "_")):
                kept.append(leftover(FOREIGN))
            continue
        if mtime > cutoff:
            kept.append(leftover(YOUNG))
            continue
        orphans.append(leftover(ORPHAN))
    if not dry_run:
        for orphan in orphans:
            store.delete(orphan.path)
        young_attempts = {
            x.path.split("/")[1] for x in kept if x.path.startswith(f"{STAGING_DIR}/")
        }
        for name, _ in store.listdir(STAGING_DIR):
            folder = f"{STAGING_DIR}/{name}"
            if name not in young_attempts and store.stat(folder)[1] <= cutoff:
                store.delete_tree(folder)  # its files are gone: only empty folders remain
    report = CleanupReport(path, tuple(orphans), tuple(kept), not dry_run)
    log.info(
        "files.cleanup",
        orphans=len(orphans),
        orphan_bytes=sum(x.size or 0 for x in orphans),
        kept=len(kept),
        dry_run=dry_run,
    )
    return report
