"""Rows grouped by the text their partition values map to: one folder, one group, each row once.

A partitioned store names each partition by a text: a Hive folder ``day=2024-01-01`` for
Spark's file sources, a ``partitionValues`` string in a Delta add action. Several values can
map to one text (``""`` and null both become Spark's ``__HIVE_DEFAULT_PARTITION__`` folder;
every NaN is ``NaN``), and values that compare equal can map to two (``-0.0`` and ``0.0``).
Grouping rows by one notion of equality (Arrow's ``group_by``) and then picking each group's
rows by another (``pc.equal``, ``is_null``) loses the rows the two notions disagree on and
writes others twice. So a sink groups by the text itself, with :func:`group_by_text`:

1. each partition column is dictionary-encoded exactly (floats by their bits, nulls encoded),
   so no two distinct values share an entry;
2. each entry is mapped to its text by the sink's function (Python runs once per distinct
   value, never per row), and entries with the same text get the same code;
3. the columns' codes are combined into one integer group id per row, and the rows are split
   by that id: integer equality leaves no room for a second opinion.

The text function is the sink's: the core knows no store's rules. :func:`java_number_text`
prints floats as the JVM does (Spark's casts, Delta's partition values), for sinks whose
readers run there.
"""

from __future__ import annotations

import decimal
import math
import struct
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

import attrs
import pyarrow as pa
import pyarrow.compute as pc

#: A sink's rule: the text (any hashable; ``None`` allowed) a value of an Arrow type maps to.
ValueText = Callable[[Any, pa.DataType], Hashable]

Rows = TypeVar("Rows", pa.Table, pa.RecordBatch)

