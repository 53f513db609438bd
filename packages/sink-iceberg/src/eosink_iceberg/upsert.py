"""Keyed upserts (``mode="upsert"``, ``key``): the batch's rows replace the table's rows of the
same key, in the catalog commit that appends them and records the proof.

The executors stage the batch's files as for an append. At commit the driver reads the key
columns of those files (:func:`batch_keys`: the batch's keys, never the table's), refuses a
null key or two rows on one key (which one would win is Spark's partitioning, not the query),
and the commit replaces the table's rows matching :func:`match_filter` in the snapshot that
appends the files (:func:`eosink_iceberg.transaction.replace_rows`: copy-on-write, the files
whose rows all match dropped, the others rewritten with the rows they keep, pruning by
partition values and column bounds), so a batch costs its own rows plus the files that may
hold its keys. The transaction asserts the branch head it was planned on: a concurrent commit
makes it fail, and it is planned again on the new head (never a lost update); the files the
refused plan rewrote are deleted
(:mod:`eosink_iceberg.sink`).
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from eosink.plugin import ConfigurationError

#: The most values of one ``In`` pyiceberg still prunes files by (its ``IN_PREDICATE_LIMIT``).
IN_LIMIT = 200

#: Keys are matched by value: types whose equality a filter cannot express are refused.
_UNKEYABLE = (pa.types.is_floating, pa.types.is_nested, pa.types.is_binary)


def check_key_columns(key: tuple[str, ...], stream: pa.Schema, table: str) -> None:
    """Refuse key columns the stream lacks or cannot match by value, naming the fix."""
    missing = [k for k in key if k not in stream.names]
    if missing:
        raise ConfigurationError(
            f"sink 'iceberg': key column(s) {missing} are not in the stream's columns "
            f"{stream.names}; select them in the query or fix option key. Nothing was written."
        )
    for name in key:
        kind = stream.field(name).type
        if any(test(kind) for test in _UNKEYABLE):
            raise ConfigurationError(
                f"sink 'iceberg': key column {name!r} of table {table} is {kind}, which rows "
                "cannot be matched by (floats: NaN equals nothing; lists, structs, binary); "
                "key by an integer, string, date, timestamp, decimal or boolean column. "
                "Nothing was written."
            )


def batch_keys(io: Any, paths: Iterable[str], key: tuple[str, ...]) -> pa.Table:
    """The key columns of the batch's staged files, read through the table's FileIO."""
    parts = []
    for path in paths:
        with io.new_input(path).open() as f:
            parts.append(pq.read_table(f, columns=list(key)))
    if not parts:
        return pa.table({})
    return pa.concat_tables(parts)


def check_batch_keys(keys: pa.Table, key: tuple[str, ...], label: str) -> None:
    """Refuse a null key and two rows on one key, before anything is committed."""
    if not keys.num_rows:
        return
    nulls = sum(keys.column(k).null_count for k in key)
    if nulls:
        raise ConfigurationError(
            f"{label}: {nulls} null value(s) in key column(s) {list(key)}: a null key matches "
            "no row (filter them out in the query). Nothing was written."
        )
    counted = keys.group_by(list(key)).aggregate([([], "count_all")])
    doubled = counted.filter(pc.greater(counted.column("count_all"), 1))
    if doubled.num_rows:
        example = {k: doubled.column(k)[0].as_py() for k in key}
        raise ConfigurationError(
            f"{label}: {doubled.num_rows} key(s) come in more than one row of the batch, e.g. "
            f"{example} ({doubled.column('count_all')[0].as_py()} rows); which one would win "
            f"is Spark's partitioning: deduplicate the batch by {list(key)} in the query. "
            "Nothing was written."
        )


@attrs.frozen
class BatchMatch:
    """The table's rows a batch replaces: those ``row_filter`` (pyiceberg's) matches.

    ``values`` are the batch's values of each key column, sorted, by which :meth:`may_hold`
    checks a data file's column bounds in a bisection. pyiceberg's own check of an ``In``
    tries each of its values against each file's bounds: O(files x keys) per batch, which
    made an upsert's planning grow with the table. The files it lets through are then
    checked by pyiceberg's evaluator as any scan's are.
    """

    row_filter: Any
    values: dict[str, list[Any]]

    def may_hold(self, schema: Any) -> Callable[[Any], bool]:
        """Whether a data file of a table of ``schema`` may hold one of the batch's keys: for
        every key column, a value of the batch between the file's bounds (a file without
        bounds of a column, or whose bounds do not decode as its current type, may hold any;
        delete files are not judged)."""
        from pyiceberg.conversions import from_bytes
        from pyiceberg.manifest import DataFileContent

        columns = []
        for name, values in self.values.items():
            field = schema.find_field(name)
            columns.append((field.field_id, field.field_type, values))

        def check(data_file: Any) -> bool:
            if data_file.content != DataFileContent.DATA:
                return True
            lowers, uppers = data_file.lower_bounds or {}, data_file.upper_bounds or {}
            for field_id, kind, values in columns:
                if field_id not in lowers or field_id not in uppers:
                    continue
                try:
                    lower = from_bytes(kind, lowers[field_id])
                    upper = from_bytes(kind, uppers[field_id])
                    at = bisect_left(values, lower)
                    if at == len(values) or values[at] > upper:
                        return False
                except (TypeError, ValueError, struct.error):
                    continue
            return True

        return check


def batch_match(keys: pa.Table, key: tuple[str, ...]) -> BatchMatch:
    """The rows of the table the batch's keys replace: a pyiceberg row filter (for one key
    column an ``In``, or an ``Or`` of ``In``s of at most :data:`IN_LIMIT` values each; for
    several, an ``Or`` of one ``And`` of equalities per key), each value pruning files by the
    column's bounds, and the key columns' values."""
    from pyiceberg.expressions import AlwaysFalse, And, EqualTo, In, Or

    if not keys.num_rows:
        return BatchMatch(AlwaysFalse(), {})
    values = {k: _literals(keys.column(k)) for k in key}
    ordered = {k: sorted(set(v)) for k, v in values.items()}
    if len(key) == 1:
        # pyiceberg prunes files by an ``In``'s values only up to 200 of them (beyond, every
        # file "might match" and a batch would read the whole table): an ``Or`` of ``In``s
        # of at most that many each keeps the pruning exact (pyiceberg balances the tree)
        each = ordered[key[0]]
        chunks = [each[i : i + IN_LIMIT] for i in range(0, len(each), IN_LIMIT)]
        terms = [In(key[0], set(chunk)) for chunk in chunks]
    else:
        terms = [And(*(EqualTo(k, values[k][i]) for k in key)) for i in range(keys.num_rows)]
    return BatchMatch(terms[0] if len(terms) == 1 else Or(*terms), ordered)


def _literals(column: pa.ChunkedArray) -> list[Any]:
    """A key column's values as pyiceberg literals take them: dates as days and timestamps as
    microseconds since the epoch (the units Iceberg stores), the others as Python values."""
    if pa.types.is_date(column.type):
        return pc.cast(column, pa.int32()).to_pylist()
    if pa.types.is_timestamp(column.type):
        micros = pc.cast(column, pa.timestamp("us", column.type.tz))
        return pc.cast(micros, pa.int64()).to_pylist()
    return column.to_pylist()
