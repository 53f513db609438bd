"""The replay fingerprint ignores order and partitioning and sees changed data."""

import pyarrow as pa

from eosink.fingerprint import fingerprint_batches
from eosink.model import Fingerprint


def batch(ids, names):
    return pa.record_batch({"id": pa.array(ids, pa.int64()), "name": pa.array(names)})


def test_order_and_partitioning_do_not_matter():
    one = fingerprint_batches([batch([1, 2, 3], ["a", "b", None])])
    other = fingerprint_batches([batch([3], [None]), batch([2, 1], ["b", "a"])])
    assert one == other and one.rows == 3


def test_changed_value_or_extra_row_changes_it():
    base = fingerprint_batches([batch([1, 2], ["a", "b"])])
    assert fingerprint_batches([batch([1, 2], ["a", "c"])]) != base
    assert fingerprint_batches([batch([1, 2, 2], ["a", "b", "b"])]) != base
    # values swapped between rows of a column are another batch, not the same one
    assert fingerprint_batches([batch([1, 2], ["b", "a"])]) != base


def test_hex_round_trip():
    fp = fingerprint_batches([batch([1], ["a"])])
    assert Fingerprint.from_hex(fp.hex()) == fp


def nested(lists, structs, maps):
    return pa.record_batch(
        {
            "l": pa.array(lists, pa.list_(pa.int64())),
            "s": pa.array(structs, pa.struct([("a", pa.int64()), ("b", pa.string())])),
            "m": pa.array(maps, pa.map_(pa.string(), pa.int64())),
        }
    )


def test_nested_columns_are_fingerprinted():
    """Lists, structs and maps (unhashable in pandas) fingerprint like any column: order and
    partitioning do not matter, a changed nested value does."""
    rows = ([[1, 2], None, []], [{"a": 1, "b": "x"}, None, {"a": None, "b": None}],
            [[("k", 1)], [], None])  # fmt: skip
    one = fingerprint_batches([nested(*rows)])
    other = fingerprint_batches([nested(*(c[2:] for c in rows)), nested(*(c[1::-1] for c in rows))])
    assert one == other and one.rows == 3
    changed = ([[2, 1], None, []], rows[1], rows[2])
    assert fingerprint_batches([nested(*changed)]) != one
    changed = (rows[0], rows[1], [[("k", 2)], [], None])
    assert fingerprint_batches([nested(*changed)]) != one
    changed = (rows[0], [{"a": 1, "b": "y"}, None, {"a": None, "b": None}], rows[2])
    assert fingerprint_batches([nested(*changed)]) != one
    # an empty list is not a null one
    assert fingerprint_batches([nested([None, None, []], *rows[1:])]) != one
