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

The handles belong to the process (:func:`eosink.process.process_state`): a restarted driver,
a zombie attempt or Spark's data-source worker each have their own, as they would in
production, and the conformance kit's simulation can run several such processes in one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from eosink.logs import get_logger
from eosink.process import process_state
from eosink_delta.store import delta_options, existence

log = get_logger("eosink.delta")


def open_table(uri: str, storage_options: dict[str, Any] | None = None) -> Any | None:
    """A new handle on the table's latest snapshot, or ``None`` when there is no table."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    options = delta_options(storage_options or {})
    try:
        return DeltaTable(uri, storage_options=options)
    except TableNotFoundError:
        return None
    except DeltaError:
        try:
            exists = DeltaTable.is_deltatable(uri, storage_options=options)
        except OSError:  # e.g. the path is a file
            exists = False
        if not exists:
            return None
        raise


@attrs.define
class _Kept:
    lock: threading.RLock = attrs.field(factory=threading.RLock)
    table: Any = None
    exists: Any = None  # which of some paths of the table exist (store.existence), for the probe
    fresh_for: Any = None  # the batch whose is_committed last brought it up to date


#: The name of this process's kept snapshots (table URI -> :class:`_Kept`).
KEPT = "eosink_delta.snapshots"
_kept_lock = threading.Lock()


def _kept() -> dict[str, _Kept]:
    """This process's kept snapshots; use under ``_kept_lock``."""
    return process_state(KEPT)


@contextmanager
def latest(
    uri: str,
    storage_options: dict[str, Any] | None = None,
    *,
    fresh: bool = True,
    mark: Any = None,
    reuse: Any = None,
) -> Iterator[Any | None]:
    """The table's snapshot (``None`` when there is no table), held under the table's lock.

    ``fresh``: brought up to date with the table's last commit; else the kept snapshot as it
    is, when there is one (enough for what changes rarely and is checked again at commit).
    ``storage_options``: delta-rs' options of the table's object store. ``mark``: a key of
    the batch (``is_committed``) the fresh snapshot is for; ``reuse``: skip the probe if the
    snapshot is still marked for that key (``commit`` right after this process's
    ``is_committed`` of the batch: delta-rs checks the commit against every commit after the
    snapshot anyway). A fresh use without ``mark`` clears the mark: the handle does not move
    with our own commit, so the next batch, a replay, or a batch whose ``is_committed`` ran in
    another process (the data-source front door) probes.
    """
    options = storage_options or {}
    with _kept_lock:
        kept = _kept().setdefault(uri, _Kept())
    with kept.lock:
        if kept.table is None:
            kept.table = open_table(uri, options)
        elif fresh and (reuse is None or kept.fresh_for != reuse):
            kept.table = _brought_up_to_date(uri, options, kept)
        if fresh:
            kept.fresh_for = mark
        yield kept.table


def _brought_up_to_date(uri: str, options: dict[str, Any], kept: _Kept) -> Any | None:
    """The kept snapshot, updated with the commits after it, or the table opened anew.

    Delta's commits are files numbered without gaps, and version ``v + 1`` exists before any
    later one can: probing that one file tells whether anything was committed since, without
    listing the log (which delta-rs' update does, at a cost that grows with the number of files
    the log keeps). The file of the kept version ``v`` itself stays while later commits come
    (log cleanup keeps every commit from the last checkpoint on), so its absence means the
    table was removed or replaced, or moved on further than its log keeps: open it anew.
    """
    if kept.exists is None:
        kept.exists = existence(uri, options)
    version = kept.table.version()
    current, following = kept.exists([f"_delta_log/{v:020d}.json" for v in (version, version + 1)])
    if not current:
        return open_table(uri, options)
    if not following:
        return kept.table
    try:
        kept.table.update_incremental()
    except Exception as exc:  # noqa: BLE001 - e.g. removed meanwhile: start anew
        log.info("delta.snapshot_reloaded", table=uri, reason=str(exc))
        return open_table(uri, options)
    return kept.table


def forget(uri: str) -> None:
    """Drop this process's kept snapshot and log view of ``uri`` (the next use opens the table
    anew)."""
    from eosink_delta import log_view

    with _kept_lock:
        _kept().pop(uri, None)
    log_view.forget(uri)
