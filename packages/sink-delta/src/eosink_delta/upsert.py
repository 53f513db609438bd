"""Keyed upserts (``mode="upsert"``, ``key=[...]``): MERGE semantics in one Delta commit.

After batch N commits the table holds, for each key, the row of the latest committed batch that
carried it (replace, never accumulate). The executors stage the batch's rows as in append mode
(new files, invisible until committed). At commit the driver:

1. reads the key columns of the staged files: a null key, or a key the batch holds twice, is
   refused naming it (with ``order_by``, the row with the greatest value wins; a tie is refused),
   before anything is committed; staged files that hold a losing row are written again
   without it;
2. plans on the table at the log view's version: the live files that may hold one of the
   batch's keys, pruned by their partition values and the min/max statistics of the key
   columns (a file without a bound of a key column may hold any value of it), are read, and
   their rows whose key the batch carries are dropped: the other rows ("survivors") are
   written to new files with the same Parquet writer and statistics as the batch's;
3. commits, through eosink's own log writer (:mod:`eosink_delta.log_commit`), one Delta
   commit: ``remove`` of the files that held a batch key, ``add`` of the survivors' and the
   batch's files, the ``txn`` and the proof. Cost: the batch and the files it touches, never
   the table.

A commit of another writer that landed after the planned version and removed a file the plan
rewrites, added a file that may hold one of the batch's keys, or changed the table's schema or
protocol, makes the plan wrong: it is not committed, its survivor files are deleted, and the
batch is planned again on the newer table (the batch is later than that commit, so its rows
replace the ones that commit added). A file with a deletion vector among the ones to rewrite is
refused by name (its deleted rows would come back).
"""

from __future__ import annotations

import datetime as dt
import decimal
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from eosink.logs import get_logger
from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    SinkError,
    crash_point,
)
from eosink_delta import files as file_index
from eosink_delta import log_commit
from eosink_delta.files import TableFile
from eosink_delta.log_view import LogView, check_txn, table_gone, viewed
from eosink_delta.options import DeltaOptions
from eosink_delta.parquet import DeltaFile, PartitionWriter
from eosink_delta.schema import WritePlan
from eosink_delta.store import filesystem, path_in

if TYPE_CHECKING:
    from eosink_delta.sink import DeltaSink, DeltaState

log = get_logger("eosink.delta")

#: How many times an upsert is planned again after a concurrent commit conflicted with it,
#: before the batch fails (and is written again when the query restarts).
MAX_PLANS = 10
#: Rows read at a time from a file being rewritten.
BATCH_ROWS = 65_536
#: What a key column's partition values are compared as: their text, which every Delta writer
#: writes the same way for these types.
PARTITION_KEY_TYPES = "strings, integers, dates or booleans"


def _key_type_problem(t: pa.DataType) -> str | None:
    if pa.types.is_floating(t):
        return "a floating-point number (NaN and -0.0 make equality unreliable)"
    if pa.types.is_nested(t) or pa.types.is_map(t):
        return "a nested type"
    if pa.types.is_null(t):
        return "always null"
    return None


def _partition_key_ok(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_date(t)
        or pa.types.is_boolean(t)
    )


