"""The key index of sorted dynamic tables against a plain sorted set."""

import random

import pytest

from eosink_yt_emulator.sortedkeys import LOAD, SortedKeys


@pytest.mark.parametrize("order", ["ascending", "descending", "random"])
def test_keys_stay_sorted_and_unique(order: str) -> None:
    keys = [(i // 7, f"k{i % 7}") for i in range(5 * LOAD + 3)]
    if order == "descending":
        keys.reverse()
    elif order == "random":
        random.Random(7).shuffle(keys)
    index = SortedKeys()
    for key in keys + keys[::3]:  # every third key written twice
        index.add(key)
    assert list(index) == sorted(set(keys))
    assert len(index) == len(set(keys))
    assert all(key in index for key in keys[::11])
    assert (-1, "") not in index and (10**9, "") not in index


def test_copy_is_independent() -> None:
    index = SortedKeys([(3,), (1,), (2,), (1,)])
    copied = index.copy()
    copied.add((0,))
    index.add((4,))
    assert list(index) == [(1,), (2,), (3,), (4,)]
    assert list(copied) == [(0,), (1,), (2,), (3,)]
