"""The source rows each writer has covered, so that two writers never silently share keys.

Without ``queue_id`` in the key, the key of an output row is only ``(tablet_index, row_index)``:
two queries reading two different queues into one table write the same keys, possibly only in
later batches (one consumer started further ahead), and an upsert keeps one row of each pair.
The duplicate check of one batch cannot see that. So every proof records, per source tablet,
the span ``[first, last]`` of row indexes its writer has written so far (queues are read in row
order, so a writer's rows of a tablet fill that span), and:

* before writing a chunk, a task compares its spans with the other writers' (read at ``init``);
  only where they meet, it looks the chunk's rows up in the table: a stored row with other
  values means two sources share keys, and the chunk is refused before it is written. Equal
  rows are the same source read twice (a second job over the same queue), which is harmless;
* at commit, spans that meet another writer's where that writer had not written when the batch
  started (both wrote at the same time) refuse the commit: the rows are written, but the
  conflict is loud and the batch is not committed.

Pure logic on Arrow data; the progress table stores the spans (:mod:`eosink_yt_dynamic.proof`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from eosink.plugin import ConfigurationError
from eosink_yt_dynamic.keys import FIX_DUPLICATES, KeyPlan

#: source group (the key values before the row index) -> (first, last) row index
Spans = dict[tuple[Any, ...], tuple[int, int]]
#: other writers' spans, flat and picklable: (writer, group, first, last)
Foreign = tuple[tuple[str, tuple[Any, ...], int, int], ...]


def source_columns(plan: KeyPlan) -> list[str]:
    """The key columns that name a source tablet: those before the row index."""
    return list(plan.key[: plan.key.index(plan.row_column)])


def chunk_spans(chunk: pa.Table, plan: KeyPlan) -> Spans:
    """Per source tablet, the first and last row index of ``chunk``."""
    group, row = source_columns(plan), plan.row_column  # the key starts with them: never empty
    spans = chunk.group_by(group).aggregate([(row, "min"), (row, "max")])
    columns = [spans.column(g).to_pylist() for g in group]
    lows, highs = spans.column(f"{row}_min").to_pylist(), spans.column(f"{row}_max").to_pylist()
    return {tuple(v): (lo, hi) for *v, lo, hi in zip(*columns, lows, highs)}


def merge_spans(*parts: Spans) -> Spans:
    out: Spans = {}
    for spans in parts:
        for group, (lo, hi) in spans.items():
            old = out.get(group)
            out[group] = (lo, hi) if old is None else (min(lo, old[0]), max(hi, old[1]))
    return out


def encode_spans(spans: Spans) -> str:
    return json.dumps(
        sorted([list(g), lo, hi] for g, (lo, hi) in spans.items()), separators=(",", ":")
    )


def decode_spans(text: str | None) -> Spans:
    return {tuple(g): (lo, hi) for g, lo, hi in json.loads(text or "[]")}


def foreign_spans(writers: Mapping[str, Spans]) -> Foreign:
    return tuple(
        (writer, group, lo, hi)
        for writer, spans in sorted(writers.items())
        for group, (lo, hi) in spans.items()
    )


def meeting(mine: Spans, foreign: Iterable[tuple[str, tuple[Any, ...], int, int]]) -> Foreign:
    """Where ``mine`` meets other writers' spans: (writer, group, first, last) of each overlap."""
    out = []
    for writer, group, lo, hi in foreign:
        span = mine.get(group)
        if span is not None and span[0] <= hi and lo <= span[1]:
            out.append((writer, group, max(lo, span[0]), min(hi, span[1])))
    return tuple(out)


def rows_within(chunk: pa.Table, plan: KeyPlan, overlap: tuple) -> pa.Table:
    """The rows of ``chunk`` inside one overlap ``(writer, group, first, last)``."""
    _, group, lo, hi = overlap
    rows = chunk.column(plan.row_column)
    mask = pc.and_(pc.greater_equal(rows, lo), pc.less_equal(rows, hi))
    for column, value in zip(source_columns(plan), group):
        mask = pc.and_(mask, pc.equal(chunk.column(column), value))
    return chunk.filter(mask)


