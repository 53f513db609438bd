"""The source key: which columns identify a source row, and the checks that keep it one-to-one.

An idempotent receiver is only exactly-once while every output row has a key of its own that
is a function of the source row: ``(tablet_index, row_index)`` of a queue row, with a
``queue_id`` in front when several queues feed one table. Everything here is pure logic on
Arrow data and YT schemas, so it is tested without a cluster.

Duplicate detection works on *runs*: the keys of a chunk of rows, grouped by every key column
but the row index, as sorted intervals ``[first, last + 1)`` of row indexes. Rows read from a
queue arrive in row-index order, so a chunk of 50,000 rows is a handful of intervals; a
shuffled chunk degrades gracefully (at most one interval per row, still exact).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eosink.plugin import ConfigurationError

#: The service columns SPYT adds to a streaming DataFrame read with include_service_columns.
SPYT_TABLET_INDEX = "__spyt_streaming_src_tablet_index"
SPYT_ROW_INDEX = "__spyt_streaming_src_row_index"

FIX_DUPLICATES = (
    "Keep the transformation one-to-one (select, filter, withColumn; no explode, flatMap, "
    "one-to-many join or aggregation before this sink); when several queues are combined "
    "(union), add the source queue with eosink_yt_dynamic.with_queue_id(df, queue_path) and put "
    "queue_id first in the table key; if one source row legitimately yields several rows, add "
    "a column that tells them apart (e.g. posexplode's pos) to the table key after row_index. "
    "Only if overwriting rows with the same key is really intended, set check_duplicates=false"
)


@attrs.frozen
class KeyPlan:
    """How the input columns map to the output table's key (decided once per batch in ``init``)."""

    #: The table's key columns, in key order (the source coordinates first).
    key: tuple[str, ...]
    #: The key column holding the row index; the others form the run groups.
    row_column: str
    #: Input column name -> output column name (SPYT service columns renamed).
    rename: tuple[tuple[str, str], ...] = ()
    #: Output columns written, in input order.
    columns: tuple[str, ...] = ()

    @property
    def group(self) -> tuple[str, ...]:
        return tuple(k for k in self.key if k != self.row_column)


def _service_renames(
    table_key: list[str],
    names: list[str],
    *,
    path: str,
    tablet_index_column: str,
    row_index_column: str,
    queue_id_column: str,
) -> dict[str, str]:
    """SPYT's service columns renamed to the table's key columns they stand for; an error with
    the fix when a key column is neither in the rows nor a service column."""
    rename: dict[str, str] = {}
    service = {tablet_index_column: SPYT_TABLET_INDEX, row_index_column: SPYT_ROW_INDEX}
    missing = []
    for column in table_key:
        if column in names:
            continue
        if service.get(column) in names:
            rename[service[column]] = column
            continue
        missing.append(column)
    if missing:
        if queue_id_column in missing:
            fix = (
                f"add the source queue before combining queues: "
                f"eosink_yt_dynamic.with_queue_id(df, '<queue path>') (column {queue_id_column!r})"
            )
        else:
            fix = (
                "read the queue with .option('include_service_columns', True) and keep "
                f"{SPYT_TABLET_INDEX} / {SPYT_ROW_INDEX} (or their renamed columns) through "
                "every select of the query; only one-to-one transformations keep the link "
                "between an output row and its source row"
            )
        raise ConfigurationError(
            f"output table {path}: key columns {missing} are missing from the rows (columns: "
            f"{names}); without them a replayed batch cannot overwrite itself. Fix: {fix}"
        )
    return rename


