"""The Cypress write commands: ``set`` and ``remove``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cypress import (
    READ_ONLY_ATTRS,
    REMOVED,
    VALUE_TYPES,
)
from ..errors import (
    RESOLVE_ERROR,
    YtError,
)
from ..yson import unwrap
from .base import CommandsBase, _b, _s, _set_in, command

if TYPE_CHECKING:
    from ..nodes import Node


class NodeWrites(CommandsBase):
    def _ensure_parent(
        self, node: Node, rest: list[str], tx: str | None, recursive: bool, text: str
    ) -> tuple[Node, str]:
        """Create the missing intermediate map nodes; returns (parent, final_key)."""
        if node.type != "map_node":
            raise YtError(
                f"Node {self.cypress.path_of(node, tx)} cannot have children",
                RESOLVE_ERROR,
                {"path": text},
            )
        if len(rest) > 1 and not recursive:
            raise YtError(
                f"Node {self.cypress.path_of(node, tx)} has no child with key {rest[0]!r}",
                RESOLVE_ERROR,
                {"path": text},
            )
        parent = node
        for k in rest[:-1]:
            child = self.cypress.new_node("map_node", tx)
            self.cypress.link_child(parent, k, child, tx)
            parent = child
        return parent, rest[-1]

    @command("set")
    def set(self, params: dict[str, Any], input_data: Any) -> dict[str, Any]:
        tx = self.tx(params)
        path = params["path"]
        value = input_data
        recursive = _b(params, "recursive")
        force = _b(params, "force")
        node, rest, attr_path, text = self.cypress.resolve(path, tx, missing_ok=True)
        c = self.cypress
        if attr_path is not None:
            if rest:
                if node.type in VALUE_TYPES:
                    raise YtError(
                        "Setting attributes inside document values is not supported",
                        1,
                    )
                raise YtError(
                    f"Node {c.path_of(node, tx)} has no child with key {rest[0]!r}",
                    RESOLVE_ERROR,
                    {"path": text},
                )
            if attr_path == []:
                raise YtError("Setting all attributes at once is not supported", 1, {"path": text})
            name = attr_path[0]
            if name in READ_ONLY_ATTRS:
                raise YtError(
                    f"Attribute {name!r} cannot be set", 1, {"path": text, "attribute": name}
                )
            self._check_special_attribute(node, name, value, tx)
            if len(attr_path) > 1:
                st = c.view(node, tx)
                if name not in st.attrs:
                    raise YtError(f"Attribute {name!r} is not found", RESOLVE_ERROR, {"path": text})
                value = _set_in(st.attrs[name], attr_path[1:], value, text)
            c.write_state(node, tx, attrs={name: value}, lock_mode="shared", attribute_key=name)
            if node.dyn is not None and name in ("atomicity", "commit_ordering"):
                setattr(node.dyn, name, _s(value))
            return {}
        if rest:
            if node.type in VALUE_TYPES:
                st = c.view(node, tx)
                c.write_state(node, tx, value=_set_in(st.value, rest, value, text))
                return {}
            parent, key = self._ensure_parent(node, rest, tx, recursive, text)
            child = c.build_from_value(value, tx)
            c.link_child(parent, key, child, tx)
            return {}
        if node.id == c.root_id:
            raise YtError("Cannot replace the root node", 1, {"path": text})
        v, attrs = unwrap(value)
        if node.type == "document":
            c.write_state(node, tx, value=value)
            return {}
        if node.type == "map_node" and isinstance(v, dict):
            c.take_lock(node, tx, "exclusive")
            st = c.view(node, tx)
            for k, cid in list(st.children.items()):
                c.unlink_child(node, k, tx)
                c.mark_removed(c.nodes[cid], tx)
            for k, x in v.items():
                c.link_child(node, k, c.build_from_value(x, tx), tx)
            if attrs:
                c.write_state(node, tx, attrs=dict(attrs), lock_mode=None)
            return {}
        if node.type in VALUE_TYPES and not isinstance(v, dict):
            c.write_state(node, tx, value=value)
            return {}
        if not force:
            raise YtError(
                f'Cannot set value of node {text} of type {node.type!r}; use "force" to replace it',
                1,
                {"path": text},
            )
        parent = c.nodes[node.parent_id]
        key = node.key
        c.unlink_child(parent, key, tx)
        c.mark_removed(node, tx)
        c.link_child(parent, key, c.build_from_value(value, tx), tx)
        return {}

    def _check_special_attribute(self, node: Node, name: str, value: Any, tx: str | None) -> None:
        if (
            node.dyn is not None
            and name in ("atomicity", "commit_ordering")
            and node.dyn.any_not_unmounted()
        ):
            raise YtError(f"Attribute {name!r} can only be changed for an unmounted table", 1)

    @command("remove")
    def remove(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        tx = self.tx(params)
        path = params["path"]
        recursive = _b(params, "recursive")
        force = _b(params, "force")
        c = self.cypress
        try:
            node, rest, attr_path, text = c.resolve(path, tx, missing_ok=True)
        except YtError as e:
            if force and e.code == RESOLVE_ERROR:
                return {}
            raise
        if rest and node.type not in VALUE_TYPES:
            if force:
                return {}
            raise YtError(
                f"Node {c.path_of(node, tx)} has no child with key {rest[0]!r}",
                RESOLVE_ERROR,
                {"path": text},
            )
        if attr_path is not None:
            if attr_path == []:
                raise YtError("Cannot remove all attributes", 1)
            name = attr_path[0]
            st = c.view(node, tx)
            if name not in st.attrs:
                if force:
                    return {}
                if name in READ_ONLY_ATTRS:
                    raise YtError(f"Attribute {name!r} cannot be removed", 1, {"path": text})
                raise YtError(f"Attribute {name!r} is not found", RESOLVE_ERROR, {"path": text})
            if len(attr_path) > 1:
                new = _set_in(st.attrs[name], attr_path[1:], None, text, remove=True)
                c.write_state(node, tx, attrs={name: new}, lock_mode="shared", attribute_key=name)
            else:
                c.write_state(
                    node, tx, attrs={name: REMOVED}, lock_mode="shared", attribute_key=name
                )
            return {}
        if rest:
            st = c.view(node, tx)
            try:
                new = _set_in(st.value, rest, None, text, remove=True)
            except YtError:
                if force:
                    return {}
                raise
            c.write_state(node, tx, value=new)
            return {}
        if node.id == c.root_id:
            raise YtError("Cannot remove the root node", 1, {"path": text})
        if node.type == "map_node" and c.view(node, tx).children and not recursive:
            raise YtError(f"Cannot remove non-empty composite node {text}", 1, {"path": text})
        parent = c.nodes[node.parent_id]
        c.unlink_child(parent, node.key, tx)
        c.mark_removed(node, tx)
        return {}