#: Floats are encoded by their bits: Arrow's hashing calls ``-0.0`` and ``0.0`` equal or not
#: depending on the hash bucket, and every NaN equal; the bits are exact.
_BITS = {16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


@attrs.frozen
class PartitionGroups:
    """Every row's group: ``ids[i]`` is row ``i``'s group, ``keys[g]`` the texts of group ``g``.

    Groups are numbered in the order their first row appears; ``keys`` are distinct.
    """

    keys: tuple[tuple[Hashable, ...], ...]
    ids: pa.Array  # int64, one per row, no nulls

    def split(self, rows: Rows) -> Iterator[tuple[tuple[Hashable, ...], Rows]]:
        """``rows`` (the grouped rows, any columns) per group: ``(texts, rows of the group)``.

        Each row lands in exactly one group, once; rows keep their order within a group.
        O(rows) in Arrow (one stable sort by the integer id, one take, zero-copy slices).
        """
        if len(rows) != len(self.ids):
            raise ValueError(f"{len(rows)} rows to split, but {len(self.ids)} were grouped")
        if len(self.keys) <= 1:
            if self.keys:
                yield self.keys[0], rows
            return
        order = pc.sort_indices(self.ids)  # stable: rows keep their order in a group
        ordered = rows.take(order)
        counts = {
            entry["values"]: entry["counts"] for entry in pc.value_counts(self.ids).to_pylist()
        }
        start = 0
        for group, key in enumerate(self.keys):
            yield key, ordered.slice(start, counts[group])
            start += counts[group]


def group_by_text(
    data: pa.Table | pa.RecordBatch, columns: Sequence[str], text: ValueText
) -> PartitionGroups:
    """Group the rows of ``data`` by the texts ``text(value, type)`` of their ``columns``.

    Two rows share a group exactly when every column's value maps to the same text: ``text``
    decides, nothing else (no arithmetic or Arrow equality). ``text`` runs once per distinct
    value of a column (by bits), so it may be slow; everything per row is vectorized.
    """
    if not columns:
        raise ValueError("group_by_text needs at least one column")
    rows = len(data)
    if rows == 0:
        return PartitionGroups(keys=(), ids=pa.array([], pa.int64()))
    ids: pa.Array | None = None
    keys: list[tuple[Hashable, ...]] = []
    for name in columns:
        codes, texts = _column_codes(_whole(data.column(name)), text)
        if ids is None:
            ids, keys = codes, [(t,) for t in texts]
            continue
        width = len(texts)
        combined = pc.add(pc.multiply(ids, width), codes)
        # Renumber after each column: ids stay below the row count, so never overflow.
        encoded = pc.dictionary_encode(combined)
        ids = encoded.indices.cast(pa.int64())
        keys = [keys[v // width] + (texts[v % width],) for v in encoded.dictionary.to_pylist()]
    assert ids is not None
    return PartitionGroups(keys=tuple(keys), ids=ids)


def _whole(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array of plain values (chunks joined, dictionaries decoded)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    # Arrow's dictionary_encode turns a null of a view type into "" (pyarrow 26): use the
    # plain layout, whose encoding keeps nulls apart.
    if pa.types.is_string_view(column.type):
        column = column.cast(pa.large_string())
    elif pa.types.is_binary_view(column.type):
        column = column.cast(pa.large_binary())
    return column


def _column_codes(column: pa.Array, text: ValueText) -> tuple[pa.Array, list[Hashable]]:
    """Per row, the code of its value's text; and the texts by code (first appearance order)."""
    kind = column.type
    exact = column
    if pa.types.is_floating(kind):
        exact = column.view(_BITS[kind.bit_width])
    encoded = pc.dictionary_encode(exact, null_encoding="encode")
    entries = encoded.dictionary
    if pa.types.is_floating(kind):
        entries = entries.view(kind)
    code_of: dict[Hashable, int] = {}
    codes = [code_of.setdefault(text(value, kind), len(code_of)) for value in entries.to_pylist()]
    per_row = pa.array(codes, pa.int64()).take(encoded.indices)
    return per_row, list(code_of)


# -- floats as the JVM prints them -------------------------------------------------------------
def java_number_text(value: float, *, single: bool = False) -> str:
    """``value`` as Java's ``Double.toString`` (``Float.toString`` if ``single``) prints it.

    That is the text Spark's ``cast(x as string)`` gives, so Spark's folder names and Delta's
    partition values (``1.0E20``, ``0.001``, ``NaN``, ``Infinity``, ``-0.0``): the shortest
    digits that read back as the same number (JDK 19's rule, which also considers two digits
    where one would do), plain between 10^-3 and 10^7, else ``d.dddE±n``. Python's ``repr``
    finds the same digits but prints them another way (``1e+20``, ``inf``).
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    digits, exponent = _shortest_digits(abs(value), single)
    # value = 0.d1d2...dn * 10**exponent
    if 1e-3 <= abs(value) < 1e7:
        if exponent <= 0:
            whole, fraction = "0", "0" * -exponent + digits
        elif exponent >= len(digits):
            whole, fraction = digits + "0" * (exponent - len(digits)), ""
        else:
            whole, fraction = digits[:exponent], digits[exponent:]
        return f"{sign}{whole}.{fraction or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent - 1}"


def _as_single(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _reads_back(text: str, value: float, single: bool) -> bool:
    parsed = float(text)
    return (_as_single(parsed) if single else parsed) == value


def _shortest_digits(value: float, single: bool) -> tuple[str, int]:
    """The shortest decimal digits reading back as ``value`` (> 0), with their exponent."""
    chosen = ""
    for precision in range(1, 18):
        candidate = f"{value:.{precision - 1}e}"  # the nearest decimal of that many digits
        if _reads_back(candidate, value, single):
            chosen = candidate
            break
    if not chosen:  # unreachable for finite doubles: 17 digits always read back
        chosen = repr(value)
    one, exponent = _digits(chosen)
    if len(one) == 1:
        # Java picks the closer of the one- and two-digit decimals that read back (4.9E-324).
        two = f"{value:.1e}"
        exact = decimal.Decimal(value)
        if _reads_back(two, value, single) and abs(decimal.Decimal(two) - exact) < abs(
            decimal.Decimal(chosen) - exact
        ):
            return _digits(two)
    return one, exponent


def _digits(text: str) -> tuple[str, int]:
    """``1.50e+03`` -> (``15``, 4): significant digits without trailing zeros, and the exponent
    of ``0.d1d2...`` notation."""
    mantissa, _, power = text.partition("e")
    digits = mantissa.replace(".", "").replace("-", "").rstrip("0") or "0"
    return digits, int(power or 0) + 1
