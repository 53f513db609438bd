"""One table snapshot per table, kept between batches and brought up to date incrementally.

Opening a ``DeltaTable`` replays the log from its last checkpoint, which holds every add action
of the table: O(files in the table). A stream that opened the table anew in ``is_committed``,
``init`` and ``commit`` paid that three times a batch. Instead the driver keeps one handle per
table: before a use that must be fresh, it probes whether a newer commit exists and, if so,
calls ``update_incremental()``, which reads only the commits since the handle's version. The
handle is then as fresh as a new one (other writers' commits are seen).

What remains per batch is inside delta-rs: each update and each commit lists ``_delta_log``
(on local disk the whole folder, so that cost follows the number of log files the table's
``delta.logRetentionDuration`` keeps; see the README's "A long history").

A handle is used under its table's lock: the txn check and the commit that follows it must see
the same snapshot, and another thread's batch into the same table must not move it in between
(delta-rs checks conflicts against commits after the version our commit was built on).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import structlog

log = structlog.get_logger("eosink.delta")


def open_table(uri: str) -> Any | None:
    """A new handle on the table's latest snapshot, or ``None`` when there is no table."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        return DeltaTable(uri)
    except TableNotFoundError:
        return None
    except DeltaError:
        try:
            exists = DeltaTable.is_deltatable(uri)
        except OSError:  # e.g. the path is a file
            exists = False
        if not exists:
            return None
        raise


@attrs.define
class _Kept:
    lock: threading.RLock = attrs.field(factory=threading.RLock)
    table: Any = None
    fs: Any = None  # pyarrow file system and base path of the table's log, for the probe
    log: str = ""


_kept: dict[str, _Kept] = {}
_kept_lock = threading.Lock()


@contextmanager
def latest(uri: str, *, fresh: bool = True) -> Iterator[Any | None]:
    """The table's snapshot (``None`` when there is no table), held under the table's lock.

    ``fresh``: brought up to date with the table's last commit; else the kept snapshot as it
    is, when there is one (enough for what changes rarely and is checked again at commit).
    """
    with _kept_lock:
        kept = _kept.setdefault(uri, _Kept())
    with kept.lock:
        if kept.table is None:
            kept.table = open_table(uri)
        elif fresh:
            kept.table = _brought_up_to_date(uri, kept)
        yield kept.table


def _brought_up_to_date(uri: str, kept: _Kept) -> Any | None:
    """The kept snapshot, updated with the commits after it, or the table opened anew.

    Delta's commits are files numbered without gaps, and version ``v + 1`` exists before any
    later one can: probing that one file tells whether anything was committed since, without
    listing the log (which delta-rs' update does, at a cost that grows with the number of files
    the log keeps). The file of the kept version ``v`` itself stays while later commits come
    (log cleanup keeps every commit from the last checkpoint on), so its absence means the
    table was removed or replaced, or moved on further than its log keeps: open it anew.
    """
    import pyarrow.fs as pafs

    if kept.fs is None:
        kept.fs, base = pafs.FileSystem.from_uri(uri)
        kept.log = f"{base.rstrip('/')}/_delta_log"
    version = kept.table.version()
    names = [f"{kept.log}/{v:020d}.json" for v in (version, version + 1)]
    current, following = kept.fs.get_file_info(names)
    if current.type == pafs.FileType.NotFound:
        return open_table(uri)
    if following.type == pafs.FileType.NotFound:
        return kept.table
    try:
        kept.table.update_incremental()
    except Exception as exc:  # noqa: BLE001 - e.g. removed meanwhile: start anew
        log.info("delta.snapshot_reloaded", table=uri, reason=str(exc))
        return open_table(uri)
    return kept.table


def forget(uri: str) -> None:
    """Drop the kept snapshot of ``uri`` (the next use opens the table anew)."""
    with _kept_lock:
        _kept.pop(uri, None)
