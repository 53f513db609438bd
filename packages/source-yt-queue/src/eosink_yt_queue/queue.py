"""What the source asks YT about a queue: is it an ordered dynamic table, mounted, its schema,
its tablets' row counts; and the rows of one tablet range."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eosink.plugin import ConfigurationError

from eosink_yt_queue.offsets import Tablet, TabletCounts, TabletRange, TrimmedRowsError

#: ``id`` tells a queue from one created again under the same path; ``tablet_count`` changes
#: with a reshard, so both are read again for every batch the reader plans.
_ATTRIBUTES = ["id", "type", "dynamic", "sorted", "tablet_state", "tablet_count", "schema"]
READABLE = ("mounted", "frozen")


def describe(client: Any, path: str) -> dict[str, Any]:
    """The queue's attributes, or a clear error if ``path`` cannot be read as a queue.

    Checked before any row is read: the client retries reads of an unmounted table for a long
    time (a mount may be under way), which would look like a hang instead of an error.
    """
    from yt.wrapper.errors import YtResponseError

    try:
        attrs = client.get(f"{path}/@", attributes=_ATTRIBUTES)
    except YtResponseError as exc:
        if exc.is_resolve_error():
            raise ConfigurationError(f"queue {path} does not exist") from None
        raise
    if attrs.get("type") != "table" or not attrs.get("dynamic") or attrs.get("sorted"):
        kind = "a sorted dynamic table" if attrs.get("dynamic") else "not a dynamic table"
        raise ConfigurationError(
            f"{path} is {kind}; the eosink-yt-queue source reads queues, i.e. ordered dynamic "
            "tables (created with dynamic=%true and a schema without sort_order)"
        )
    if attrs.get("tablet_state") not in READABLE:
        raise ConfigurationError(
            f"queue {path} is {attrs.get('tablet_state')!r}, not mounted: mount it "
            f"(`yt mount-table --sync {path}`) before starting the query"
        )
    return attrs


def node_id(client: Any, path: str) -> str | None:
    """The queue's node id now (``None`` when there is no node at ``path``)."""
    from yt.wrapper.errors import YtResponseError

    try:
        return str(client.get(f"{path}/@id"))
    except YtResponseError as exc:
        if exc.is_resolve_error():
            return None
        raise


def tablet_counts(client: Any, path: str, tablet_count: int) -> dict[Tablet, TabletCounts]:
    """Row counts of every tablet of the queue, in one ``get_tablet_infos`` request."""
    infos = client.get_tablet_infos(path, list(range(tablet_count)))["tablets"]
    return {
        (path, t): TabletCounts(
            total=int(i["total_row_count"]), trimmed=int(i["trimmed_row_count"])
        )
        for t, i in enumerate(infos)
    }


def pull(client: Any, rng: TabletRange, pull_rows: int) -> Iterator[list[dict]]:
    """The rows of ``rng`` in row-index order, a list per request; a row that is not there any
    more (trimmed while the batch ran) is an error, never a silent gap."""
    offset = rng.start
    while offset < rng.end:
        rows = list(
            client.pull_queue(
                rng.queue,
                offset=offset,
                partition_index=rng.tablet,
                max_row_count=min(pull_rows, rng.end - offset),
            )
        )
        first = rows[0]["$row_index"] if rows else None
        if first != offset:
            raise TrimmedRowsError(
                f"queue {rng.queue}: tablet {rng.tablet} has no row {offset} any more (next row "
                f"there: {first}); it was trimmed before this batch read it. Register the "
                "query's consumer so that trimming waits for it"
            )
        yield rows
        offset += len(rows)
