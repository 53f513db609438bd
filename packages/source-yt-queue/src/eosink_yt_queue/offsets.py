"""Offsets of a queue: per tablet, the row index of the next row to read.

The offset Spark writes into the checkpoint's offset log is ``{"<tablet>": <row index>}``
(JSON keys are strings). A micro-batch reads ``[start, end)`` of every tablet; the plan of a
batch is pure arithmetic on row counts, tested here without Spark or YT.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

from eosink import ConfigurationError, EosinkError


class TrimmedRowsError(EosinkError):
    """Rows the query has not read yet were trimmed from the queue: they are lost to it."""


@attrs.frozen
class TabletCounts:
    """What YT says about one tablet: rows ever written and rows trimmed (both row indexes)."""

    total: int
    trimmed: int


Offsets = dict[int, int]


def to_json(offsets: Offsets) -> dict[str, int]:
    return {str(t): int(r) for t, r in sorted(offsets.items())}


def from_json(offsets: Mapping[str, int]) -> Offsets:
    return {int(t): int(r) for t, r in offsets.items()}


def starting(spec: str, counts: Mapping[int, TabletCounts]) -> Offsets:
    """The first offsets of a new query from the ``startingOffsets`` option."""
    spec = spec.strip()
    if spec.lower() == "earliest":
        return {t: c.trimmed for t, c in counts.items()}
    if spec.lower() == "latest":
        return {t: c.total for t, c in counts.items()}
    try:
        given = from_json(json.loads(spec))
    except (ValueError, TypeError, AttributeError):
        raise ConfigurationError(
            f"option startingOffsets: {spec[:80]!r} is not earliest, latest or a JSON object "
            'of row indexes per tablet such as {"0": 0, "1": 1500}'
        ) from None
    missing = sorted(set(counts) - set(given))
    unknown = sorted(set(given) - set(counts))
    if missing or unknown:
        raise ConfigurationError(
            f"option startingOffsets names tablets {sorted(given)}, the queue has tablets "
            f"{sorted(counts)}: give a row index for every tablet (missing {missing}, "
            f"unknown {unknown})"
        )
    return given


def check_not_trimmed(path: str, start: Offsets, counts: Mapping[int, TabletCounts]) -> None:
    """Fail when a tablet was trimmed past the next row the query must read."""
    lost = {
        t: (start.get(t, 0), c.trimmed) for t, c in counts.items() if c.trimmed > start.get(t, 0)
    }
    if lost:
        detail = ", ".join(
            f"tablet {t}: next row {nxt}, trimmed up to {trimmed}"
            for t, (nxt, trimmed) in sorted(lost.items())
        )
        raise TrimmedRowsError(
            f"queue {path}: rows this query has not read yet were trimmed ({detail}); they "
            "cannot be delivered. Register the query's consumer so that trimming waits for it, "
            "or, to accept the loss, restart with a new checkpoint and startingOffsets=earliest"
        )


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
    """Rows ``[start, end)`` of one tablet: what one Spark task reads."""

    tablet: int
    start: int
    end: int


def split(start: Offsets, end: Offsets, rows_per_partition: int) -> list[TabletRange]:
    """The tasks of a batch: every tablet's new rows, cut into ranges of bounded size."""
    out = []
    for tablet in sorted(end):
        first, last = start.get(tablet, 0), end[tablet]
        for lo in range(first, last, rows_per_partition):
            out.append(TabletRange(tablet, lo, min(lo + rows_per_partition, last)))
    return out
