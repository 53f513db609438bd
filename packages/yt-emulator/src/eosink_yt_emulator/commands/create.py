"""The commands that make nodes: ``create``, ``copy``, ``move``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..common import to_bool
from ..cypress import (
    READ_ONLY_ATTRS,
    REMOVED,
    SCALAR_TYPES,
    VALUE_TYPES,
)
from ..dyntable import DynTable
from ..errors import (
    ALREADY_EXISTS,
    RESOLVE_ERROR,
    YtError,
)
from ..schema import Schema
from ..yson import ENTITY, Uint64, unwrap
from .base import CommandsBase, _b, _s, command

if TYPE_CHECKING:
    from ..nodes import Node


class NodeCreation(CommandsBase):
    @command("create")
    def create(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        tx = self.tx(params)
        node_type = _s(params.get("type"))
        path = params.get("path")
        attributes = dict(unwrap(params.get("attributes") or {})[0])
        recursive = _b(params, "recursive")
        ignore_existing = _b(params, "ignore_existing")
        force = _b(params, "force")
        c = self.cypress
        if node_type in ("transaction", "nested_transaction"):
            t = self.txm.start(
                {
                    "type": "master",
                    "transaction_id": tx,
                    "timeout": attributes.pop("timeout", None),
                    "attributes": attributes,
                }
            )
            return {"object_id": t.id}
        if node_type not in ("map_node", "table", "file", "document", "list_node") + SCALAR_TYPES:
            raise YtError(
                f"Creating nodes of type {node_type!r} is not supported by the emulator",
                1,
                {"type": node_type},
            )
        if path is None:
            raise YtError('"path" is required', 1)
        node, rest, attr_path, text = c.resolve(path, tx, missing_ok=True)
        if attr_path is not None:
            raise YtError("Cannot create an attribute", 1, {"path": text})
        if not rest:
            if node.id == c.root_id:
                raise YtError("Node / already exists", ALREADY_EXISTS, {"path": text})
            if ignore_existing and not force:
                if node.type != node_type and not _b(params, "ignore_type_mismatch"):
                    raise YtError(
                        f"{text} already exists and has type {node.type!r} while node of "
                        f"{node_type!r} type is about to be "
                        "created",
                        ALREADY_EXISTS,
                        {"path": text},
                    )
                return {"node_id": node.id}
            if not force:
                raise YtError(f"Node {text} already exists", ALREADY_EXISTS, {"path": text})
            parent = c.nodes[node.parent_id]
            key = node.key
            c.unlink_child(parent, key, tx)
            c.mark_removed(node, tx)
        else:
            if node.type in VALUE_TYPES:
                raise YtError(
                    "Cannot create a node inside a document", RESOLVE_ERROR, {"path": text}
                )
            parent, key = self._ensure_parent(node, rest, tx, recursive, text)
        new = self._make_node(node_type, attributes, tx, text)
        c.link_child(parent, key, new, tx)
        return {"node_id": new.id}

    def _make_node(self, node_type: str, attributes: Any, tx: str | None, text: str) -> Node:
        c = self.cypress
        node = c.new_node(node_type, tx)
        attrs = {}
        value = REMOVED
        if node_type == "table":
            dynamic = to_bool(attributes.pop("dynamic", False))
            schema_value = attributes.pop("schema", None)
            tablet_count = attributes.pop("tablet_count", None)
            pivot_keys = attributes.pop("pivot_keys", None)
            atomicity = _s(attributes.pop("atomicity", "full"))
            commit_ordering = _s(attributes.pop("commit_ordering", "weak"))
            if schema_value is not None:
                schema = Schema.parse(schema_value)
                attrs["schema"] = schema
                attrs["schema_mode"] = "strong"
            else:
                schema = Schema.empty_weak()
                attrs["schema"] = schema
                attrs["schema_mode"] = "weak"
            if dynamic:
                if schema.is_empty():
                    raise YtError(
                        f"Dynamic table {text} must have a non-empty schema", 1, {"path": text}
                    )
                if not schema.strict:
                    raise YtError(
                        f"Dynamic table {text} must have a strict schema", 1, {"path": text}
                    )
                if schema.sorted:
                    explicit_unique = unwrap(schema_value)[1].get("unique_keys")
                    if explicit_unique is False:
                        raise YtError(
                            f"Sorted dynamic table {text} must have unique keys",
                            1,
                            {"path": text},
                        )
                    if not schema.unique_keys:
                        schema = Schema(schema.columns, strict=True, unique_keys=True)
                    if all(col.sort_order for col in schema.columns):
                        raise YtError(
                            "There must be at least one non-key column in sorted dynamic table "
                            f"{text}",
                            1,
                            {"path": text},
                        )
                    for col in schema.columns:
                        if col.sort_order == "descending":
                            raise YtError(
                                "Descending sort order is not supported in dynamic tables", 1
                            )
                if atomicity not in ("full", "none"):
                    raise YtError(f"Invalid atomicity {atomicity!r}", 1)
                count = (
                    len(pivot_keys) if pivot_keys else (int(tablet_count) if tablet_count else 1)
                )
                node.dyn = DynTable(node, schema, count, atomicity, commit_ordering)
                attrs["schema"] = schema
            else:
                if tablet_count is not None:
                    attrs["tablet_count"] = tablet_count
        elif node_type == "document":
            value = attributes.pop("value", ENTITY)
        elif node_type in SCALAR_TYPES or node_type == "list_node":
            default = {
                "string_node": "",
                "int64_node": 0,
                "uint64_node": Uint64(0),
                "double_node": 0.0,
                "boolean_node": False,
                "list_node": [],
            }[node_type]
            value = attributes.pop("value", default)
        for k in list(attributes):
            if k in READ_ONLY_ATTRS:
                raise YtError(f"Attribute {k!r} cannot be set", 1, {"path": text, "attribute": k})
        attrs.update(attributes)
        c.write_state(node, tx, attrs=attrs, value=value, lock_mode=None)
        return node

    def _copy_or_move(self, params: dict[str, Any], move: bool) -> dict[str, Any]:
        tx = self.tx(params)
        c = self.cypress
        src_node, rest, attr_path, src_text = c.resolve(params["source_path"], tx)
        if rest or attr_path is not None:
            raise YtError("Cannot copy or move a part of a node or an attribute", 1)
        if src_node.id == c.root_id:
            raise YtError("Cannot copy or move the root node", 1)
        if src_node.dyn is not None and src_node.dyn.any_not_unmounted():
            states = set(src_node.dyn.states())
            if move or not states <= {"frozen", "unmounted"}:
                raise YtError(
                    f"Cannot {'move' if move else 'copy'} table {src_text} since not all of its "
                    'tablets are in "unmounted" state',
                    1,
                    {"path": src_text},
                )
        dst_node, dst_rest, dst_attr, dst_text = c.resolve(
            params["destination_path"], tx, missing_ok=True
        )
        if dst_attr is not None:
            raise YtError("Cannot copy to an attribute", 1)
        cur = dst_node
        while True:
            if cur.id == src_node.id:
                raise YtError(
                    "Cannot copy or move a node into itself or its descendant",
                    1,
                    {"path": dst_text},
                )
            pid = getattr(cur, "parent_id", None)
            if pid is None:
                break
            cur = c.nodes[pid]
        if not dst_rest:
            if _b(params, "ignore_existing") and not _b(params, "force"):
                return {"node_id": dst_node.id}
            if not _b(params, "force"):
                raise YtError(f"Node {dst_text} already exists", ALREADY_EXISTS, {"path": dst_text})
            if dst_node.id == c.root_id:
                raise YtError("Cannot replace the root node", 1)
            if dst_node.dyn is not None and dst_node.dyn.any_not_unmounted():
                raise YtError(f"Cannot replace table {dst_text} since it is mounted", 1)
            parent = c.nodes[dst_node.parent_id]
            key = dst_node.key
            c.unlink_child(parent, key, tx)
            c.mark_removed(dst_node, tx)
        else:
            parent, key = self._ensure_parent(
                dst_node, dst_rest, tx, _b(params, "recursive"), dst_text
            )
        if move:
            c.take_lock(src_node, tx, "exclusive")
        new = c.clone(src_node, tx, tx)
        c.link_child(parent, key, new, tx)
        if move:
            sp = c.nodes[src_node.parent_id]
            c.unlink_child(sp, src_node.key, tx)
            c.mark_removed(src_node, tx)
        return {"node_id": new.id}

    @command("copy")
    def copy(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self._copy_or_move(params, move=False)

    @command("move")
    def move(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self._copy_or_move(params, move=True)
