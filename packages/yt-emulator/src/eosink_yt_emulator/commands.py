"""Command implementations (the driver layer behind the HTTP proxy).

Parameter names and v4 result shapes follow https://ytsaurus.tech/docs/en/api/commands
and the shared notes on what the real client sends: ``get`` with
``return_only_value=%true`` returns the bare value, ``list``/``exists`` wrap it in
``{"value": ...}`` otherwise; ``create``/``copy``/``move`` return ``{"node_id"}``,
``start_transaction`` ``{"transaction_id"}``, ``lock`` ``{"lock_id","node_id","revision"}``,
``start_operation`` ``{"operation_id"}``, ``execute_batch`` ``{"results": [...]}``.
"""

from __future__ import annotations

import copy as copymod
from typing import Any

from .cypress import (
    READ_ONLY_ATTRS,
    VALUE_TYPES,
    SCALAR_TYPES,
    REMOVED,
    VIRTUAL_MAP_TYPES,
    Node,
    parse_ypath,
)
from .dynamic import DynTable
from .errors import (
    YtError,
    RESOLVE_ERROR,
    ALREADY_EXISTS,
    NO_SUCH_METHOD,
    not_supported_by_virtual_node,
)
from .schema import Schema
from .tables import table_schema, row_count
from .yson import Attributed, ENTITY, Uint64, unwrap
from .common import to_bool, NULL_ID


class Tabular:
    """A tabular command result: rows plus optional response parameters."""

    def __init__(self, rows, response_parameters=None):
        self.rows = rows
        self.response_parameters = response_parameters


class Binary:
    def __init__(self, data):
        self.data = data


def _s(v):
    v = unwrap(v)[0]
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _b(params, name, default=False):
    v = params.get(name, default)
    return to_bool(v) if v is not None else default


def _navigate(value, keys, text):
    for k in keys:
        value = unwrap(value)[0]
        if isinstance(value, dict) and k in value:
            value = value[k]
        elif isinstance(value, list):
            try:
                value = value[int(k)]
            except (ValueError, IndexError):
                raise YtError("Cannot resolve %r in %s" % (k, text), RESOLVE_ERROR, {"path": text})
        else:
            raise YtError("Node has no child with key %r" % k, RESOLVE_ERROR, {"path": text})
    return value


def _set_in(value, keys, new, text, remove=False):
    """Return a copy of ``value`` with ``keys`` set to ``new`` (or removed)."""
    value = copymod.deepcopy(value)
    if not keys:
        return new
    holder_val, attrs = unwrap(value)
    root = holder_val
    cur = root
    for k in keys[:-1]:
        c = unwrap(cur)[0]
        if isinstance(c, dict):
            if k not in c:
                raise YtError("Node has no child with key %r" % k, RESOLVE_ERROR, {"path": text})
            cur = c[k]
        elif isinstance(c, list):
            cur = c[int(k)]
        else:
            raise YtError(
                "Cannot navigate into a scalar with key %r" % k, RESOLVE_ERROR, {"path": text}
            )
    last = keys[-1]
    c = unwrap(cur)[0]
    if isinstance(c, dict):
        if remove:
            if last not in c:
                raise YtError("Node has no child with key %r" % last, RESOLVE_ERROR, {"path": text})
            del c[last]
        else:
            c[last] = new
    elif isinstance(c, list):
        if remove:
            del c[int(last)]
        elif last == "end":
            c.append(new)
        else:
            c[int(last)] = new
    else:
        raise YtError("Cannot set a child of a scalar node", RESOLVE_ERROR, {"path": text})
    return Attributed(root, attrs) if attrs else root


# The commands that read virtual map nodes (``//sys/transactions``); every other command that
# names a virtual node or something below it is refused (see ``_refuse_virtual_targets``).
VIRTUAL_READS = ("get", "list", "exists")
# Parameters of the other commands that name Cypress paths.
PATH_PARAMS = ("path", "source_path", "destination_path")


