"""The order of rows: YT's total order over values, the keys of rows, sortedness checks."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .errors import SORT_ORDER_VIOLATION, UNIQUE_KEY_VIOLATION, YtError
from .yson import Attributed, Entity, Uint64, dumps


def sort_value(v: Any) -> tuple:
    """Total order over values matching YT's comparison of unversioned values."""
    if isinstance(v, Attributed):
        v = v.value
    if v is None or isinstance(v, Entity):
        return (2, 0)
    if isinstance(v, bool):
        return (6, int(v))
    if isinstance(v, Uint64):
        return (4, int(v))
    if isinstance(v, int):
        return (3, v)
    if isinstance(v, float):
        if math.isnan(v):
            return (5, math.inf, 1)
        return (5, v, 0)
    if isinstance(v, str):
        return (16, v.encode("utf-8"))
    if isinstance(v, bytes):
        return (16, v)
    return (17, dumps(v, binary=True))


def key_of(row: dict[str, Any], key_columns: Sequence[str]) -> tuple:
    """The sort key of a row: what sorted tables and sorted writes compare."""
    return tuple(sort_value(row.get(c)) for c in key_columns)


def check_sorted(
    rows: list[dict[str, Any]],
    key_columns: Sequence[str],
    unique: bool,
    path: str,
    previous_key: Any = None,
) -> tuple | None:
    """Check that ``rows`` follow ``previous_key`` in key order; returns the last key."""
    prev = previous_key
    for row in rows:
        k = key_of(row, key_columns)
        if prev is not None:
            if k < prev:
                raise YtError(
                    f"Sort order violation: {[row.get(c) for c in key_columns]!r} is less than "
                    "the previous key",
                    SORT_ORDER_VIOLATION,
                    {"path": path},
                )
            if unique and k == prev:
                raise YtError(
                    f"Duplicate key {[row.get(c) for c in key_columns]!r} in a table with unique "
                    "keys",
                    UNIQUE_KEY_VIOLATION,
                    {"path": path},
                )
        prev = k
    return prev
