"""Attributes and values of nodes and of the other objects a path can name.

What ``get``/``list``/``exists`` show of a node: its system attributes (computed from
the live state, as YT computes them), its user attributes, its value; objects named by
``#id`` (transactions, locks, operations) and the virtual maps ``//sys/transactions``.

``//sys/transactions`` lists every active master transaction, nested ones included,
``//sys/topmost_transactions`` those without a parent ("A list of all system transactions can
be found in Cypress at //sys/transactions ... topmost transactions is available at
//sys/topmost_transactions", https://ytsaurus.tech/docs/en/user-guide/storage/transactions).
Tablet transactions are not master objects (https://ytsaurus.tech/docs/en/user-guide/
dynamic-tables/transactions: "Transactions are divided into master transactions and tablet
transactions") and are not listed. Keys are transaction ids; an item is the transaction
object, the same as ``#<id>``: its value is an entity, its attributes are the transaction's.
Committed, aborted and expired transactions disappear at once (expired ones are reaped before
every command).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..common import NULL_ID
from ..cypress import (
    VALUE_TYPES,
    VIRTUAL_MAP_TYPES,
    Node,
)
from ..errors import (
    RESOLVE_ERROR,
    YtError,
)
from ..tables import row_count, table_schema
from ..yson import ENTITY, Attributed, Uint64, unwrap
from .base import CommandsBase, _navigate, _s

if TYPE_CHECKING:
    from ..nodes import NodeState


class AttributeReads(CommandsBase):
    def _virtual_children(self, node: Node) -> dict[str, dict[str, Any]]:
        """The live children of a virtual map node: ``{key: attributes}``."""
        out = {}
        for tx_id in sorted(self.txm.txs):
            t = self.txm.txs[tx_id]
            if t.kind != "master" or t.state != "active":
                continue
            if node.type == "topmost_transaction_map" and t.parent is not None:
                continue
            out[tx_id] = t.describe(self.state)
        return out

    def _virtual_child(
        self, node: Node, rest: list[str], tx: str | None, text: str
    ) -> dict[str, Any]:
        """Attributes of the child ``rest[0]`` of a virtual map node; nothing lies deeper."""
        children = self._virtual_children(node)
        key = rest[0]
        if key not in children:
            raise YtError(
                f"Node {self.cypress.path_of(node, tx)} has no child with key {key!r}",
                RESOLVE_ERROR,
                {"path": text},
            )
        if len(rest) > 1:
            raise YtError(f"Object {key} cannot have children", RESOLVE_ERROR, {"path": text})
        return children[key]

    def system_attributes(
        self, node: Node, tx: str | None, st: NodeState | None = None
    ) -> dict[str, Any]:
        if st is None:
            st = self.cypress.view(node, tx)
        c = self.cypress
        a = {
            "id": node.id,
            "type": node.type,
            "path": c.path_of(node, tx),
            "creation_time": node.creation_time,
            "modification_time": node.modification_time,
            "access_time": node.modification_time,
            "revision": Uint64(node.revision),
            "content_revision": Uint64(node.revision),
            "ref_counter": 1,
            "owner": "root",
            "account": "tmp",
            "lock_count": len(node.locks),
            "lock_mode": self._lock_mode(node, tx),
            "locks": [lk.attributes() for lk in node.locks],
            "builtin": False,
            "inherit_acl": True,
            "acl": [],
        }
        if node.id != c.root_id:
            a["parent_id"] = getattr(node, "parent_id", NULL_ID)
            a["key"] = getattr(node, "key", "")
        if node.type == "map_node":
            a["count"] = len(st.children)
        if node.type in VIRTUAL_MAP_TYPES:
            a["count"] = len(self._virtual_children(node))
        if node.type in VALUE_TYPES:
            pass
        if node.type == "table":
            schema = node.dyn.schema if node.dyn is not None else table_schema(st)
            a["schema"] = schema.to_yson()
            a["schema_mode"] = st.attrs.get(
                "schema_mode", "strong" if node.dyn is not None else "weak"
            )
            a["sorted"] = schema.sorted
            if schema.sorted:
                a["sorted_by"] = list(schema.key_columns)
            a["key_columns"] = list(schema.key_columns)
            a["unique_keys"] = schema.unique_keys
            a["dynamic"] = node.dyn is not None
            if node.dyn is not None:
                dyn = node.dyn
                rows = sum(len(t.rows) for t in dyn.tablets) if not dyn.sorted else dyn.live_rows
                a["row_count"] = rows
                a["chunk_count"] = 1 if rows else 0
                a["tablet_state"] = dyn.table_state()
                a["expected_tablet_state"] = dyn.table_state()
                a["tablet_count"] = len(dyn.tablets)
                a["tablets"] = dyn.tablets_attr()
                a["atomicity"] = dyn.atomicity
                a["commit_ordering"] = dyn.commit_ordering
                a["enable_dynamic_store_read"] = True
                a["retained_timestamp"] = Uint64(0)
                a["unflushed_timestamp"] = Uint64(dyn.last_commit_ts + 1)
            else:
                a["row_count"] = row_count(st)
                a["chunk_count"] = len(st.chunks)
            weight = a["row_count"] * 16
            a["data_weight"] = weight
            a["uncompressed_data_size"] = weight
            a["compressed_data_size"] = weight
            a["replication_factor"] = 3
            a["compression_codec"] = "lz4"
            a["erasure_codec"] = "none"
            a["optimize_for"] = "lookup"
            a["chunk_ids"] = []
        if node.type == "file":
            a["uncompressed_data_size"] = sum(len(c) for c in st.chunks)
            a["compressed_data_size"] = a["uncompressed_data_size"]
            a["chunk_count"] = len(st.chunks)
            a["replication_factor"] = 3
        return a

    def _lock_mode(self, node: Node, tx: str | None) -> str:
        mine = set(self.cypress.chain(tx))
        modes = [lk.mode for lk in node.locks if lk.tx in mine]
        for m in ("exclusive", "shared", "snapshot"):
            if m in modes:
                return m
        return "none"

    def all_attributes(
        self, node: Node, tx: str | None, st: NodeState | None = None
    ) -> dict[str, Any]:
        if st is None:
            st = self.cypress.view(node, tx)
        a = self.system_attributes(node, tx, st)
        for k, v in st.attrs.items():
            if k in ("schema", "schema_mode"):
                continue
            a[k] = v
        return a

    def node_value(self, node: Node, tx: str | None, attributes: Any = None, depth: int = 0) -> Any:
        st = self.cypress.view(node, tx)
        if node.type == "map_node":
            value = {}
            for k, cid in st.children.items():
                child = self.cypress.nodes[cid]
                value[k] = self.node_value(child, tx, attributes, depth + 1)
        elif node.type in VALUE_TYPES:
            value = st.value
            if node.type == "document" and value is None:
                value = ENTITY
        else:
            value = ENTITY
        if attributes:
            allattrs = self.all_attributes(node, tx, st)
            value, old = unwrap(value)
            picked = {k: allattrs[k] for k in attributes if k in allattrs}
            return Attributed(value, picked) if picked else value
        return value

    def _object_read(
        self,
        attrs: dict[str, Any],
        attr_path: list[str] | None,
        attributes: list[str] | None,
        text: str,
    ) -> Any:
        """``get`` of a non-node object given its attributes: the object itself is an
        entity (carrying the requested ``attributes``), ``/@`` all attributes, ``/@a/b`` a
        part of one."""
        if attr_path is None:
            picked = {k: attrs[k] for k in attributes or [] if k in attrs}
            return Attributed(ENTITY, picked) if picked else ENTITY
        if attr_path == []:
            if attributes:
                return {k: attrs[k] for k in attributes if k in attrs}
            return attrs
        if attr_path[0] not in attrs:
            raise YtError(f"Attribute {attr_path[0]!r} is not found", RESOLVE_ERROR, {"path": text})
        return _navigate(attrs[attr_path[0]], attr_path[1:], text)

    def _object(self, path: Any) -> dict[str, Any] | None:
        """Non-node objects addressed by ``#id``: transactions, locks, operations."""
        root = _s(path)
        if not isinstance(root, str) or not root.startswith("#"):
            return None
        obj_id = root[1:].split("/")[0]
        if obj_id in self.cypress.nodes:
            return None
        t = self.txm.txs.get(obj_id)
        if t is not None:
            return t.describe(self.state)
        lock = self.state.locks.get(obj_id)
        if lock is not None:
            return lock.attributes()
        op = self.state.operations.ops.get(obj_id)
        if op is not None:
            return op.attributes()
        return None