def check_options(
    uri: str, options: DeltaOptions, stream: pa.Schema, partition_by: Sequence[str], mode: str
) -> None:
    """Refuse, before anything is written, an upsert the stream or the table cannot hold."""
    if mode == "complete":
        raise ConfigurationError(
            f"sink 'delta': mode 'upsert' with Spark's complete output mode: complete replaces "
            f"the whole table at {uri} every batch, so there is nothing to upsert; use "
            "outputMode('update') (or append) with mode='upsert', or drop mode='upsert'"
        )
    missing = [c for c in options.key if c not in stream.names]
    if missing:
        raise ConfigurationError(
            f"sink 'delta': key column(s) {missing} are not in the stream (it has "
            f"{stream.names}); select them in the query or fix option key"
        )
    for column in options.key:
        t = stream.field(column).type
        problem = _key_type_problem(t)
        if problem:
            raise ConfigurationError(
                f"sink 'delta': key column {column!r} has type {t}, {problem}; cast it in the "
                "query (e.g. to a string or a decimal) or key by other columns"
            )
        if column in partition_by and not _partition_key_ok(t):
            raise ConfigurationError(
                f"sink 'delta': key column {column!r} is a partition column of type {t}; a "
                f"partition column in the key must hold {PARTITION_KEY_TYPES}: cast it in the "
                "query, or key by other columns"
            )
    if options.order_by is not None:
        if options.order_by not in stream.names:
            raise ConfigurationError(
                f"sink 'delta': order_by column {options.order_by!r} is not in the stream (it "
                f"has {stream.names}); select it in the query or fix option order_by"
            )
        if options.order_by in partition_by:
            raise ConfigurationError(
                f"sink 'delta': order_by column {options.order_by!r} is a partition column; "
                "order by a data column (e.g. an event time or a version)"
            )
        t = stream.field(options.order_by).type
        if pa.types.is_nested(t) or pa.types.is_binary(t) or pa.types.is_null(t):
            raise ConfigurationError(
                f"sink 'delta': order_by column {options.order_by!r} has type {t}, which has no "
                "order; order by a number, a string, a date or a timestamp"
            )


def check_table_key(uri: str, options: DeltaOptions, table_columns: Sequence[str]) -> None:
    """Refuse key columns the table lacks (unless ``merge_schema`` adds them): the generic
    schema error would advise dropping them from the query."""
    missing = [c for c in options.key if c not in table_columns]
    if missing and not options.merge_schema:
        raise ConfigurationError(
            f"sink 'delta': key column(s) {missing} are not in the table at {uri} (it has "
            f"{list(table_columns)}); key by the table's columns, or set mergeSchema=true to "
            "add them (the table's existing rows then have a null key and are never replaced)"
        )


# -- the batch's keys --------------------------------------------------------------------------


def _comparable(value: Any) -> Any:
    """A key value as bounds are compared with it: timestamps as naive UTC."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


@attrs.define
class BatchKeys:
    """The batch's keys, and per key column what prunes a file: the sorted values of a data
    column, the partition values (text) of a partition column."""

    key: tuple[str, ...]
    partition_by: tuple[str, ...]
    keys: set[tuple[Any, ...]] = attrs.field(factory=set)
    values: dict[str, list[Any]] = attrs.field(factory=dict)
    texts: dict[str, set[str | None]] = attrs.field(factory=dict)

    def summarize(self) -> None:
        for i, column in enumerate(self.key):
            if column in self.partition_by:
                self.texts[column] = {k[i] for k in self.keys}
            else:
                self.values[column] = sorted({_comparable(k[i]) for k in self.keys})


def _shown(key: tuple[str, ...], values: tuple[Any, ...]) -> str:
    return ", ".join(f"{c}={v!r}" for c, v in zip(key, values))


@attrs.define
class _Reader:
    """Reads a file's rows and their keys, in the table's types."""

    uri: str
    storage: dict[str, Any]
    key: tuple[str, ...]
    partition_by: tuple[str, ...]
    types: dict[str, pa.DataType]  # the table's data columns' types
    fs: Any = None
    base: str = ""

    def __attrs_post_init__(self) -> None:
        self.fs, self.base = filesystem(self.uri, self.storage)

    def read(self, relative: str, columns: list[str] | None = None) -> pa.Table:
        source = self.fs.open_input_file(path_in(self.base, relative))
        if columns is None:
            return pq.read_table(source)
        present = set(pq.ParquetFile(source).schema_arrow.names)
        source = self.fs.open_input_file(path_in(self.base, relative))
        table = pq.read_table(source, columns=[c for c in columns if c in present])
        for c in columns:  # a column the file's writer did not have: all null
            if c not in present:
                table = table.append_column(c, pa.nulls(table.num_rows, self.types[c]))
        return table

    def batches(self, relative: str, keep: list[bool]) -> Iterator[pa.Table]:
        """The file's rows whose ``keep`` is true, one record batch at a time (a file need
        not fit in the driver's memory)."""
        source = self.fs.open_input_file(path_in(self.base, relative))
        start = 0
        for batch in pq.ParquetFile(source).iter_batches(batch_size=BATCH_ROWS):
            mask = pa.array(keep[start : start + batch.num_rows], pa.bool_())
            start += batch.num_rows
            kept = pa.Table.from_batches([batch]).filter(mask)
            if kept.num_rows:
                yield kept

    def keys_of(self, table: pa.Table, partition_values: dict[str, str | None]) -> list[tuple]:
        columns = []
        for c in self.key:
            if c in self.partition_by:
                columns.append([partition_values.get(c)] * table.num_rows)
            else:
                column = table.column(c)
                if column.type != self.types[c]:
                    column = column.cast(self.types[c])
                columns.append(column.to_pylist())
        return list(zip(*columns)) if columns else []


