"""A keyed change feed for upsert benchmarks, and their printout.

Batch 0 inserts ``rows`` new keys; every later batch carries ``rows / 2`` new keys and
``rows / 2`` keys already in the table, drawn from the keys the last :data:`RECENT` batches
inserted (recent entities change: an order's status, a session's counters). If the updates hit
the whole table, every file would be touched whatever the writer, and a writer's cost could not
be told O(batch + files touched) from O(table). Keyed by ``id``, five columns.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

#: The updates of a batch hit keys the last RECENT batches inserted.
RECENT = 5


def new_keys(batch: int, rows: int) -> range:
    """The keys batch ``batch`` inserts: ``rows`` at batch 0, ``rows // 2`` later."""
    half = rows // 2
    return range(0, rows) if batch == 0 else range(rows + (batch - 1) * half, rows + batch * half)


def change_feed(batch: int, rows: int) -> pa.RecordBatch:
    """Batch ``batch`` of the feed: its new keys and (after batch 0) as many keys of the last
    :data:`RECENT` batches, in a seeded random order; every key at most once."""
    fresh = new_keys(batch, rows)
    keys = list(fresh)
    if batch:
        recent = range(new_keys(max(0, batch - RECENT), rows).start, fresh.start)
        keys += random.Random(batch).sample(recent, rows - len(fresh))
        random.Random(-batch).shuffle(keys)
    ids = pa.array(keys, pa.int64())
    return pa.record_batch(
        {
            "id": ids,
            "batch": pa.array([batch] * len(keys), pa.int64()),
            "name": pa.array([f"user-{k}-{batch}" for k in keys]),
            "amount": pa.array([(k * 7 + batch) % 1000 for k in keys], pa.int64()),
            "score": pa.array([(k % 97) / 7 + batch for k in keys], pa.float64()),
        }
    )


def table_rows(batches: int, rows: int) -> int:
    """The table's rows after ``batches`` batches."""
    return new_keys(batches - 1, rows).stop


def print_result(result: dict[str, Any], batches: int, rows: int, window: int) -> None:
    """Each path's rows/s over the run (batch 0, which creates the tables, left out) and its
    median cost per batch early (batch 10) and over the last ``window`` batches."""
    first = min(10, max(1, batches - 2 * window))
    for name, seconds in result["seconds"].items():
        measured = seconds[1:]  # batch 0 creates what the later ones find: the warm-up
        early = statistics.median(seconds[first : first + window]) * 1000
        late = statistics.median(seconds[-window:]) * 1000
        print(
            f"{name}: {len(measured) * rows / sum(measured):,.0f} rows/s; "
            f"median ms per batch at batch {first}: {early:.1f}, at the last {window}: "
            f"{late:.1f} ({late / early:.2f}x)"
        )


def time_batch(
    paths: dict[str, Callable[[int, pa.RecordBatch], None]],
    batch: int,
    data: pa.RecordBatch,
    spent: dict[str, list[float]],
) -> None:
    """Run batch ``batch`` through every path, in an order alternating from batch to batch (so
    neither always finds the caches warm), adding each path's seconds to ``spent``."""
    order = list(paths) if batch % 2 == 0 else list(reversed(paths))
    for name in order:
        began = time.perf_counter()
        paths[name](batch, data)
        spent.setdefault(name, []).append(time.perf_counter() - began)


def check_same(mine: list[Any], theirs: list[Any], batches: int, rows: int) -> None:
    """Both paths' tables, read back in key order, hold the feed's rows and the same ones."""
    if mine != theirs or len(mine) != table_rows(batches, rows):
        raise AssertionError(
            f"the two tables differ after {batches} batches: {len(mine)} vs {len(theirs)} "
            f"rows, {table_rows(batches, rows)} expected"
        )
