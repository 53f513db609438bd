"""The objects of the node tree: nodes, their states and per-transaction versions, locks.

See ``cypress.py`` for the versioning model these implement.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from . import common
from .common import new_id, now_iso

REMOVED = object()

# System attributes users may not set with ``set``.
READ_ONLY_ATTRS = {
    "id",
    "type",
    "key",
    "path",
    "parent_id",
    "row_count",
    "chunk_count",
    "sorted",
    "sorted_by",
    "key_columns",
    "dynamic",
    "schema",
    "tablet_state",
    "tablets",
    "tablet_count",
    "data_weight",
    "revision",
    "content_revision",
    "creation_time",
    "modification_time",
    "access_time",
    "locks",
    "lock_count",
    "lock_mode",
    "unique_keys",
    "uncompressed_data_size",
    "compressed_data_size",
    "ref_counter",
    "resource_usage",
    "count",
    "schema_mode",
    "value",
    "chunk_ids",
    "builtin",
    "trimmed_row_count",
    "tablet_statistics",
    "expected_tablet_state",
    "retained_timestamp",
    "unflushed_timestamp",
}

SCALAR_TYPES = ("string_node", "int64_node", "uint64_node", "double_node", "boolean_node")
VALUE_TYPES = SCALAR_TYPES + ("list_node", "document")

# Virtual map nodes: their children are not stored but computed from live state (see
# ``Commands``).  "A list of all system transactions can be found in Cypress at
# //sys/transactions ... A list of all topmost transactions is available at
# //sys/topmost_transactions" (https://ytsaurus.tech/docs/en/user-guide/storage/transactions).
VIRTUAL_MAP_TYPES = ("transaction_map", "topmost_transaction_map")
VIRTUAL_MAPS = (
    ("transactions", "transaction_map"),
    ("topmost_transactions", "topmost_transaction_map"),
)


class NodeState:
    """Full (resolved) state of a node.  Containers are never mutated in place."""

    __slots__ = ("attrs", "children", "value", "chunks")

    def __init__(
        self,
        attrs: dict[str, Any] | None = None,
        children: dict[str, str] | None = None,
        value: Any = None,
        chunks: list[Any] | None = None,
    ) -> None:
        self.attrs = attrs if attrs is not None else {}
        self.children = children if children is not None else {}
        self.value = value
        self.chunks = chunks if chunks is not None else []

    def copy(self) -> NodeState:
        return NodeState(dict(self.attrs), dict(self.children), self.value, list(self.chunks))

    def rows(self) -> Iterator[Any]:
        for chunk in self.chunks:
            yield from chunk


class Version:
    """Changes of one node made in one transaction (a delta over its parent's view)."""

    __slots__ = (
        "attrs",
        "children",
        "value_set",
        "value",
        "chunks_mode",
        "chunks",
        "snapshot",
        "removed",
    )

    def __init__(self) -> None:
        self.attrs = {}
        self.children = {}
        self.value_set = False
        self.value = None
        self.chunks_mode = None  # None | "replace" | "append"
        self.chunks = []
        self.snapshot = None
        self.removed = False

    def is_empty(self) -> bool:
        return not (
            self.attrs or self.children or self.value_set or self.chunks_mode or self.removed
        )


def _with_changes(base: dict, changes: dict) -> dict:
    """A copy of ``base`` with ``changes`` applied (``REMOVED`` deletes a key)."""
    out = dict(base)
    for k, x in changes.items():
        if x is REMOVED:
            out.pop(k, None)
        else:
            out[k] = x
    return out


def apply_delta(state: NodeState, v: Version) -> NodeState:
    s = NodeState(state.attrs, state.children, state.value, state.chunks)
    if v.attrs:
        s.attrs = _with_changes(s.attrs, v.attrs)
    if v.children:
        s.children = _with_changes(s.children, v.children)
    if v.value_set:
        s.value = v.value
    if v.chunks_mode == "replace":
        s.chunks = list(v.chunks)
    elif v.chunks_mode == "append":
        s.chunks = s.chunks + v.chunks
    return s


def merge_delta(target: Version, v: Version) -> None:
    for k, x in v.attrs.items():
        target.attrs[k] = x
    for k, x in v.children.items():
        target.children[k] = x
    if v.value_set:
        target.value_set = True
        target.value = v.value
    if v.chunks_mode == "replace":
        target.chunks_mode = "replace"
        target.chunks = list(v.chunks)
    elif v.chunks_mode == "append":
        if target.chunks_mode is None:
            target.chunks_mode = "append"
            target.chunks = list(v.chunks)
        else:
            target.chunks = target.chunks + v.chunks
    if v.removed:
        target.removed = True


class Lock:
    __slots__ = (
        "id",
        "tx",
        "mode",
        "child_key",
        "attribute_key",
        "state",
        "node_id",
        "implicit",
        "creation_time",
    )

    def __init__(
        self,
        tx: str | None,
        mode: str,
        node_id: str,
        child_key: str | None = None,
        attribute_key: str | None = None,
        state: str = "acquired",
        implicit: bool = False,
    ) -> None:
        self.id = new_id(common.TYPE_LOCK)
        self.tx = tx
        self.mode = mode
        self.node_id = node_id
        self.child_key = child_key
        self.attribute_key = attribute_key
        self.state = state
        self.implicit = implicit
        self.creation_time = now_iso()

    def attributes(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "type": "lock",
            "state": self.state,
            "transaction_id": self.tx,
            "mode": self.mode,
            "node_id": self.node_id,
            "implicit": self.implicit,
            "creation_time": self.creation_time,
        }
        if self.child_key is not None:
            out["child_key"] = self.child_key
        if self.attribute_key is not None:
            out["attribute_key"] = self.attribute_key
        return out


class Node:
    def __init__(self, node_type: str, created_in: str | None = None) -> None:
        self.id = new_id(common.NODE_TYPE_CODES.get(node_type, common.TYPE_DOCUMENT))
        self.type = node_type
        self.created_in = created_in
        self.trunk = None if created_in else NodeState()
        self.versions = {}
        self.locks = []
        self.pending = []
        self.dead = False
        self.creation_time = now_iso()
        self.modification_time = self.creation_time
        self.revision = 0
        # Non-transactional dynamic-table state (tablets, stores); see dynamic.py.
        self.dyn = None