class Commands:
    def __init__(self, state):
        self.state = state
        self.cypress = state.cypress
        self.txm = state.txm
        self.handlers = {
            "get": self.get,
            "set": self.set,
            "exists": self.exists,
            "list": self.list,
            "remove": self.remove,
            "create": self.create,
            "copy": self.copy,
            "move": self.move,
            "lock": self.lock,
            "unlock": self.unlock,
            "concatenate": self.concatenate,
            "start_transaction": self.start_transaction,
            "ping_transaction": self.ping_transaction,
            "commit_transaction": self.commit_transaction,
            "abort_transaction": self.abort_transaction,
            "write_table": self.write_table,
            "read_table": self.read_table,
            "write_file": self.write_file,
            "read_file": self.read_file,
            "mount_table": self.mount_table,
            "unmount_table": self.unmount_table,
            "remount_table": self.remount_table,
            "freeze_table": self.freeze_table,
            "unfreeze_table": self.unfreeze_table,
            "reshard_table": self.reshard_table,
            "alter_table": self.alter_table,
            "insert_rows": self.insert_rows,
            "delete_rows": self.delete_rows,
            "lookup_rows": self.lookup_rows,
            "select_rows": self.select_rows,
            "trim_rows": self.trim_rows,
            "pull_queue": self.pull_queue,
            "get_tablet_infos": self.get_tablet_infos,
            "lock_rows": self.lock_rows,
            "start_operation": self.start_operation,
            "get_operation": self.get_operation,
            "abort_operation": self.abort_operation,
            "complete_operation": self.complete_operation,
            "list_jobs": self.list_jobs,
            "list_operations": self.list_operations,
            "execute_batch": self.execute_batch,
            "check_permission": self.check_permission,
            "generate_timestamp": self.generate_timestamp,
            "get_current_user": self.get_current_user,
            "discover_proxies": self.discover_proxies,
            "get_supported_features": self.get_supported_features,
        }

    def run(self, command, params, input_data=None):
        """Run one command atomically: on error, every Cypress change it made is rolled back."""
        h = self.handlers.get(command)
        if h is None:
            raise YtError(
                "Command %r is not supported by the emulator" % command, 1, {"command": command}
            )
        self._refuse_virtual_targets(command, params)
        self.cypress.begin()
        try:
            result = h(params, input_data)
        except BaseException:
            self.cypress.rollback()
            raise
        self.cypress.commit_journal()
        return result

    def tx(self, params):
        tx = self.txm.normalize(params.get("transaction_id"))
        if tx is not None:
            self.txm.get_master(tx)
        return tx

    def _refuse_virtual_targets(self, command: str, params: dict[str, Any]) -> None:
        """Virtual maps are views of live state, read-only: a command other than a read that
        names one of them (or a path below one) fails before it touches anything."""
        if command in VIRTUAL_READS or command == "execute_batch":
            return  # a batch runs each of its requests through ``run``
        paths = [params[k] for k in PATH_PARAMS if params.get(k) is not None]
        source_paths = params.get("source_paths")
        if isinstance(source_paths, list):
            paths += source_paths
        if not paths:
            return
        tx = self.txm.normalize(params.get("transaction_id"))
        if self.txm.find_master(tx) is None:
            tx = None  # tablet or unknown transactions: the command reports them itself
        for path in paths:
            try:
                node, _, _, text = self.cypress.resolve(path, tx, missing_ok=True, virtual_ok=True)
            except YtError:
                continue  # the command reports its own resolve error
            if node.type in VIRTUAL_MAP_TYPES:
                raise not_supported_by_virtual_node(self.cypress.path_of(node, tx), text)

    # ================================================================ virtual map nodes
    #
    # ``//sys/transactions`` lists every active master transaction, nested ones included,
    # ``//sys/topmost_transactions`` those without a parent ("A list of all system
    # transactions can be found in Cypress at //sys/transactions ... topmost transactions
    # is available at //sys/topmost_transactions",
    # https://ytsaurus.tech/docs/en/user-guide/storage/transactions).  Tablet transactions
    # are not master objects (https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/
    # transactions: "Transactions are divided into master transactions and tablet
    # transactions") and are not listed.  Keys are transaction ids; an item is the
    # transaction object, the same as ``#<id>``: its value is an entity, its attributes
    # are the transaction's.  Committed, aborted and expired transactions disappear at once
    # (expired ones are reaped before every command).

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
                "Node %s has no child with key %r" % (self.cypress.path_of(node, tx), key),
                RESOLVE_ERROR,
                {"path": text},
            )
        if len(rest) > 1:
            raise YtError("Object %s cannot have children" % key, RESOLVE_ERROR, {"path": text})
        return children[key]

    # ================================================================ attributes

    def system_attributes(self, node, tx, st=None):
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
                rows = (
                    sum(len(t.rows) for t in dyn.tablets)
                    if not dyn.sorted
                    else len(list(dyn.scan(2**62)))
                )
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

    def _lock_mode(self, node, tx):
        mine = set(self.cypress.chain(tx))
        modes = [lk.mode for lk in node.locks if lk.tx in mine]
        for m in ("exclusive", "shared", "snapshot"):
            if m in modes:
                return m
        return "none"

    def all_attributes(self, node, tx, st=None):
        if st is None:
            st = self.cypress.view(node, tx)
        a = self.system_attributes(node, tx, st)
        for k, v in st.attrs.items():
            if k in ("schema", "schema_mode"):
                continue
            a[k] = v
        return a

    def node_value(self, node, tx, attributes=None, depth=0):
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
            raise YtError("Attribute %r is not found" % attr_path[0], RESOLVE_ERROR, {"path": text})
        return _navigate(attrs[attr_path[0]], attr_path[1:], text)

    def _object(self, path):
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

    # ================================================================ cypress commands

    def get(self, params, _):
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
                raise YtError("Attribute %r is not found" % name, RESOLVE_ERROR, {"path": text})
            return self._wrap_value(params, _navigate(allattrs[name], attr_path[1:], text))
        return self._wrap_value(params, self.node_value(node, tx, attributes))

    def _wrap_value(self, params, value):
        if _b(params, "return_only_value", False):
            return value
        return {"value": value}

    def exists(self, params, _):
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

    def list(self, params, _):
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
                raise YtError("Cannot list %s" % text, 1, {"path": text})
            return self._wrap_value(params, list(value))
        if node.type != "map_node":
            if node.type in VALUE_TYPES and isinstance(
                unwrap(self.cypress.view(node, tx).value)[0], dict
            ):
                return self._wrap_value(params, list(unwrap(self.cypress.view(node, tx).value)[0]))
            raise YtError(
                "Node %s of type %r cannot be listed" % (text, node.type), 1, {"path": text}
            )
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
                    "Method list is not supported by object %s" % rest[0],
                    NO_SUCH_METHOD,
                    {"path": text},
                )
            value = unwrap(self._object_read(obj, attr_path, None, text))[0]
            if not isinstance(value, dict):
                raise YtError("Cannot list %s" % text, 1, {"path": text})
            return sorted(value)
        out = []
        for key, obj in self._virtual_children(node).items():
            picked = {a: obj[a] for a in attributes or [] if a in obj}
            out.append(Attributed(key, picked) if picked else key)
        return out

    def _ensure_parent(self, node, rest, tx, recursive, text):
        """Create the missing intermediate map nodes; returns (parent, final_key)."""
        if node.type != "map_node":
            raise YtError(
                "Node %s cannot have children" % self.cypress.path_of(node, tx),
                RESOLVE_ERROR,
                {"path": text},
            )
        if len(rest) > 1 and not recursive:
            raise YtError(
                "Node %s has no child with key %r" % (self.cypress.path_of(node, tx), rest[0]),
                RESOLVE_ERROR,
                {"path": text},
            )
        parent = node
        for k in rest[:-1]:
            child = self.cypress.new_node("map_node", tx)
            self.cypress.link_child(parent, k, child, tx)
            parent = child
        return parent, rest[-1]

    def set(self, params, input_data):
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
                    "Node %s has no child with key %r" % (c.path_of(node, tx), rest[0]),
                    RESOLVE_ERROR,
                    {"path": text},
                )
            if attr_path == []:
                raise YtError("Setting all attributes at once is not supported", 1, {"path": text})
            name = attr_path[0]
            if name in READ_ONLY_ATTRS:
                raise YtError(
                    "Attribute %r cannot be set" % name, 1, {"path": text, "attribute": name}
                )
            self._check_special_attribute(node, name, value, tx)
            if len(attr_path) > 1:
                st = c.view(node, tx)
                if name not in st.attrs:
                    raise YtError("Attribute %r is not found" % name, RESOLVE_ERROR, {"path": text})
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
                'Cannot set value of node %s of type %r; use "force" to replace it'
                % (text, node.type),
                1,
                {"path": text},
            )
        parent = c.nodes[node.parent_id]
        key = node.key
        c.unlink_child(parent, key, tx)
        c.mark_removed(node, tx)
        c.link_child(parent, key, c.build_from_value(value, tx), tx)
        return {}

    def _check_special_attribute(self, node, name, value, tx):
        if (
            node.dyn is not None
            and name in ("atomicity", "commit_ordering")
            and node.dyn.any_not_unmounted()
        ):
            raise YtError("Attribute %r can only be changed for an unmounted table" % name, 1)

    def remove(self, params, _):
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
                "Node %s has no child with key %r" % (c.path_of(node, tx), rest[0]),
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
                    raise YtError("Attribute %r cannot be removed" % name, 1, {"path": text})
                raise YtError("Attribute %r is not found" % name, RESOLVE_ERROR, {"path": text})
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
            raise YtError("Cannot remove non-empty composite node %s" % text, 1, {"path": text})
        parent = c.nodes[node.parent_id]
        c.unlink_child(parent, node.key, tx)
        c.mark_removed(node, tx)
        return {}

    def create(self, params, _):
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
                "Creating nodes of type %r is not supported by the emulator" % node_type,
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
                        "%s already exists and has type %r while node of %r type is about to be "
                        "created" % (text, node.type, node_type),
                        ALREADY_EXISTS,
                        {"path": text},
                    )
                return {"node_id": node.id}
            if not force:
                raise YtError("Node %s already exists" % text, ALREADY_EXISTS, {"path": text})
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

    def _make_node(self, node_type, attributes, tx, text):
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
                        "Dynamic table %s must have a non-empty schema" % text, 1, {"path": text}
                    )
                if not schema.strict:
                    raise YtError(
                        "Dynamic table %s must have a strict schema" % text, 1, {"path": text}
                    )
                if schema.sorted:
                    explicit_unique = unwrap(schema_value)[1].get("unique_keys")
                    if explicit_unique is False:
                        raise YtError(
                            "Sorted dynamic table %s must have unique keys" % text,
                            1,
                            {"path": text},
                        )
                    if not schema.unique_keys:
                        schema = Schema(schema.columns, strict=True, unique_keys=True)
                    if all(col.sort_order for col in schema.columns):
                        raise YtError(
                            "There must be at least one non-key column in sorted dynamic table %s"
                            % text,
                            1,
                            {"path": text},
                        )
                    for col in schema.columns:
                        if col.sort_order == "descending":
                            raise YtError(
                                "Descending sort order is not supported in dynamic tables", 1
                            )
                if atomicity not in ("full", "none"):
                    raise YtError("Invalid atomicity %r" % atomicity, 1)
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
                raise YtError("Attribute %r cannot be set" % k, 1, {"path": text, "attribute": k})
        attrs.update(attributes)
        c.write_state(node, tx, attrs=attrs, value=value, lock_mode=None)
        return node

    def _copy_or_move(self, params, move):
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
                    'Cannot %s table %s since not all of its tablets are in "unmounted" state'
                    % ("move" if move else "copy", src_text),
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
                raise YtError(
                    "Node %s already exists" % dst_text, ALREADY_EXISTS, {"path": dst_text}
                )
            if dst_node.id == c.root_id:
                raise YtError("Cannot replace the root node", 1)
            if dst_node.dyn is not None and dst_node.dyn.any_not_unmounted():
                raise YtError("Cannot replace table %s since it is mounted" % dst_text, 1)
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

    def copy(self, params, _):
        return self._copy_or_move(params, move=False)

    def move(self, params, _):
        return self._copy_or_move(params, move=True)

    def lock(self, params, _):
        tx = self.tx(params)
        if tx is None:
            raise YtError("A valid master transaction is required", 1)
        mode = _s(params.get("mode", "exclusive"))
        if mode not in ("snapshot", "shared", "exclusive"):
            raise YtError("Invalid lock mode %r" % mode, 1)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if rest or attr_path is not None:
            raise YtError("Cannot lock a part of a node", 1, {"path": text})
        child_key = params.get("child_key")
        attribute_key = params.get("attribute_key")
        if (child_key is not None or attribute_key is not None) and mode != "shared":
            raise YtError("Only shared locks may specify child_key or attribute_key", 1)
        lock = self.cypress.take_lock(
            node,
            tx,
            mode,
            child_key=child_key,
            attribute_key=attribute_key,
            implicit=False,
            waitable=_b(params, "waitable"),
        )
        return {"lock_id": lock.id, "node_id": node.id, "revision": Uint64(node.revision)}

    def unlock(self, params, _):
        tx = self.tx(params)
        if tx is None:
            raise YtError("A valid master transaction is required", 1)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        v = node.versions.get(tx)
        if v is not None and not v.is_empty():
            raise YtError(
                "Cannot unlock node %s since it has been modified in transaction %s" % (text, tx), 1
            )
        for lock in [lk for lk in node.locks if lk.tx == tx and not lk.implicit]:
            node.locks.remove(lock)
            self.state.locks.pop(lock.id, None)
        if v is not None:
            v.snapshot = None
        node.pending = [lk for lk in node.pending if lk.tx != tx]
        self.cypress.try_pending(node)
        return {}

    def concatenate(self, params, _):
        return self.state.tables.concatenate(params, self.tx(params))

    # ================================================================ transactions

    def start_transaction(self, params, _):
        t = self.txm.start(params)
        return {"transaction_id": t.id}

    def ping_transaction(self, params, _):
        self.txm.ping(params.get("transaction_id"), _b(params, "ping_ancestor_transactions"))
        return {}

    def commit_transaction(self, params, _):
        self.txm.commit(params.get("transaction_id"))
        return {}

    def abort_transaction(self, params, _):
        self.txm.abort(params.get("transaction_id"))
        return {}

    # ================================================================ static tables, files

    def write_table(self, params, rows):
        return self.state.tables.write(params, rows, self.tx(params))

    def read_table(self, params, _):
        rows, rp = self.state.tables.read(params, self.tx(params))
        return Tabular(rows, rp)

    def write_file(self, params, data):
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if node.type != "file":
            raise YtError("Node %s is not a file" % text, 1)
        append = bool(unwrap(params["path"])[1].get("append", False))
        self.cypress.write_state(
            node,
            tx,
            chunks=[data] if data else [],
            chunks_mode="append" if append else "replace",
            lock_mode="shared" if append else "exclusive",
        )
        return {}

    def read_file(self, params, _):
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if node.type != "file":
            raise YtError("Node %s is not a file" % text, 1)
        data = b"".join(self.cypress.view(node, tx).chunks)
        offset = int(params.get("offset") or 0)
        length = params.get("length")
        data = data[offset:] if length is None else data[offset : offset + int(length)]
        return Binary(data)

    # ================================================================ dynamic tables

    def mount_table(self, params, _):
        return self.state.dynamic.mount(params)

    def unmount_table(self, params, _):
        return self.state.dynamic.unmount(params)

    def remount_table(self, params, _):
        return self.state.dynamic.remount(params)

    def freeze_table(self, params, _):
        return self.state.dynamic.freeze(params, True)

    def unfreeze_table(self, params, _):
        return self.state.dynamic.freeze(params, False)

    def reshard_table(self, params, _):
        return self.state.dynamic.reshard(params)

    def trim_rows(self, params, _):
        return self.state.dynamic.trim(params)

    def pull_queue(self, params, _):
        return Tabular(self.state.dynamic.pull_queue(params), {})

    def get_tablet_infos(self, params, _):
        return self.state.dynamic.tablet_infos(params)

    def alter_table(self, params, _):
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if node.type != "table":
            raise YtError("Node %s is not a table" % text, 1)
        new_schema = params.get("schema")
        dynamic = params.get("dynamic")
        if node.dyn is not None:
            if node.dyn.any_not_unmounted():
                raise YtError(
                    'Cannot alter table %s since not all of its tablets are in "unmounted" state'
                    % text,
                    1,
                )
            if new_schema is not None:
                schema = Schema.parse(new_schema)
                old = node.dyn.schema
                if (
                    schema.key_columns[: len(old.key_columns)] != old.key_columns
                    or not schema.strict
                ):
                    raise YtError("Incompatible schema change for dynamic table %s" % text, 314)
                for col in old.columns:
                    nc = schema.by_name.get(col.name)
                    if nc is None or nc.type != col.type:
                        raise YtError(
                            "Cannot remove or change column %r of dynamic table" % col.name, 314
                        )
                if schema.sorted and not schema.unique_keys:
                    schema = Schema(schema.columns, strict=True, unique_keys=True)
                node.dyn.schema = schema
                node.dyn.key_columns = list(schema.key_columns)
                self.cypress.write_state(node, tx, attrs={"schema": schema})
            if dynamic is not None and not to_bool(dynamic):
                raise YtError(
                    "Converting dynamic tables to static is not supported by the emulator", 1
                )
            return {}
        st = self.cypress.view(node, tx)
        if new_schema is not None:
            schema = Schema.parse(new_schema)
            if (
                row_count(st)
                and not table_schema(st).is_empty()
                and not _compatible(table_schema(st), schema)
            ):
                raise YtError(
                    "Cannot alter schema of non-empty table %s: incompatible schema" % text, 314
                )
            for r in st.rows():
                schema.validate_row(r, text)
            self.cypress.write_state(node, tx, attrs={"schema": schema, "schema_mode": "strong"})
        if dynamic is not None and to_bool(dynamic):
            schema = table_schema(self.cypress.view(node, tx))
            if schema.is_empty() or not schema.strict:
                raise YtError(
                    "Cannot make table %s dynamic: it must have a strict schema" % text, 1
                )
            if schema.sorted and not schema.unique_keys:
                raise YtError(
                    "Cannot make table %s dynamic: schema must have unique keys" % text, 1
                )
            if tx is not None:
                raise YtError("Cannot convert a table to dynamic inside a transaction", 1)
            dyn = DynTable(node, schema)
            ts = self.state.clock.next()
            for r in st.rows():
                if dyn.sorted:
                    dyn.apply_sorted(
                        "insert", {k: v for k, v in r.items() if k in schema.by_name}, {}, ts, ts
                    )
                else:
                    dyn.tablets[0].rows.append(dict(r))
            node.dyn = dyn
            self.cypress.write_state(node, None, chunks=[], chunks_mode="replace")
        return {}

    def insert_rows(self, params, rows):
        return self.state.dynamic.modify(params, rows, "insert")

    def delete_rows(self, params, rows):
        return self.state.dynamic.modify(params, rows, "delete")

    def lock_rows(self, params, rows):
        tx_id = self.txm.normalize(params.get("transaction_id"))
        node, dyn, path = self.state.dynamic.table(params["path"])
        if tx_id is not None:
            self.state.dynamic._tablet_tx(tx_id)
        return {}

    def lookup_rows(self, params, keys):
        return Tabular(self.state.dynamic.lookup(params, keys))

    def select_rows(self, params, _):
        from .query import parse_query, execute

        q = parse_query(_s(params["query"]))
        tx_id = self.txm.normalize(params.get("transaction_id"))
        if tx_id is not None:
            self.state.dynamic._tablet_tx(tx_id)
        dyn, rows = self.state.dynamic.rows_for_query(q.path, params)
        columns = ([] if dyn.sorted else ["$tablet_index", "$row_index"]) + [
            c.name for c in dyn.schema.columns
        ]
        limit = params.get("output_row_limit")
        input_limit = params.get("input_row_limit")
        if input_limit is not None and len(rows) > int(input_limit):
            if _b(params, "fail_on_incomplete_result", True):
                raise YtError("Query terminated prematurely due to excessive input", 1)
            rows = rows[: int(input_limit)]
        out = execute(q, rows, columns)
        if limit is not None and len(out) > int(limit):
            if _b(params, "fail_on_incomplete_result", True):
                raise YtError("Query terminated prematurely due to excessive output", 1)
            out = out[: int(limit)]
        return Tabular(out, {})

    # ================================================================ operations

    def start_operation(self, params, _):
        op = self.state.operations.start(params)
        return {"operation_id": op.id}

    def get_operation(self, params, _):
        op_id = params.get("operation_id") or params.get("operation_alias")
        op = self.state.operations.get(op_id)
        attrs = op.attributes()
        wanted = params.get("attributes")
        if wanted:
            attrs = {k: attrs[k] for k in wanted if k in attrs}
        return attrs

    def abort_operation(self, params, _):
        return self.state.operations.abort(params.get("operation_id"))

    def complete_operation(self, params, _):
        self.state.operations.get(params.get("operation_id"))
        return {}

    def list_jobs(self, params, _):
        self.state.operations.get(params.get("operation_id"))
        return {
            "jobs": [],
            "cypress_job_count": 0,
            "scheduler_job_count": 0,
            "controller_agent_job_count": 0,
            "archive_job_count": 0,
            "type_counts": {},
            "state_counts": {},
            "errors": [],
        }

    def list_operations(self, params, _):
        ops = [op.attributes() for op in self.state.operations.ops.values()]
        return {
            "operations": ops,
            "incomplete": False,
            "pool_counts": {},
            "user_counts": {},
            "state_counts": {},
            "type_counts": {},
            "failed_jobs_count": 0,
        }

    # ================================================================ misc

    def execute_batch(self, params, _):
        results = []
        for req in params.get("requests") or []:
            command = _s(req.get("command"))
            sub = dict(req.get("parameters") or {})
            try:
                desc = self.state.descriptors.get(command)
                if (
                    desc is None
                    or desc["input_type"] not in ("null", "structured")
                    or desc["output_type"] not in ("null", "structured")
                ):
                    raise YtError("Command %r is not allowed in a batch" % command, 1)
                out = self.run(command, sub, req.get("input"))
                results.append({"output": out} if out is not None else {})
            except YtError as e:
                results.append({"error": e.to_dict()})
        return {"results": results}

    def check_permission(self, params, _):
        return {"action": "allow"}

    def generate_timestamp(self, params, _):
        return {"timestamp": Uint64(self.state.clock.next())}

    def get_current_user(self, params, _):
        return {"user": "root"}

    def discover_proxies(self, params, _):
        return {"proxies": [self.state.address]}

    def get_supported_features(self, params, _):
        return {
            "features": {
                "primitive_types": [
                    "int8",
                    "int16",
                    "int32",
                    "int64",
                    "uint8",
                    "uint16",
                    "uint32",
                    "uint64",
                    "double",
                    "float",
                    "boolean",
                    "string",
                    "utf8",
                    "any",
                    "null",
                    "void",
                    "date",
                    "datetime",
                    "timestamp",
                    "interval",
                    "yson",
                    "json",
                    "uuid",
                ],
                "compression_codecs": ["none", "lz4", "zstd_3"],
                "erasure_codecs": ["none"],
            }
        }


def _raise():
    raise YtError("Not found", RESOLVE_ERROR)


def _compatible(old: Schema, new: Schema):
    for col in old.columns:
        nc = new.by_name.get(col.name)
        if nc is None:
            if new.strict:
                return False
            continue
        if nc.type != col.type and nc.type != "any":
            return False
    return True
