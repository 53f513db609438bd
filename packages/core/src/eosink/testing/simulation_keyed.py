"""Keyed upserts in generated histories (:mod:`eosink.testing.simulation`): the key column, the
keys a batch carries, and the oracle of a keyed target.

A kit with :attr:`~eosink.testing.simulation.SinkSimulation.simulation_upsert_key` gives every
history's schema that column (int64, after ``id``). Each batch carries distinct keys drawn from
its writer's own range of :data:`KEYS` values, so later batches of a writer replace rows of
earlier ones (and two writers write different keys, as two queries keyed by their own
partitions of a result would). Rows another program appends carry their row id as key: they
meet no stream key. When the sink the kit builds from a history's options is keyed
(its ``upsert_key`` hook names that column), the judge reads the target with
:func:`keyed_mismatch`: each key held once, and for each writer, the rows of the latest batch
that carried each key among a set of visible batches that holds every batch reported committed
and any of the batches in doubt. That is what a replace-by-key table after those commits holds.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

#: Keys each writer's batches draw from: few, so that batches meet on them.
KEYS = 16
#: Batches in doubt of one writer the judge tries every visible subset of (2**this at most).
MAX_DOUBT = 10


def with_key_column(schema: pa.Schema, name: str) -> pa.Schema:
    """``schema`` with the int64 key column ``name`` after ``id``; as every column the kit
    draws, its name ends in its type (``key_int64``)."""
    if not name.endswith("_int64") or name in schema.names:
        raise ValueError(
            f"simulation_upsert_key {name!r}: name the key column <name>_int64 (e.g. "
            "'key_int64'), unlike the drawn columns c<i>_<type>"
        )
    return schema.insert(1, pa.field(name, pa.int64()))


def batch_keys(writer: int, rows: int) -> st.SearchStrategy[list[int]]:
    """Distinct keys of writer ``writer``'s range for a batch of ``rows`` rows."""
    low = writer * KEYS
    return st.lists(st.integers(low, low + KEYS - 1), min_size=rows, max_size=rows, unique=True)


def set_column(batch: pa.RecordBatch, name: str, values: list[int]) -> pa.RecordBatch:
    """``batch`` with column ``name`` holding ``values``."""
    i = batch.schema.get_field_index(name)
    column = pa.array(values, type=batch.schema.field(name).type)
    return batch.set_column(i, batch.schema.field(name), column)


def keyed_mismatch(
    held: Iterable[tuple[tuple[int, int], tuple]],
    batches: dict[int, list[int]],
    status: Callable[[int, int], str | None],
    expected: Callable[[int, int], Iterable[tuple]],
    key_index: int,
) -> str | None:
    """What is wrong with a keyed target, or ``None``.

    ``held``: (the (writer, batch) a row's id names, the row's comparable tuple) per row read;
    ``batches``: each writer's written batch ids; ``status``: ``"committed"`` for a batch
    reported committed; ``expected(writer, batch)``: the rows it wrote; ``key_index``: where
    the key sits in a row tuple.
    """
    by_key: dict[Any, tuple] = {}
    held_by_writer: dict[int, dict[Any, tuple]] = {}
    for (writer, _), row in held:
        key = row[key_index]
        if key in by_key:
            return f"key {key} is held twice: {by_key[key]} and {row}"
        by_key[key] = row
        held_by_writer.setdefault(writer, {})[key] = row
    unknown = set(held_by_writer) - set(batches)
    if unknown:
        return f"readers see rows of writers that wrote none: {sorted(unknown)}"
    for writer, ids in sorted(batches.items()):
        got = held_by_writer.get(writer, {})
        sure = [b for b in ids if status(writer, b) == "committed"]
        doubt = [b for b in ids if status(writer, b) != "committed"][-MAX_DOUBT:]
        tried = None
        for n in range(len(doubt) + 1):
            for chosen in itertools.combinations(doubt, n):
                tried = _upserted(sorted(sure + list(chosen)), writer, expected, key_index)
                if tried == got:
                    break
            else:
                continue
            break
        else:
            want = _upserted(sure, writer, expected, key_index)
            lost = sorted(set(want.items()) - set(got.items()))
            extra = sorted(set(got.items()) - set(want.items()))
            return (
                f"writer {writer}: no set of its visible batches (committed {sure}, in doubt "
                f"{doubt}) upserts to what readers see; against the committed ones alone, "
                f"{len(lost)} rows missing or stale (e.g. {lost[:2]}), {len(extra)} extra "
                f"(e.g. {extra[:2]})"
            )
    return None


def _upserted(
    visible: list[int],
    writer: int,
    expected: Callable[[int, int], Iterable[tuple]],
    key_index: int,
) -> dict[Any, tuple]:
    """Per key, the row of the latest of ``visible`` (batch ids, ascending) that carried it."""
    table: dict[Any, tuple] = {}
    for batch in visible:
        for row in expected(writer, batch):
            table[row[key_index]] = row
    return table
