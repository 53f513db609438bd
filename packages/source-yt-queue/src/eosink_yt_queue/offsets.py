"""Offsets of the queues a query reads: per queue and tablet, the row index of the next row.

The offset Spark writes into the checkpoint's offset log is versioned JSON::

    {"v": 1, "queues": {"//home/app/events": {"0": 120, "1": 97}},
     "ids": {"//home/app/events": "1a2b-3c4d-..."}}

(JSON keys are strings). The version key lets a later release change the shape and still read
(or clearly refuse) checkpoints written by this one. ``ids`` (optional: older checkpoints lack
it) holds each queue's node id (``@id``): a queue removed and created again under the same path
numbers its rows from 0 again, so the checkpoint's row indexes would point at other rows, or
past them; :func:`check_same_queues` refuses that instead of skipping rows.

With a consumer (option ``consumerPath``) the JSON also holds ``"consumer": "//home/app/c"``
and ``"proxy": "<the proxy option>"``: the consumer the rows came through and their cluster,
so that a sink writing into that cluster can move the consumer in the same transaction as the
batch's rows (:mod:`eosink_yt_common.queue_offsets` reads them). Offsets without them (older
checkpoints, no consumer) read as before.

A micro-batch reads ``[start, end)`` of every tablet of every queue; the plan of a batch is
pure arithmetic on row counts, tested here without Spark or YT.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
from eosink_yt_common.queue_offsets import consumer_fields

from eosink.plugin import ConfigurationError, EosinkError

#: The version of the offset JSON this release writes and reads.
VERSION = 1


class TrimmedRowsError(EosinkError):
    """Rows the query has not read yet were trimmed from the queue: they are lost to it."""


class QueueChangedError(ConfigurationError):
    """The queue is not the one the checkpoint's offsets were taken from."""


#: What to do about a queue the checkpoint's offsets do not describe any more.
_CHANGED_FIX = (
    "The checkpoint's offsets do not point at this queue's rows: restart the query with a new "
    "checkpoint (startingOffsets=earliest reads the queue from its first row; rows its sink "
    "already holds are read again), or put the original queue back under this path"
)


@attrs.frozen
class TabletCounts:
    """What YT says about one tablet: rows ever written and rows trimmed (both row indexes)."""

    total: int
    trimmed: int


#: A tablet of a queue: (queue path, tablet index).
Tablet = tuple[str, int]
#: The row index of the next row to read, per tablet.
Offsets = dict[Tablet, int]


def to_json(
    offsets: Offsets,
    ids: Mapping[str, str] | None = None,
    consumer: str | None = None,
    proxy: str = "",
) -> dict[str, Any]:
    """The checkpoint's JSON of ``offsets``, with the queues' node ids when known and the
    consumer (and the proxy of its cluster) when the source has one."""
    queues: dict[str, dict[str, int]] = {}
    for (queue, tablet), row in sorted(offsets.items()):
        queues.setdefault(queue, {})[str(tablet)] = int(row)
    out: dict[str, Any] = {"v": VERSION, "queues": queues}
    if ids:
        out["ids"] = {q: str(ids[q]) for q in sorted(ids)}
    out.update(consumer_fields(consumer, proxy))
    return out


def ids_from_json(offset: Mapping[str, Any]) -> dict[str, str]:
    """The queues' node ids recorded with the offsets ({} for checkpoints without them)."""
    ids = offset.get("ids") if isinstance(offset, Mapping) else None
    return {str(q): str(i) for q, i in ids.items()} if isinstance(ids, Mapping) else {}


def check_same_queues(
    start: Offsets,
    start_ids: Mapping[str, str],
    counts: Mapping[Tablet, TabletCounts],
    ids: Mapping[str, str],
) -> None:
    """Refuse to plan from ``start`` when a queue is not the one it was taken from: another node
    id, a tablet that is gone, or fewer rows than the offsets already read. Tablets the queue
    gained (a reshard) are fine: they are read from their first row."""
    check_same_ids(start_ids, ids)
    queues = {q for q, _ in counts}
    for (queue, tablet), row in sorted(start.items()):
        if queue not in queues:
            continue  # a queue no longer read: nothing is planned from its offsets
        now = counts.get((queue, tablet))
        if now is None:
            have = sum(1 for q, _ in counts if q == queue)
            raise QueueChangedError(
                f"queue {queue}: tablet {tablet}, read up to row {row}, is gone (the queue has "
                f"{have} tablets now). {_CHANGED_FIX}"
            )
        if now.total < row:
            raise QueueChangedError(
                f"queue {queue}: tablet {tablet} holds {now.total} rows, but the checkpoint "
                f"already read up to row {row}: the queue was created again or its rows were "
                f"rolled back. {_CHANGED_FIX}"
            )


