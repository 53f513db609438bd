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

from collections.abc import Iterable
from typing import Any

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


def match_filter(keys: pa.Table, key: tuple[str, ...]) -> Any:
    """The pyiceberg row filter matching the table's rows of the batch's keys (for one key
    column an ``In``, or an ``Or`` of ``In``s of at most :data:`IN_LIMIT` values each; for
    several, an ``Or`` of one ``And`` of equalities per key): each value prunes files by the
    column's bounds."""
    from pyiceberg.expressions import AlwaysFalse, And, EqualTo, In, Or

    if not keys.num_rows:
        return AlwaysFalse()
    values = {k: _literals(keys.column(k)) for k in key}
    if len(key) == 1:
        # pyiceberg prunes files by an ``In``'s values only up to 200 of them (beyond, every
        # file "might match" and a batch would read the whole table): an ``Or`` of ``In``s
        # of at most that many each keeps the pruning exact (pyiceberg balances the tree)
        ordered = sorted(set(values[key[0]]))
        chunks = [ordered[i : i + IN_LIMIT] for i in range(0, len(ordered), IN_LIMIT)]
        terms = [In(key[0], set(chunk)) for chunk in chunks]
        return terms[0] if len(terms) == 1 else Or(*terms)
    terms = [And(*(EqualTo(k, values[k][i]) for k in key)) for i in range(keys.num_rows)]
    return terms[0] if len(terms) == 1 else Or(*terms)


def _literals(column: pa.ChunkedArray) -> list[Any]:
    """A key column's values as pyiceberg literals take them: dates as days and timestamps as
    microseconds since the epoch (the units Iceberg stores), the others as Python values."""
    if pa.types.is_date(column.type):
        return pc.cast(column, pa.int32()).to_pylist()
    if pa.types.is_timestamp(column.type):
        micros = pc.cast(column, pa.timestamp("us", column.type.tz))
        return pc.cast(micros, pa.int64()).to_pylist()
    return column.to_pylist()
