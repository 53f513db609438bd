"""The Cypress read commands: ``get``, ``exists``, ``list``."""

from __future__ import annotations

from typing import Any

from ..cypress import (
    VALUE_TYPES,
    VIRTUAL_MAP_TYPES,
    Node,
    parse_ypath,
)
from ..errors import (
    NO_SUCH_METHOD,
    RESOLVE_ERROR,
    YtError,
)
from ..yson import Attributed, unwrap
from .base import CommandsBase, _b, _navigate, _raise, _s, command


class NodeReads(CommandsBase):
    @command("get")
    def get(self, params: dict[str, Any], _: Any) -> Any:
        tx = self.tx(params)
        path = params["path"]
        attributes = params.get("attributes")
        obj = self._object(path)
        if obj is not None:
            _, keys, attr_path = parse_ypath(path)
            if keys:
                raise YtError("Object cannot have children", RESOLVE_ERROR, {"path": _s(path)})
            return self._wrap_value(params, self._object_read(obj, attr_path, attributes, _s(path)))
        node, rest, attr_path, text = self.cypress.resolve(path, tx, virtual_ok=True)
        if node.type in VIRTUAL_MAP_TYPES and rest:
            obj = self._virtual_child(node, rest, tx, text)
            return self._wrap_value(params, self._object_read(obj, attr_path, attributes, text))
        if node.type in VIRTUAL_MAP_TYPES and attr_path is None:
            value = {}
            for key, obj in self._virtual_children(node).items():
                value[key] = self._object_read(obj, None, attributes, text)
            return self._wrap_value(params, value)
        if rest:
            st = self.cypress.view(node, tx)
            value = _navigate(st.value, rest, text)
            if attr_path is not None:
                attrs = unwrap(value)[1]
                value = (
                    attrs
                    if attr_path == []
                    else _navigate(attrs.get(attr_path[0]), attr_path[1:], text)
                )
            return self._wrap_value(params, value)
        if attr_path is not None:
            allattrs = self.all_attributes(node, tx)
            if attr_path == []:
                if attributes:
                    allattrs = {k: allattrs[k] for k in attributes if k in allattrs}
                return self._wrap_value(params, allattrs)
            name = attr_path[0]
            if name not in allattrs:
                raise YtError(f"Attribute {name!r} is not found", RESOLVE_ERROR, {"path": text})
            return self._wrap_value(params, _navigate(allattrs[name], attr_path[1:], text))
        return self._wrap_value(params, self.node_value(node, tx, attributes))

    def _wrap_value(self, params: dict[str, Any], value: Any) -> Any:
        if _b(params, "return_only_value", False):
            return value
        return {"value": value}

    @command("exists")
    def exists(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        tx = self.tx(params)
        path = params["path"]
        obj = self._object(path)
        try:
            if obj is not None:
                _, keys, attr_path = parse_ypath(path)
                if keys:
                    return {"value": False}
                self._object_read(obj, attr_path, None, _s(path))
                return {"value": True}
            node, rest, attr_path, text = self.cypress.resolve(
                path, tx, missing_ok=True, virtual_ok=True
            )
        except YtError as e:
            if e.code == RESOLVE_ERROR:
                return {"value": False}
            raise
        try:
            if node.type in VIRTUAL_MAP_TYPES and rest:
                obj = self._virtual_child(node, rest, tx, text)
                self._object_read(obj, attr_path, None, text)
                return {"value": True}
            if rest:
                if node.type not in VALUE_TYPES:
                    return {"value": False}
                value = _navigate(self.cypress.view(node, tx).value, rest, text)
                if attr_path:
                    _navigate(unwrap(value)[1].get(attr_path[0]), attr_path[1:], text) if attr_path[
                        0
                    ] in unwrap(value)[1] else _raise()
                return {"value": True}
            if attr_path:
                allattrs = self.all_attributes(node, tx)
                if attr_path[0] not in allattrs:
                    return {"value": False}
                _navigate(allattrs[attr_path[0]], attr_path[1:], text)
            return {"value": True}
        except YtError as e:
            if e.code == RESOLVE_ERROR:
                return {"value": False}
            raise

    @command("list")
    def list(self, params: dict[str, Any], _: Any) -> Any:
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx, virtual_ok=True)
        attributes = params.get("attributes")
        if node.type in VIRTUAL_MAP_TYPES and (rest or attr_path is None):
            return self._wrap_value(
                params, self._list_virtual(node, rest, attr_path, attributes, tx, text)
            )
        if attr_path is not None:
            allattrs = self.all_attributes(node, tx)
            if attr_path == []:
                return self._wrap_value(params, sorted(allattrs))
            value = _navigate(allattrs.get(attr_path[0]), attr_path[1:], text)
            return self._wrap_value(params, sorted(unwrap(value)[0]))
        if rest:
            value = unwrap(_navigate(self.cypress.view(node, tx).value, rest, text))[0]
            if not isinstance(value, dict):
                raise YtError(f"Cannot list {text}", 1, {"path": text})
            return self._wrap_value(params, list(value))
        if node.type != "map_node":
            if node.type in VALUE_TYPES and isinstance(
                unwrap(self.cypress.view(node, tx).value)[0], dict
            ):
                return self._wrap_value(params, list(unwrap(self.cypress.view(node, tx).value)[0]))
            raise YtError(f"Node {text} of type {node.type!r} cannot be listed", 1, {"path": text})
        st = self.cypress.view(node, tx)
        out = []
        for k, cid in st.children.items():
            if attributes:
                child = self.cypress.nodes[cid]
                allattrs = self.all_attributes(child, tx)
                picked = {a: allattrs[a] for a in attributes if a in allattrs}
                out.append(Attributed(k, picked) if picked else k)
            else:
                out.append(k)
        return self._wrap_value(params, out)

    def _list_virtual(
        self,
        node: Node,
        rest: list[str],
        attr_path: list[str] | None,
        attributes: list[str] | None,
        tx: str | None,
        text: str,
    ) -> list[Any]:
        """``list`` of a virtual map node (its keys) or of the attributes of one of its
        children; a child itself (a transaction object) is not a map node."""
        if rest:
            obj = self._virtual_child(node, rest, tx, text)
            if attr_path is None:
                raise YtError(
                    f"Method list is not supported by object {rest[0]}",
                    NO_SUCH_METHOD,
                    {"path": text},
                )
            value = unwrap(self._object_read(obj, attr_path, None, text))[0]
            if not isinstance(value, dict):
                raise YtError(f"Cannot list {text}", 1, {"path": text})
            return sorted(value)
        out = []
        for key, obj in self._virtual_children(node).items():
            picked = {a: obj[a] for a in attributes or [] if a in obj}
            out.append(Attributed(key, picked) if picked else key)
        return out