def check_same_ids(recorded: Mapping[str, str], ids: Mapping[str, str | None]) -> None:
    """Refuse queues whose node id is not the one ``recorded`` with the offsets (a queue
    removed and created again under the same path: ``None`` when it is gone for now)."""
    for queue, old in sorted(recorded.items()):
        if queue not in ids:
            continue  # a queue this check was not asked about
        new = ids[queue]
        if new is None:
            raise QueueChangedError(
                f"queue {queue}, which this query's checkpoint read (node {old}), is gone. "
                f"{_CHANGED_FIX}"
            )
        if new != old:
            raise QueueChangedError(
                f"queue {queue} is not the queue this query's checkpoint read: its id changed "
                f"from {old} to {new} (it was removed and created again). {_CHANGED_FIX}"
            )


def from_json(offset: Mapping[str, Any]) -> Offsets:
    """Offsets from the checkpoint; an offset of another version is a clear error."""
    if not isinstance(offset, Mapping) or offset.get("v") != VERSION:
        raise ConfigurationError(
            f"the checkpoint holds queue offsets {json.dumps(offset)[:120]} that are not "
            f"eosink-yt-queue offsets of version {VERSION}: it was written by another source "
            "or another version of eosink-yt-queue; use that version, or a new checkpoint"
        )
    return _nested(offset["queues"])


def _nested(queues: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(q, int(t)): int(r) for q, tablets in queues.items() for t, r in tablets.items()}


def starting(spec: str, counts: Mapping[Tablet, TabletCounts]) -> Offsets:
    """The first offsets of a new query from the ``startingOffsets`` option: ``earliest``,
    ``latest``, or JSON ``{"<queue>": {"<tablet>": n}}`` (``{"<tablet>": n}`` for one queue)."""
    spec = spec.strip()
    if spec.lower() == "earliest":
        return {t: c.trimmed for t, c in counts.items()}
    if spec.lower() == "latest":
        return {t: c.total for t, c in counts.items()}
    queues = sorted({q for q, _ in counts})
    try:
        given = json.loads(spec)
        if all(isinstance(v, Mapping) for v in given.values()):
            offsets = _nested(given)
        elif len(queues) == 1:
            offsets = _nested({queues[0]: given})
        else:
            raise ValueError
    except (ValueError, TypeError, AttributeError):
        raise ConfigurationError(
            f"option startingOffsets: {spec[:80]!r} is not earliest, latest or a JSON object "
            'of row indexes per queue and tablet such as {"//home/q": {"0": 0, "1": 1500}} '
            '(for one queue also {"0": 0, "1": 1500})'
        ) from None
    missing = sorted(set(counts) - set(offsets))
    unknown = sorted(set(offsets) - set(counts))
    if missing or unknown:
        raise ConfigurationError(
            "option startingOffsets must give a row index for every tablet of every queue "
            f"read: missing {missing}, unknown {unknown}"
        )
    return offsets


def check_not_trimmed(start: Offsets, counts: Mapping[Tablet, TabletCounts]) -> None:
    """Fail when a tablet was trimmed past the next row the query must read."""
    lost = {
        t: (start.get(t, 0), c.trimmed) for t, c in counts.items() if c.trimmed > start.get(t, 0)
    }
    if lost:
        detail = ", ".join(
            f"queue {q} tablet {t}: next row {nxt}, trimmed up to {trimmed}"
            for (q, t), (nxt, trimmed) in sorted(lost.items())
        )
        raise TrimmedRowsError(
            f"rows this query has not read yet were trimmed ({detail}); they cannot be "
            "delivered. Register a vital consumer (option consumerPath) so that trimming waits "
            "for the query, or, to accept the loss, restart with a new checkpoint and "
            "startingOffsets=earliest"
        )


def cap(latest: Offsets, target: Offsets | None) -> Offsets:
    """``latest``, but never beyond ``target`` (the end fixed by ``trigger(availableNow=True)``)."""
    if target is None:
        return latest
    return {t: min(n, target.get(t, n)) for t, n in latest.items()}


def limit_rows(start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
    """The end offsets of a batch: all available rows, or at most ``max_rows`` shared fairly
    (each tablet with rows gets an equal share; what a short tablet leaves goes to the others)."""
    available = {t: max(0, latest[t] - start.get(t, 0)) for t in latest}
    if max_rows is None:
        take = available
    else:
        take = dict.fromkeys(available, 0)
        remaining = max_rows
        active = sorted(t for t, n in available.items() if n > 0)
        while remaining > 0 and active:
            share = max(1, remaining // len(active))
            for t in list(active):
                got = min(share, available[t] - take[t], remaining)
                take[t] += got
                remaining -= got
                if take[t] == available[t]:
                    active.remove(t)
                if remaining == 0:
                    break
    return {t: start.get(t, 0) + take[t] for t in latest}


@attrs.frozen
class TabletRange:
    """Rows ``[start, end)`` of one tablet of one queue: what one Spark task reads."""

    queue: str
    tablet: int
    start: int
    end: int


def split(start: Offsets, end: Offsets, rows_per_partition: int) -> list[TabletRange]:
    """The tasks of a batch: every tablet's new rows, cut into ranges of bounded size."""
    out = []
    for queue, tablet in sorted(end):
        first, last = start.get((queue, tablet), 0), end[(queue, tablet)]
        for lo in range(first, last, rows_per_partition):
            out.append(TabletRange(queue, tablet, lo, min(lo + rows_per_partition, last)))
    return out