def first_difference(
    ours: list[dict[str, Any]], stored: list[dict[str, Any]], plan: KeyPlan, *, update: bool
) -> dict[str, Any] | None:
    """The first of ``ours`` whose upsert would change a value another writer stored.

    A whole-row upsert changes every stored column it does not hold to null; with
    ``update=true`` only the columns it holds change, and a null there was written by no one.
    """
    by_key = {tuple(r[k] for k in plan.key): r for r in stored}
    for row in ours:
        old = by_key.get(tuple(row[k] for k in plan.key))
        if old is None:
            continue
        if update:
            changed = any(old.get(c) is not None and old.get(c) != row[c] for c in row)
        else:
            changed = any(old.get(c) != row.get(c) for c in {*old, *row})
        if changed:
            return row
    return None


def new_overlaps(mine: Spans, others: Mapping[str, Spans], known: Foreign) -> Foreign:
    """Overlaps of ``mine`` with other writers' spans outside what those writers had covered
    when the batch started (``known``, which the tasks compared row by row)."""
    known_spans = {(w, g): (lo, hi) for w, g, lo, hi in known}
    out = []
    for writer, group, lo, hi in meeting(mine, foreign_spans(others)):
        seen = known_spans.get((writer, group))
        if seen is None or lo < seen[0] or hi > seen[1]:
            out.append((writer, group, lo, hi))
    return tuple(out)


FIX = (
    "The table's key has no queue id, so rows of two queues with the same coordinates have the "
    "same key and an upsert keeps only one of them. Fix: if the writers read different queues, "
    "tag each with eosink_yt_dynamic.with_queue_id(df, queue_path) and write into a table with "
    "queue_id first in its key (create_output_table(..., queue_id=True)); if a new query "
    "replaces {other!r} over the same queue with other values, retire the old writer: "
    "eosink_yt_dynamic.retire_writer(client, {path!r}, {other!r}). Only if overwriting is "
    "intended, set check_duplicates=false"
)


def _where(plan: KeyPlan, group: tuple[Any, ...]) -> str:
    return ", ".join(f"{c}={v!r}" for c, v in zip(source_columns(plan), group))


def overwrite_error(
    plan: KeyPlan, path: str, writer: str, other: str, row: dict[str, Any]
) -> ConfigurationError:
    key = ", ".join(f"{k}={row[k]!r}" for k in plan.key)
    return ConfigurationError(
        f"output table {path}: writer {writer!r} would overwrite rows that writer {other!r} "
        f"wrote with other values, e.g. the row ({key}); nothing of this chunk was written. "
        + FIX.format(other=other, path=path)
    )


def rewrite_error(
    plan: KeyPlan, path: str, writer: str, batch: int, row: dict[str, Any]
) -> ConfigurationError:
    key = ", ".join(f"{k}={row[k]!r}" for k in plan.key)
    return ConfigurationError(
        f"output table {path}: the row ({key}), which writer {writer!r} wrote in an earlier "
        f"batch, holds other values than batch {batch} writes under that key now; an upsert "
        "would replace them, so nothing of this chunk was written. One source row gave output "
        "rows in two batches (a one-to-many query, e.g. a join with another stream), or queues "
        "were combined (union) without a queue id and their row numbers met. " + FIX_DUPLICATES
    )


def concurrent_error(plan: KeyPlan, path: str, writer: str, overlap: tuple) -> ConfigurationError:
    other, group, lo, hi = overlap
    return ConfigurationError(
        f"output table {path}: writer {writer!r} and writer {other!r} wrote rows with the same "
        f"keys ({_where(plan, group)}, {plan.row_column} {lo}..{hi}) at the same time: rows of "
        f"one may have been overwritten by the other's. This batch's rows are in the table; it "
        f"is not committed. " + FIX.format(other=other, path=path)
    )
