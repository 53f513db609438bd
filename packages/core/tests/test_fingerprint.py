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