# The batch's refusals, worded alike on both engines (delta-rs reads the staged files' keys,
# delta-spark asks Spark).


def null_key_error(ctx: BatchContext, key: tuple[str, ...], k: tuple) -> ConfigurationError:
    nulls = [c for c, v in zip(key, k) if v is None]
    return ConfigurationError(
        f"{ctx.label}: sink 'delta' (mode 'upsert'): a row of the batch has a null "
        f"key column {nulls} ({_shown(key, k)}); a key identifies a row and cannot "
        "be null (an empty string in a partition column is null in Delta). Filter "
        "or fill those rows in the query. Nothing of this batch was committed."
    )


def doubled_key_error(ctx: BatchContext, key: tuple[str, ...], k: tuple) -> ConfigurationError:
    return ConfigurationError(
        f"{ctx.label}: sink 'delta' (mode 'upsert'): the batch holds key "
        f"({_shown(key, k)}) more than once, and which row would win is Spark's "
        "partitioning, not the query's. Reduce the batch to one row per key "
        "(e.g. groupBy the key), or name a column with option order_by whose "
        "greatest value wins. Nothing of this batch was committed."
    )


def null_order_error(
    ctx: BatchContext, key: tuple[str, ...], k: tuple, order_by: str
) -> ConfigurationError:
    return ConfigurationError(
        f"{ctx.label}: sink 'delta' (mode 'upsert'): order_by column {order_by!r} "
        f"is null in a row of key ({_shown(key, k)}); fill it in the query. Nothing "
        "of this batch was committed."
    )


def tied_key_error(
    ctx: BatchContext, key: tuple[str, ...], k: tuple, order_by: str, value: Any
) -> ConfigurationError:
    return ConfigurationError(
        f"{ctx.label}: sink 'delta' (mode 'upsert'): the batch holds key ({_shown(key, k)}) "
        f"more than once with the same greatest {order_by}={value!r}, so no row wins; make "
        "order_by unique per key (e.g. add a sequence number). Nothing of this batch was "
        "committed."
    )


def read_batch_keys(
    ctx: BatchContext, options: DeltaOptions, reader: _Reader, staged: list[DeltaFile]
) -> tuple[BatchKeys, dict[int, list[bool]]]:
    """The batch's keys, and, where ``order_by`` dropped rows, each staged file's rows to keep
    (by the file's index). Refuses null keys and keys held twice (or tied on ``order_by``)."""
    key, order_by = options.key, options.order_by
    wanted = [c for c in key if c not in reader.partition_by]
    if order_by is not None:
        wanted.append(order_by)
    out = BatchKeys(key=key, partition_by=reader.partition_by)
    best: dict[tuple, tuple[Any, int, int]] = {}  # key -> (order value, file, row)
    tied: dict[tuple, Any] = {}
    for i, f in enumerate(staged):
        table = reader.read(f.path, wanted)
        keys = reader.keys_of(table, f.partition_values)
        order = table.column(order_by).to_pylist() if order_by is not None else None
        for row, k in enumerate(keys):
            if any(v is None for v in k):
                raise null_key_error(ctx, key, k)
            if order is None:
                if k in best:
                    raise doubled_key_error(ctx, key, k)
                best[k] = (None, i, row)
                continue
            value = order[row]
            if value is None:
                raise null_order_error(ctx, key, k, order_by)
            held = best.get(k)
            if held is None or value > held[0]:
                best[k] = (value, i, row)
                tied.pop(k, None)
            elif value == held[0]:
                tied[k] = value
    if tied:
        k, value = next(iter(tied.items()))
        raise tied_key_error(ctx, key, k, order_by, value)
    out.keys = set(best)
    out.summarize()
    keep: dict[int, list[bool]] = {}
    if order_by is not None:
        winners: dict[int, set[int]] = {}
        for _, i, row in best.values():
            winners.setdefault(i, set()).add(row)
        for i, f in enumerate(staged):
            rows = winners.get(i, set())
            if len(rows) < f.rows:
                keep[i] = [r in rows for r in range(f.rows)]
    return out, keep