def plan_key(
    input_schema: pa.Schema,
    table_schema: Sequence[Mapping[str, Any]],
    *,
    path: str,
    tablet_index_column: str,
    row_index_column: str,
    queue_id_column: str,
) -> KeyPlan:
    """Check the input and the table's key against each other: the plan, or an error with a fix."""
    table_key = [c["name"] for c in table_schema if c.get("sort_order")]
    table_columns = [c["name"] for c in table_schema]
    names = list(input_schema.names)
    queued = queue_id_column in table_key
    coords = ([queue_id_column] if queued else []) + [tablet_index_column, row_index_column]
    hint = (
        f"create it with eosink_yt_dynamic.create_output_table(client, {path!r}, schema"
        + (", queue_id=True" if queue_id_column in names else "")
        + "), or point tablet_index_column/row_index_column at the table's own key column names"
    )
    if table_key[: len(coords)] != coords:
        raise ConfigurationError(
            f"output table {path}: its key {table_key} does not start with the source coordinates "
            f"{coords}; the idempotent receiver needs a key that starts with the columns "
            f"identifying the source row, so that a replayed row overwrites itself and nothing "
            f"else. Fix: recreate the table with key {coords} (+ optional extra key columns); "
            f"{hint}"
        )
    if queue_id_column in names and not queued:
        raise ConfigurationError(
            f"output table {path}: the input carries {queue_id_column!r} (rows of several queues) "
            f"but the table key {table_key} does not: rows of different queues with the same "
            f"(tablet_index, row_index) would overwrite each other. Fix: recreate the table with "
            f"{queue_id_column!r} as the first key column (create_output_table(..., "
            f"queue_id=True)), or drop the column if there is one queue only"
        )
    rename = _service_renames(
        table_key,
        names,
        path=path,
        tablet_index_column=tablet_index_column,
        row_index_column=row_index_column,
        queue_id_column=queue_id_column,
    )
    for column in (tablet_index_column, row_index_column):
        source = next((k for k, v in rename.items() if v == column), column)
        field = input_schema.field(source)
        if not pa.types.is_integer(field.type):
            raise ConfigurationError(
                f"column {source!r} has type {field.type}; the source coordinates are integers. "
                f"Fix: cast it in the query (F.col({source!r}).cast('long'))"
            )
    out_names = [rename.get(n, n) for n in names]
    extra = [n for n in out_names if n not in table_columns]
    if extra:
        raise ConfigurationError(
            f"output table {path}: columns {extra} of the rows are not in the table schema "
            f"{table_columns}. Fix: select only the table's columns in the query, or add the "
            "columns to the table (alter_table)"
        )
    if len(set(out_names)) != len(out_names):
        raise ConfigurationError(
            f"columns {names} map to duplicate output names {out_names}: the rows carry both a "
            "SPYT service column and its renamed copy. Fix: drop one of them in the query"
        )
    return KeyPlan(
        key=tuple(table_key),
        row_column=row_index_column,
        rename=tuple(sorted(rename.items())),
        columns=tuple(out_names),
    )


