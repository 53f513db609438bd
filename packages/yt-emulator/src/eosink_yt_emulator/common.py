"""Object ids, timestamps and small helpers shared by the emulator modules.

Object ids have the YT shape ``a-b-c-d`` (four hex parts) with the object type in
the low 16 bits of the third part and a cell tag above it; the client tells master
from tablet transactions by exactly these bits (see the shared notes and
https://ytsaurus.tech/docs/en/user-guide/storage/objects).
"""

from __future__ import annotations

import datetime
import itertools
import random
import threading
from typing import Any

# EObjectType values used by the emulator.
TYPE_TRANSACTION = 1
TYPE_ATOMIC_TABLET_TRANSACTION = 2
TYPE_NON_ATOMIC_TABLET_TRANSACTION = 3
TYPE_NESTED_TRANSACTION = 4
TYPE_LOCK = 200
TYPE_STRING_NODE = 300
TYPE_INT64_NODE = 301
TYPE_DOUBLE_NODE = 302
TYPE_MAP_NODE = 303
TYPE_LIST_NODE = 304
TYPE_BOOLEAN_NODE = 305
TYPE_UINT64_NODE = 306
TYPE_FILE = 400
TYPE_TABLE = 401
TYPE_LINK = 417
TYPE_TRANSACTION_MAP = 407
TYPE_TOPMOST_TRANSACTION_MAP = 418
TYPE_DOCUMENT = 421
TYPE_OPERATION = 1000

NODE_TYPE_CODES = {
    "string_node": TYPE_STRING_NODE,
    "int64_node": TYPE_INT64_NODE,
    "double_node": TYPE_DOUBLE_NODE,
    "map_node": TYPE_MAP_NODE,
    "list_node": TYPE_LIST_NODE,
    "boolean_node": TYPE_BOOLEAN_NODE,
    "uint64_node": TYPE_UINT64_NODE,
    "file": TYPE_FILE,
    "table": TYPE_TABLE,
    "link": TYPE_LINK,
    "document": TYPE_DOCUMENT,
    "transaction_map": TYPE_TRANSACTION_MAP,
    "topmost_transaction_map": TYPE_TOPMOST_TRANSACTION_MAP,
}

CELL_TAG = 1

_counter = itertools.count(1)
_counter_lock = threading.Lock()
_rng = random.Random()

NULL_ID = "0-0-0-0"


def new_id(type_code: int) -> str:
    with _counter_lock:
        n = next(_counter)
        h = _rng.getrandbits(32)
    return f"{n:x}-{_rng.getrandbits(16):x}-{(CELL_TAG << 16) | type_code:x}-{h:x}"


def id_type(object_id: str) -> int:
    try:
        return int(object_id.split("-")[2], 16) & 0xFFFF
    except (IndexError, ValueError):
        return -1


def now_iso(ts: float | None = None) -> str:
    if ts is None:
        dt = datetime.datetime.now(datetime.timezone.utc)
    else:
        dt = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Clock:
    """Monotonic YT-style timestamps for dynamic tables (start/commit ts)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        import time

        with self._lock:
            # Physical part in the high bits, a counter in the low 30 bits, as YT does.
            ts = int(time.time()) << 30
            if ts <= self._last:
                ts = self._last + 1
            self._last = ts
            return ts


def to_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.lower() in ("true", "%true", "1", "yes")
    return bool(v)