# -- which files may hold a key ------------------------------------------------------------------


def _bound(value: Any, t: pa.DataType, *, up: bool) -> Any:
    """A stats bound as a comparable value; ``None`` when the type is not pruned by bounds."""
    if value is None or isinstance(value, (dict, list)):
        return None
    try:
        if pa.types.is_boolean(t):
            return bool(value)
        if pa.types.is_integer(t):
            return int(value)
        if pa.types.is_decimal(t):
            return decimal.Decimal(str(value))
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return str(value)
        if pa.types.is_date(t):
            return dt.date.fromisoformat(str(value)[:10])
        if pa.types.is_timestamp(t):
            # writers keep milliseconds (some truncate the max): widen by one either way
            at = _comparable(dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")))
            return at + dt.timedelta(milliseconds=1 if up else -1)
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        return None
    return None


def may_hold(f: TableFile, keys: BatchKeys, types: dict[str, pa.DataType]) -> bool:
    """Whether file ``f`` may hold one of the batch's keys: its partition values and its key
    columns' bounds each admit a value of the batch (a file without a bound may hold any)."""
    for column in keys.key:
        if column in keys.partition_by:
            if f.partition_values.get(column) not in keys.texts[column]:
                return False
            continue
        stats = f.stats or {}
        lo = _bound((stats.get("minValues") or {}).get(column), types[column], up=False)
        hi = _bound((stats.get("maxValues") or {}).get(column), types[column], up=True)
        values = keys.values[column]
        if lo is None and hi is None:
            continue
        try:
            start = bisect_left(values, lo) if lo is not None else 0
            if start >= len(values) or (hi is not None and values[start] > hi):
                return False
        except TypeError:
            continue  # bounds of another type than the values (a changed column): no pruning
    return True


def _relative(f: TableFile, uri: str) -> str:
    """The file's path relative to the table folder, as the file system names it."""
    path = unquote(f.path)
    if "://" in path or path.startswith("/"):
        raise SinkError(
            f"sink 'delta': the file {f.path} of the table at {uri} lives outside the table "
            "folder (a shallow clone?); mode 'upsert' rewrites only the table's own files"
        )
    return path


# -- the commit ----------------------------------------------------------------------------------


@attrs.define
class Plan:
    version: int
    removes: list[TableFile]
    survivors: list[DeltaFile]
    read: int  # files read (that may hold a key)


def _writer(sink: DeltaSink, state: DeltaState, data: pa.Schema, prefix: str) -> PartitionWriter:
    return PartitionWriter(
        root=sink.uri,
        storage_options=sink.storage,
        prefix=prefix,
        plan=WritePlan(data_schema=data),
        partition_by=state.partition_by,
        compression=sink.options.compression,
        row_group_rows=sink.options.row_group_rows,
        stats=sink.options.stats,
    )


def _as_table_rows(table: pa.Table, data: pa.Schema) -> pa.Table:
    """A file's rows in the table's data columns and types (absent columns null)."""
    columns = []
    for field in data:
        if field.name in table.column_names:
            column = table.column(field.name)
            columns.append(column.cast(field.type) if column.type != field.type else column)
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=data)


def _table_data_schema(view: LogView, partition_by: tuple[str, ...]) -> pa.Schema:
    from deltalake import Schema

    schema = pa.schema(Schema.from_json(view.schema_string).to_arrow())
    return pa.schema([f.with_nullable(True) for f in schema if f.name not in partition_by])


