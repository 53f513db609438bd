"""The key index of a sorted dynamic table: a sorted set in blocks.

A flat list kept sorted with ``bisect.insort`` moves every later key on each insert, so filling
a table of n rows costs O(n^2): a million-row benchmark spent its hour in that memmove. Keys
here live in blocks of at most ``2 * LOAD`` sorted keys, found by bisecting the blocks'
maxima: an insert costs O(log n + LOAD), a scan stays a plain walk in key order. Keys are
never removed (a deleted row keeps its key, with a tombstone version), so there is no
removal, and equal keys are stored once.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

#: Keys per block after a split; a block splits when it grows past twice this.
LOAD = 512


class SortedKeys:
    """A sorted set of mutually comparable keys (the sort tuples of ``schema.key_of``)."""

    def __init__(self, keys: Iterable[Any] = ()) -> None:
        ordered = sorted(set(keys))
        self._blocks: list[list[Any]] = [
            ordered[i : i + LOAD] for i in range(0, len(ordered), LOAD)
        ]
        self._maxes: list[Any] = [block[-1] for block in self._blocks]
        self._len = len(ordered)

    def add(self, key: Any) -> None:
        """Insert ``key`` in order; a key already present is left as it is."""
        maxes = self._maxes
        if not maxes:
            self._blocks.append([key])
            maxes.append(key)
            self._len = 1
            return
        i = bisect_left(maxes, key)
        if i == len(maxes):  # past every key: the common case of keys written in order
            i -= 1
            block = self._blocks[i]
            block.append(key)
            maxes[i] = key
        else:
            block = self._blocks[i]
            j = bisect_left(block, key)
            if block[j] == key:
                return
            block.insert(j, key)
        self._len += 1
        if len(block) > 2 * LOAD:
            self._blocks[i : i + 1] = [block[:LOAD], block[LOAD:]]
            maxes[i : i + 1] = [block[LOAD - 1], block[-1]]

    def __contains__(self, key: Any) -> bool:
        i = bisect_left(self._maxes, key)
        if i == len(self._maxes):
            return False
        block = self._blocks[i]
        return block[bisect_left(block, key)] == key

    def __iter__(self) -> Iterator[Any]:
        return chain.from_iterable(self._blocks)

    def __len__(self) -> int:
        return self._len

    def copy(self) -> SortedKeys:
        """An independent copy (a table copied in Cypress gets its own index)."""
        out = SortedKeys()
        out._blocks = [list(block) for block in self._blocks]
        out._maxes = list(self._maxes)
        out._len = self._len
        return out
