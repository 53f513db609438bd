"""Cypress writes: new nodes, links between them, and versioned changes of their state."""

from __future__ import annotations

import copy
from typing import Any

from .common import now_iso
from .errors import (
    YtError,
    not_supported_by_virtual_node,
)
from .nodes import (
    REMOVED,
    VIRTUAL_MAP_TYPES,
    Node,
    NodeState,
    Version,
    apply_delta,
)
from .yson import Uint64, unwrap


class CypressWrites:
    """Node creation and changes, a part of ``Cypress`` (its state lives there)."""

    # -------------------------------------------------------------- node creation

    def new_node(self, node_type: str, tx: str | None) -> Node:
        """A new node, visible only in ``tx`` until ``tx`` commits."""
        node = Node(node_type, created_in=tx or None)
        self.nodes[node.id] = node
        f = self._frame()
        if f is not None:
            f["new"].add(node.id)
        if tx:
            v = self.version(node, tx)
            v.attrs = {}
            self.take_lock(node, tx, "exclusive")
        return node

    def link_child(self, parent: Node, key: str, child: Node, tx: str | None) -> None:
        """Attach ``child`` under ``parent``/``key`` (shared child_key lock on parent)."""
        self.take_lock(parent, tx, "shared", child_key=key)
        self._save(parent)
        self._save(child)
        child.parent_id = parent.id
        child.key = key
        if tx:
            self.version(parent, tx).children[key] = child.id
        else:
            st = parent.trunk
            parent.trunk = NodeState(
                st.attrs, dict(st.children, **{key: child.id}), st.value, st.chunks
            )
            parent.revision = self.state.next_revision()

    def unlink_child(self, parent: Node, key: str, tx: str | None) -> None:
        """Remove ``key`` from ``parent``'s children in ``tx`` (a shared lock on the key)."""
        self.take_lock(parent, tx, "shared", child_key=key)
        self._save(parent)
        if tx:
            self.version(parent, tx).children[key] = REMOVED
        else:
            st = parent.trunk
            children = dict(st.children)
            children.pop(key, None)
            parent.trunk = NodeState(st.attrs, children, st.value, st.chunks)
            parent.revision = self.state.next_revision()

    def write_state(
        self,
        node: Node,
        tx: str | None,
        attrs: dict[str, Any] | None = None,
        value: Any = REMOVED,
        chunks: list[Any] | None = None,
        chunks_mode: str | None = None,
        lock_mode: str | None = "exclusive",
        attribute_key: str | None = None,
    ) -> None:
        """Apply a change to ``node`` in ``tx`` after taking the implied lock."""
        if lock_mode:
            self.take_lock(node, tx, lock_mode, attribute_key=attribute_key)
        self._save(node)
        if tx:
            v = self.version(node, tx)
            if attrs:
                v.attrs.update(attrs)
            if value is not REMOVED:
                v.value_set = True
                v.value = value
            if chunks_mode == "replace":
                v.chunks_mode = "replace"
                v.chunks = list(chunks)
            elif chunks_mode == "append":
                if v.chunks_mode is None:
                    v.chunks_mode = "append"
                    v.chunks = list(chunks)
                else:
                    v.chunks = v.chunks + list(chunks)
        else:
            d = Version()
            if attrs:
                d.attrs = dict(attrs)
            if value is not REMOVED:
                d.value_set = True
                d.value = value
            d.chunks_mode = chunks_mode
            d.chunks = list(chunks or [])
            node.trunk = apply_delta(node.trunk, d)
            node.revision = self.state.next_revision()
            node.modification_time = now_iso()

    def mark_removed(self, node: Node, tx: str | None) -> None:
        """Remove ``node`` and its subtree (exclusive locks on all of them)."""
        for n in self.subtree(node, tx):
            self._check_removable(n, tx)
            self.take_lock(n, tx, "exclusive")
        for n in self.subtree(node, tx):
            self._save(n)
            if tx:
                self.version(n, tx).removed = True
            else:
                n.dead = True

    def _check_removable(self, node: Node, tx: str | None) -> None:
        """Refuse to remove a virtual map node or a table whose tablets are not unmounted."""
        if node.type in VIRTUAL_MAP_TYPES:
            # Built-in system nodes cannot be removed (nor anything containing them).
            raise not_supported_by_virtual_node(self.path_of(node, tx), self.path_of(node, tx))
        if node.dyn is not None and node.dyn.any_not_unmounted():
            raise YtError(
                f"Cannot remove table {self.path_of(node, tx)} since not all of its tablets are "
                'in "unmounted" state',
                1,
                {"tablet_state": node.dyn.table_state()},
            )

    def subtree(self, node: Node, tx: str | None) -> list[Node]:
        """``node`` and every node below it as ``tx`` sees them."""
        out = [node]
        if node.type == "map_node":
            for cid in self.view(node, tx).children.values():
                child = self.nodes.get(cid)
                if child is not None:
                    out.extend(self.subtree(child, tx))
        return out

    # -------------------------------------------------------------- values <-> nodes

    def build_from_value(self, value: Any, tx: str | None) -> Node:
        """Create nodes representing a YSON value (what ``set`` on a new path does)."""
        value, attrs = unwrap(value)
        if isinstance(value, dict):
            node = self.new_node("map_node", tx)
            for k, x in value.items():
                child = self.build_from_value(x, tx)
                self.link_child(node, k, child, tx)
        else:
            if isinstance(value, bool):
                t = "boolean_node"
            elif isinstance(value, Uint64):
                t = "uint64_node"
            elif isinstance(value, int):
                t = "int64_node"
            elif isinstance(value, float):
                t = "double_node"
            elif isinstance(value, (str, bytes)):
                t = "string_node"
            elif isinstance(value, list):
                t = "list_node"
            else:
                t = "document"
            node = self.new_node(t, tx)
            self.write_state(node, tx, value=value, lock_mode=None)
        if attrs:
            self.write_state(node, tx, attrs=dict(attrs), lock_mode=None)
        return node

    def clone(self, node: Node, tx: str | None, dst_tx: str | None) -> Node:
        """Deep copy of a subtree as new nodes (new ids), as ``copy``/``move`` do."""
        if node.type in VIRTUAL_MAP_TYPES:
            raise not_supported_by_virtual_node(self.path_of(node, tx), self.path_of(node, tx))
        st = self.view(node, tx)
        new = self.new_node(node.type, dst_tx)
        chunks = list(st.chunks)
        self.write_state(
            new,
            dst_tx,
            attrs=copy.deepcopy(st.attrs),
            value=st.value,
            chunks=chunks,
            chunks_mode="replace",
            lock_mode=None,
        )
        if node.dyn is not None:
            new.dyn = node.dyn.clone_for(new)
        if node.type == "map_node":
            for k, cid in st.children.items():
                child = self.nodes[cid]
                self.link_child(new, k, self.clone(child, tx, dst_tx), dst_tx)
        return new