def _plan(
    sink: DeltaSink,
    state: DeltaState,
    ctx: BatchContext,
    reader: _Reader,
    keys: BatchKeys,
    data: pa.Schema,
    index: file_index.FileIndex,
    round_: int,
) -> Plan:
    candidates = [f for f in index.files.values() if keys.keys and may_hold(f, keys, reader.types)]
    with_dv = [f.path for f in candidates if f.deletion_vector]
    if with_dv:
        raise ConfigurationError(
            f"{ctx.label}: sink 'delta' (mode 'upsert'): file(s) of the table at {sink.uri} "
            f"that may hold the batch's keys have deletion vectors ({', '.join(with_dv[:3])}"
            f"{', ...' if len(with_dv) > 3 else ''}), which eosink's upsert does not rewrite "
            "(the deleted rows would come back). Purge them first (Delta's REORG TABLE ... "
            "APPLY (PURGE), or OPTIMIZE), or disable deletion vectors on the table. Nothing of "
            "this batch was committed."
        )
    removes: list[TableFile] = []
    survivors: list[DeltaFile] = []
    writers: list[PartitionWriter] = []
    key_columns = [c for c in keys.key if c not in state.partition_by]
    try:
        for f in candidates:
            relative = _relative(f, sink.uri)
            # the key columns first: a file whose bounds admitted a key it does not hold is
            # left as it is, having cost only those columns
            found = reader.keys_of(reader.read(relative, key_columns), f.partition_values)
            keep = [k not in keys.keys for k in found]
            if all(keep):
                continue
            removes.append(f)
            if any(keep):
                # the other rows, one record batch at a time, into a file of their own: within
                # this file's key bounds (gathered with other files' rows, the table's untouched
                # rows would end up in one file that every later batch rewrites)
                prefix = f"upsert-{state.attempt}-{round_:02d}-{len(writers):05d}"
                writer = _writer(sink, state, data, prefix)
                writers.append(writer)
                values = tuple(f.partition_values.get(c) for c in state.partition_by)
                for rows in reader.batches(relative, keep):
                    for batch in _as_table_rows(rows, data).to_batches():
                        writer.buffer(values, batch)
                survivors.extend(writer.close(o) for o in writer.files.values())
    except BaseException:
        for writer in writers:
            writer.discard()
        raise
    return Plan(index.version, removes, survivors, len(candidates))


def _conflict(
    plan: Plan, keys: BatchKeys, types: dict[str, pa.DataType]
) -> Any:  # the check log_commit.publish runs on the commits after the plan's version
    removed = {f.path for f in plan.removes}

    def check(newer: list[tuple[int, list[dict[str, Any]]]]) -> str | None:
        for version, actions in newer:
            for action in actions:
                if "metaData" in action or "protocol" in action:
                    return f"commit {version} changed the table's schema or protocol"
                if "remove" in action and action["remove"]["path"] in removed:
                    gone = action["remove"]["path"]
                    return f"commit {version} removed {gone}, which the upsert rewrites"
                if "add" in action and may_hold(file_index.table_file(action["add"]), keys, types):
                    return (
                        f"commit {version} added {action['add']['path']}, which may hold a key "
                        "of the batch"
                    )
        return None

    return check


def _delete(reader: _Reader, paths: list[str]) -> None:
    for relative in paths:
        try:
            reader.fs.delete_file(path_in(reader.base, relative))
        except OSError:
            pass  # an orphan; VACUUM removes it