def renamed(batch: pa.RecordBatch | pa.Table, plan: KeyPlan) -> pa.Table:
    """The batch under the output column names."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    if plan.rename:
        mapping = dict(plan.rename)
        table = table.rename_columns([mapping.get(n, n) for n in table.column_names])
    return table


def check_no_null_keys(chunk: pa.Table, plan: KeyPlan, path: str) -> None:
    for column in plan.key:
        nulls = chunk.column(column).null_count
        if nulls:
            raise ConfigurationError(
                f"output table {path}: {nulls} rows have a null {column!r}; a key column must "
                "identify the source row. Fix: read the queue with "
                ".option('include_service_columns', True) and keep the service columns intact "
                "(no outer join or transformation may null them); for queue_id use "
                "with_queue_id(df, queue_path)"
            )


def _key_text(plan: KeyPlan, values: Sequence[Any]) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in zip(plan.key, values)) + ")"


def check_unique_in_chunk(chunk: pa.Table, plan: KeyPlan, path: str) -> None:
    """Raise if two rows of ``chunk`` share a key (one source row, several output rows)."""
    if chunk.num_rows < 2:
        return
    counts = chunk.select(list(plan.key)).group_by(list(plan.key)).aggregate([([], "count_all")])
    if counts.num_rows == chunk.num_rows:
        return
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    example = dup.slice(0, 1).to_pylist()[0]
    raise ConfigurationError(
        f"output table {path}: {chunk.num_rows - counts.num_rows} rows of this batch repeat the "
        f"key of another row, e.g. {_key_text(plan, [example[k] for k in plan.key])} appears "
        f"{example['count_all']} times; an upsert would keep one and silently drop the others. "
        f"{FIX_DUPLICATES}"
    )


Runs = list[tuple[list[Any], np.ndarray]]  # (group values, flat [start0, end0, start1, ...])


def key_runs(chunk: pa.Table, plan: KeyPlan, path: str = "") -> Runs:
    """The chunk's keys as sorted row-index intervals per group.

    Sorting the row indexes of each group also shows repeated keys (equal neighbours): then the
    error of :func:`check_unique_in_chunk` is raised, before anything is written.
    """
    if chunk.num_rows == 0:
        return []
    group = list(plan.group)
    rows = chunk.column(plan.row_column)
    if group:
        lists = (
            chunk.select(group + [plan.row_column])
            .group_by(group)
            .aggregate([(plan.row_column, "list")])
        )
        items = [
            (
                [lists.column(g)[i].as_py() for g in group],
                lists.column(f"{plan.row_column}_list")[i].values,
            )
            for i in range(lists.num_rows)
        ]
    else:
        items = [([], rows)]
    out: Runs = []
    for values, indexes in items:
        r = np.sort(np.asarray(indexes.to_numpy(zero_copy_only=False), dtype=np.int64))
        steps = np.diff(r)
        if steps.size and not steps.all():  # a zero step: the same key twice
            check_unique_in_chunk(chunk, plan, path)
        breaks = np.nonzero(steps != 1)[0]
        starts = np.concatenate(([r[0]], r[breaks + 1]))
        ends = np.concatenate((r[breaks], [r[-1]])) + 1
        out.append((values, np.stack([starts, ends], axis=1).ravel()))
    return out


def first_common(mine: np.ndarray, theirs: np.ndarray) -> int | None:
    """The first row index in both sets of runs (flat ``[start0, end0, ...]``), or None."""
    other = theirs.reshape(-1, 2)
    other = other[np.argsort(other[:, 0], kind="stable")]
    reach = np.maximum.accumulate(other[:, 1])
    pairs = mine.reshape(-1, 2)
    # runs of theirs starting before my end; does any of them end after my start?
    before = np.searchsorted(other[:, 0], pairs[:, 1], side="left")
    meets = (before > 0) & (reach[np.maximum(before, 1) - 1] > pairs[:, 0])
    if not meets.any():
        return None
    i = int(np.argmax(meets))
    start, candidates = pairs[i, 0], other[: before[i]]
    return int(max(start, candidates[candidates[:, 1] > start][:, 0].min()))


#: Width, in row indexes, of the slices the registrations table is keyed by (see
#: :func:`bucketed`): a chunk of contiguous rows touches one or two of them.
BUCKET_ROWS = 1 << 16


def bucketed(runs: Runs) -> dict[tuple[Any, ...], tuple[list[Any], np.ndarray]]:
    """The runs cut at multiples of :data:`BUCKET_ROWS`: ``(group, bucket) -> (group, runs)``.

    Two chunks share a key only if they share its bucket, so a chunk compares itself with the
    registrations of the buckets it touches and nothing else.
    """
    out: dict[tuple[Any, ...], tuple[list[Any], np.ndarray]] = {}
    for values, flat in runs:
        pairs = flat.reshape(-1, 2)
        first, last = pairs[:, 0] // BUCKET_ROWS, (pairs[:, 1] - 1) // BUCKET_ROWS
        pieces = last - first + 1
        run = np.repeat(np.arange(len(pairs)), pieces)
        bucket = first[run] + np.arange(len(run)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        starts = np.maximum(pairs[run, 0], bucket * BUCKET_ROWS)
        ends = np.minimum(pairs[run, 1], (bucket + 1) * BUCKET_ROWS)
        # runs are sorted and disjoint, so pieces come in bucket order
        numbers, begin = np.unique(bucket, return_index=True)
        bounds = list(begin[1:]) + [len(bucket)]
        for number, lo, hi in zip(numbers.tolist(), begin.tolist(), bounds):
            flat_piece = np.stack([starts[lo:hi], ends[lo:hi]], axis=1).ravel()
            out[(*values, number)] = (values, flat_piece)
    return out


def union_runs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The union of two sets of runs (flat), touching runs joined: what a bucket now covers."""
    pairs = np.concatenate([a, b]).reshape(-1, 2)
    pairs = pairs[np.argsort(pairs[:, 0], kind="stable")]
    reach = np.maximum.accumulate(pairs[:, 1])
    starts_new = np.ones(len(pairs), dtype=bool)
    starts_new[1:] = pairs[1:, 0] > reach[:-1]
    first = np.nonzero(starts_new)[0]
    last = np.concatenate((first[1:] - 1, [len(pairs) - 1]))
    return np.stack([pairs[first, 0], reach[last]], axis=1).ravel()


def overlap_error(plan: KeyPlan, path: str, values: list[Any], row: int) -> ConfigurationError:
    key = dict(zip(plan.group, values))
    key[plan.row_column] = row
    text = _key_text(plan, [key[k] for k in plan.key])
    return ConfigurationError(
        f"output table {path}: the key {text} comes from two different partitions (or "
        f"chunks) of this batch; an upsert would keep one row and silently drop the other. "
        f"The rows of this task were not written. {FIX_DUPLICATES}"
    )