def commit_upsert(
    sink: DeltaSink,
    ctx: BatchContext,
    state: DeltaState,
    staged: list[DeltaFile],
    proof: Proof,
) -> None:
    """The batch's upsert as one Delta commit (see the module's docstring)."""
    from eosink_delta.complete_mode import check_files_exist

    options = sink.options
    reuse = (ctx.writer_id, ctx.batch_id)
    with viewed(sink.uri, sink.storage, reuse=reuse) as seen:
        view = seen.view
        if view is None:
            raise table_gone(ctx, sink.uri)
        check_txn(ctx, view)
        sink._check_view_compatible(ctx, view, state)  # noqa: SLF001 - the sink's own check
        check_files_exist(sink.uri, sink.storage, ctx, staged)
        data = _table_data_schema(view, state.partition_by)
        types = {f.name: f.type for f in data}
        reader = _Reader(sink.uri, sink.storage, options.key, state.partition_by, types)
        keys, keep = read_batch_keys(ctx, options, reader, staged)
        adds, replaced = _reduced(sink, state, reader, data, staged, keep)
        staged_paths = {f.path for f in staged}
        crash_point("commit:checked")
        merge = {
            "predicate": " AND ".join(f"target.{c} = source.{c}" for c in options.key),
            "mode": "Upsert",
        }
        for round_ in range(MAX_PLANS):
            index = file_index.files_at(seen.log, view)
            check_txn(ctx, view)
            sink._check_view_compatible(ctx, view, state)  # noqa: SLF001
            if round_:  # another writer may have added columns: the survivors keep them
                data = _table_data_schema(view, state.partition_by)
                reader.types.update({f.name: f.type for f in data})
                types = reader.types
            plan = _plan(sink, state, ctx, reader, keys, data, index, round_)
            crash_point("commit:rewritten")
            if view.version != plan.version:
                # the view moved on meanwhile (another batch of this process committed on the
                # table): publish would check only the commits after it, so plan again
                _delete(reader, [f.path for f in plan.survivors])
                log.info("delta.upsert_replanned", table=sink.uri, reason="the view moved on")
                continue
            commit = log_commit.actions(
                ctx,
                [*plan.survivors, *adds],
                proof,
                state.attempt,
                plan.version,
                removes=plan.removes,
                merge=merge,
            )
            try:
                version = log_commit.publish(
                    seen.log,
                    view,
                    ctx,
                    commit,
                    state.attempt,
                    revalidate=lambda newer: sink._check_view_compatible(  # noqa: SLF001
                        ctx, newer, state
                    ),
                    conflicts=_conflict(plan, keys, types),
                )
            except log_commit.Conflict as exc:
                _delete(reader, [f.path for f in plan.survivors])
                log.info("delta.upsert_replanned", table=sink.uri, reason=str(exc))
                continue
            except AlreadyCommitted:
                # another attempt committed the batch: what this one rewrote is not needed
                _delete(reader, [f.path for f in plan.survivors])
                _delete(reader, [f.path for f in adds if f.path not in staged_paths])
                raise
            file_index.applied(seen.log, version, commit)
            _delete(reader, replaced)
            log.debug(
                "delta.upsert_committed",
                table=sink.uri,
                version=version,
                keys=len(keys.keys),
                files_read=plan.read,
                files_rewritten=len(plan.removes),
            )
            log_commit.after_commit(sink.uri, sink.storage, view, version)
            return
        _delete(reader, [f.path for f in adds if f.path not in staged_paths])
    raise SinkError(
        f"{ctx.label}: the upsert into {sink.uri} conflicted with other writers' commits "
        f"{MAX_PLANS} times in a row; nothing of this batch was committed. Restart the query "
        "(it writes the batch again), and keep concurrent writers off the batch's keys."
    )


def _reduced(
    sink: DeltaSink,
    state: DeltaState,
    reader: _Reader,
    data: pa.Schema,
    staged: list[DeltaFile],
    keep: dict[int, list[bool]],
) -> tuple[list[DeltaFile], list[str]]:
    """The batch's files to add: the staged ones, those holding rows ``order_by`` dropped
    written again without them; and the staged files so replaced (deleted after the commit)."""
    if not keep:
        return list(staged), []
    writer = _writer(sink, state, data, f"reduced-{state.attempt}")
    adds, replaced = [], []
    try:
        for i, f in enumerate(staged):
            if i not in keep:
                adds.append(f)
                continue
            replaced.append(f.path)
            table = reader.read(f.path).filter(pa.array(keep[i], pa.bool_()))
            values = tuple(f.partition_values.get(c) for c in state.partition_by)
            for batch in _as_table_rows(table, data).to_batches():
                writer.buffer(values, batch)
        adds.extend(writer.close(o) for o in writer.files.values())
    except BaseException:
        writer.discard()
        raise
    return adds, replaced
