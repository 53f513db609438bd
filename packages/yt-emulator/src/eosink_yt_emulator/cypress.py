"""Cypress: the node tree, attributes, versioning under master transactions, locks.

Semantics follow https://ytsaurus.tech/docs/en/user-guide/storage/cypress,
https://ytsaurus.tech/docs/en/user-guide/storage/attributes and, for transactions,
https://ytsaurus.tech/docs/en/user-guide/storage/transactions (sections "Locks",
"Locking modes", "Implicit locks", "Lock compatibility", "Versioning").

Versioning model.  Every node has a *trunk* state (what is committed) and, per
transaction that changed it, a *version* holding the transaction's changes as a
delta: per-key changes of attributes and of map-node children (what ``shared``
locks with ``attribute_key``/``child_key`` protect), a replaced value, and table
chunks that are either replaced (``exclusive``) or appended (``shared``).  A read
in transaction T starts from the trunk and applies the deltas of T's ancestors
from the topmost down to T (so a transaction sees its own and its ancestors'
changes, and only committed changes of others: "read committed" for Cypress).
A ``snapshot`` lock freezes the state seen by T at lock time.  Committing T merges
its deltas into its parent (or the trunk), which is why appends from sibling
transactions, or children created under the same map node by siblings, all
survive (doc: "the changes it made ... get merged into the version from which
version N:T was branched").
"""

from __future__ import annotations

import copy

from . import common
from .common import new_id, now_iso
from .errors import (
    YtError,
    RESOLVE_ERROR,
    CONCURRENT_TRANSACTION_LOCK_CONFLICT,
    not_supported_by_virtual_node,
)
from .yson import Uint64, unwrap

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

    def __init__(self, attrs=None, children=None, value=None, chunks=None):
        self.attrs = attrs if attrs is not None else {}
        self.children = children if children is not None else {}
        self.value = value
        self.chunks = chunks if chunks is not None else []

    def copy(self):
        return NodeState(dict(self.attrs), dict(self.children), self.value, list(self.chunks))

    def rows(self):
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

    def __init__(self):
        self.attrs = {}
        self.children = {}
        self.value_set = False
        self.value = None
        self.chunks_mode = None  # None | "replace" | "append"
        self.chunks = []
        self.snapshot = None
        self.removed = False

    def is_empty(self):
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


def merge_delta(target: Version, v: Version):
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
        tx,
        mode,
        node_id,
        child_key=None,
        attribute_key=None,
        state="acquired",
        implicit=False,
    ):
        self.id = new_id(common.TYPE_LOCK)
        self.tx = tx
        self.mode = mode
        self.node_id = node_id
        self.child_key = child_key
        self.attribute_key = attribute_key
        self.state = state
        self.implicit = implicit
        self.creation_time = now_iso()

    def attributes(self):
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
    def __init__(self, node_type, created_in=None):
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


# ------------------------------------------------------------------ YPath


def parse_ypath(path):
    """Split a YPath into (root, keys, attribute_path).

    ``root`` is ``"/"`` or ``"#<id>"``; ``keys`` are child keys; ``attribute_path``
    is ``None`` for the node itself, ``[]`` for ``/@`` (all attributes) or
    ``["attr", "sub", ...]``.  See https://ytsaurus.tech/docs/en/user-guide/storage/ypath.
    """
    path, _ = unwrap(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if not isinstance(path, str):
        raise YtError("Invalid path %r" % (path,))
    p = path.strip()
    if p.startswith("#"):
        end = 1
        while end < len(p) and p[end] != "/":
            end += 1
        root = p[:end]
        rest = p[end:]
    elif p.startswith("//"):
        root = "/"
        rest = p[1:]
    elif p == "/" or p.startswith("/@") or p == "":
        root = "/"
        rest = p
    else:
        raise YtError(
            'Error parsing YPath %r: expected "/" or "#"' % path, RESOLVE_ERROR, {"path": path}
        )
    tokens = []
    i = 0
    n = len(rest)
    while i < n:
        if rest[i] != "/":
            raise YtError("Unexpected character in YPath %r" % path, RESOLVE_ERROR, {"path": path})
        i += 1
        is_attr = False
        if i < n and rest[i] == "@":
            is_attr = True
            i += 1
        buf = []
        while i < n and rest[i] != "/":
            c = rest[i]
            if c == "\\" and i + 1 < n:
                buf.append(rest[i + 1])
                i += 2
                continue
            buf.append(c)
            i += 1
        tokens.append((is_attr, "".join(buf)))
    keys = []
    attr_path = None
    for is_attr, tok in tokens:
        if attr_path is not None:
            attr_path.append(tok)
        elif is_attr:
            attr_path = [tok] if tok != "" else []
        else:
            if tok == "" and not keys:
                continue
            keys.append(tok)
    return root, keys, attr_path


def escape_key(key):
    return key.replace("\\", "\\\\").replace("/", "\\/").replace("@", "\\@").replace("&", "\\&")


# ------------------------------------------------------------------ Cypress


class Cypress:
    """The node tree.  All methods are called with the state lock held."""

    def __init__(self, state):
        self.state = state
        self.nodes = {}
        self.journals = []
        root = Node("map_node")
        self.root_id = root.id
        self.nodes[root.id] = root
        for key in ("tmp", "home"):
            self._bootstrap_child(root, key)
        sys_node = self._bootstrap_child(root, "sys")
        for key, node_type in VIRTUAL_MAPS:
            self._bootstrap_child(sys_node, key, node_type)

    def _bootstrap_child(self, parent, key, node_type="map_node"):
        n = Node(node_type)
        n.parent_id = parent.id
        n.key = key
        self.nodes[n.id] = n
        parent.trunk = NodeState(parent.trunk.attrs, dict(parent.trunk.children, **{key: n.id}))
        return n

    # -------------------------------------------------------------- atomicity
    #
    # A failed command must leave no trace (YT mutations are atomic).  Every
    # primitive below saves what it is about to change into the innermost
    # journal frame; ``rollback`` restores it.

    def begin(self):
        self.journals.append(
            {"nodes": {}, "new": set(), "txs": {}, "locks_added": set(), "locks_removed": {}}
        )

    def _frame(self):
        return self.journals[-1] if self.journals else None

    def _save(self, node):
        f = self._frame()
        if f is None or node.id in f["nodes"] or node.id in f["new"]:
            return
        versions = {}
        for t, v in node.versions.items():
            c = Version()
            c.attrs = dict(v.attrs)
            c.children = dict(v.children)
            c.value_set, c.value = v.value_set, v.value
            c.chunks_mode, c.chunks = v.chunks_mode, list(v.chunks)
            c.snapshot, c.removed = v.snapshot, v.removed
            versions[t] = c
        f["nodes"][node.id] = (
            node,
            node.trunk,
            versions,
            list(node.locks),
            list(node.pending),
            node.dead,
            node.created_in,
            getattr(node, "parent_id", None),
            getattr(node, "key", None),
            node.revision,
            node.modification_time,
            [(lk, lk.tx, lk.state, lk.implicit) for lk in node.locks + node.pending],
        )

    def _save_tx(self, txo):
        f = self._frame()
        if f is None or txo.id in f["txs"]:
            return
        f["txs"][txo.id] = (txo, set(txo.touched), list(txo.locks))

    def _lock_added(self, lock):
        self.state.locks[lock.id] = lock
        f = self._frame()
        if f is not None:
            f["locks_added"].add(lock.id)

    def _lock_removed(self, lock_id):
        lock = self.state.locks.pop(lock_id, None)
        f = self._frame()
        if f is not None and lock is not None and lock_id not in f["locks_added"]:
            f["locks_removed"].setdefault(lock_id, lock)

    def commit_journal(self):
        f = self.journals.pop()
        parent = self._frame()
        if parent is None:
            return
        for nid, saved in f["nodes"].items():
            if nid not in parent["nodes"] and nid not in parent["new"]:
                parent["nodes"][nid] = saved
        parent["new"] |= f["new"]
        for tid, saved in f["txs"].items():
            parent["txs"].setdefault(tid, saved)
        parent["locks_added"] |= f["locks_added"]
        for lid, lock in f["locks_removed"].items():
            if lid not in parent["locks_added"]:
                parent["locks_removed"].setdefault(lid, lock)

    def rollback(self):
        f = self.journals.pop()
        for nid in f["new"]:
            self.nodes.pop(nid, None)
        for nid, saved in f["nodes"].items():
            (
                node,
                trunk,
                versions,
                locks,
                pending,
                dead,
                created_in,
                parent_id,
                key,
                revision,
                mtime,
                lock_fields,
            ) = saved
            node.trunk, node.versions, node.locks, node.pending = trunk, versions, locks, pending
            node.dead, node.created_in, node.revision, node.modification_time = (
                dead,
                created_in,
                revision,
                mtime,
            )
            node.parent_id, node.key = parent_id, key
            for lock, tx, state, implicit in lock_fields:
                lock.tx, lock.state, lock.implicit = tx, state, implicit
        for tid, (txo, touched, locks) in f["txs"].items():
            txo.touched, txo.locks = touched, locks
        for lid in f["locks_added"]:
            self.state.locks.pop(lid, None)
        for lid, lock in f["locks_removed"].items():
            self.state.locks[lid] = lock

    # -------------------------------------------------------------- views

    def chain(self, tx):
        return self.state.txm.chain(tx)

    def view(self, node: Node, tx) -> NodeState:
        """State of ``node`` as seen from transaction ``tx`` (None = trunk)."""
        chain = self.chain(tx)
        for t in reversed(chain):
            v = node.versions.get(t)
            if v is not None and v.snapshot is not None:
                return v.snapshot
        state = node.trunk if node.trunk is not None else NodeState()
        for t in chain:
            v = node.versions.get(t)
            if v is not None and (v.attrs or v.children or v.value_set or v.chunks_mode):
                state = apply_delta(state, v)
        return state

    def visible(self, node: Node, tx) -> bool:
        if node.dead:
            return False
        chain = self.chain(tx)
        if node.created_in is not None and node.created_in not in chain:
            return False
        for t in chain:
            v = node.versions.get(t)
            if v is not None and v.removed:
                return False
        return True

    def version(self, node: Node, tx) -> Version:
        self._save(node)
        v = node.versions.get(tx)
        if v is None:
            v = Version()
            node.versions[tx] = v
            txo = self.state.txm.get_master(tx)
            self._save_tx(txo)
            txo.touched.add(node.id)
        return v

    # -------------------------------------------------------------- resolution

    def get_node(self, node_id):
        return self.nodes.get(node_id)

    def resolve(self, path, tx, missing_ok: bool = False, virtual_ok: bool = False):
        """Resolve ``path`` in ``tx``.

        Returns ``(node, unresolved_keys, attr_path, text)`` where ``node`` is the
        deepest existing node on the path.  If ``missing_ok`` is false and some
        keys are unresolved, a resolve error is raised.  Keys below a virtual map
        node are left unresolved for the caller (``virtual_ok``: only the reads that
        understand virtual maps ask for that; everybody else gets an error).
        """
        root, keys, attr_path = parse_ypath(path)
        text = unwrap(path)[0]
        if root == "/":
            node = self.nodes[self.root_id]
        else:
            obj_id = root[1:]
            node = self.nodes.get(obj_id)
            if node is None or not self.visible(node, tx):
                raise YtError("No such object %s" % obj_id, RESOLVE_ERROR, {"path": text})
        i = 0
        while i < len(keys):
            if node.type != "map_node":
                if node.type in VALUE_TYPES:
                    break  # navigation inside the value
                if node.type in VIRTUAL_MAP_TYPES:
                    if virtual_ok:
                        break  # the children are computed by the caller
                    raise not_supported_by_virtual_node(self.path_of(node, tx), text)
                raise YtError(
                    "Node %s cannot have children" % self.path_of(node, tx),
                    RESOLVE_ERROR,
                    {"path": text},
                )
            child_id = self.view(node, tx).children.get(keys[i])
            if child_id is None:
                break
            node = self.nodes[child_id]
            i += 1
        rest = keys[i:]
        computed = node.type in VALUE_TYPES or node.type in VIRTUAL_MAP_TYPES
        if rest and not missing_ok and not computed:
            raise YtError(
                "Node %s has no child with key %r" % (self.path_of(node, tx), rest[0]),
                RESOLVE_ERROR,
                {"path": text},
            )
        return node, rest, attr_path, text

    def path_of(self, node, tx):
        parts = []
        cur = node
        seen = 0
        while cur.id != self.root_id and seen < 1000:
            seen += 1
            parent = self.nodes.get(getattr(cur, "parent_id", None))
            if parent is None:
                return "#" + node.id
            parts.append(escape_key(cur.key))
            cur = parent
        return "//" + "/".join(reversed(parts)) if parts else "/"

    # -------------------------------------------------------------- locks

    def ancestors_or_self(self, tx):
        return set(self.chain(tx))

    def _conflict(self, node, tx, mode, child_key, attribute_key):
        mine = self.ancestors_or_self(tx) if tx else set()
        if mode in ("shared", "exclusive") and tx:
            for lock in node.locks:
                if lock.mode == "snapshot" and lock.tx in mine:
                    return (
                        lock,
                        "Cannot take %r lock for node %s since %r lock is already taken by "
                        "the same transaction or its ancestor %s"
                        % (mode, self.path_of(node, tx), "snapshot", lock.tx),
                    )
        if mode == "snapshot":
            return None, None
        for lock in node.locks:
            if lock.state != "acquired" or lock.tx in mine or lock.mode == "snapshot":
                continue
            if lock.mode == "exclusive" or mode == "exclusive":
                pass
            elif child_key is not None and lock.child_key == child_key:
                pass
            elif attribute_key is not None and lock.attribute_key == attribute_key:
                pass
            else:
                continue
            what = ""
            if lock.child_key is not None:
                what = " for child %r" % lock.child_key
            elif lock.attribute_key is not None:
                what = " for attribute %r" % lock.attribute_key
            return (
                lock,
                "Cannot take %r lock for node %s since %r lock%s is taken by concurrent "
                "transaction %s" % (mode, self.path_of(node, tx), lock.mode, what, lock.tx),
            )
        return None, None

    def take_lock(
        self, node, tx, mode, child_key=None, attribute_key=None, implicit=True, waitable=False
    ):
        """Take a lock (or, with ``tx`` None, just check that a system transaction could)."""
        lock, message = self._conflict(node, tx, mode, child_key, attribute_key)
        if lock is not None:
            if waitable and tx:
                self._save(node)
                pending = Lock(
                    tx, mode, node.id, child_key, attribute_key, state="pending", implicit=False
                )
                node.pending.append(pending)
                txo = self.state.txm.get_master(tx)
                self._save_tx(txo)
                txo.locks.append((node.id, pending.id))
                self._lock_added(pending)
                return pending
            raise YtError(
                message,
                CONCURRENT_TRANSACTION_LOCK_CONFLICT,
                {"winner_transaction": {"id": lock.tx}, "node_id": node.id, "mode": mode},
            )
        if not tx:
            return None
        self._save(node)
        for existing in node.locks:
            if (
                existing.tx == tx
                and existing.mode == mode
                and existing.child_key == child_key
                and existing.attribute_key == attribute_key
            ):
                if not implicit:
                    existing.implicit = False
                return existing
        new = Lock(tx, mode, node.id, child_key, attribute_key, implicit=implicit)
        node.locks.append(new)
        self._lock_added(new)
        txo = self.state.txm.get_master(tx)
        self._save_tx(txo)
        txo.locks.append((node.id, new.id))
        txo.touched.add(node.id)
        if mode == "snapshot":
            v = self.version(node, tx)
            if v.snapshot is None:
                v.snapshot = self.view(node, tx)
        return new

    def try_pending(self, node):
        if node.pending:
            self._save(node)
        progressed = True
        while progressed and node.pending:
            progressed = False
            for lock in list(node.pending):
                if self.state.txm.find_master(lock.tx) is None:
                    node.pending.remove(lock)
                    progressed = True
                    continue
                conflict, _ = self._conflict(
                    node, lock.tx, lock.mode, lock.child_key, lock.attribute_key
                )
                if conflict is None:
                    node.pending.remove(lock)
                    lock.state = "acquired"
                    node.locks.append(lock)
                    if lock.mode == "snapshot":
                        self.version(node, lock.tx).snapshot = self.view(node, lock.tx)
                    progressed = True
                break

    # -------------------------------------------------------------- transaction end

    def on_commit(self, txo):
        """Merge the versions of committed ``txo`` into its parent (or the trunk)."""
        parent = txo.parent
        for node_id in list(txo.touched):
            node = self.nodes.get(node_id)
            if node is None:
                continue
            self._save(node)
            v = node.versions.pop(txo.id, None)
            if node.created_in == txo.id:
                node.created_in = parent
                if parent is None:
                    node.trunk = NodeState()
            if v is not None:
                v.snapshot = None
                if parent is None:
                    if v.removed:
                        node.dead = True
                    elif not v.is_empty():
                        node.trunk = apply_delta(node.trunk or NodeState(), v)
                        node.revision = self.state.next_revision()
                        node.modification_time = now_iso()
                elif not v.is_empty():
                    pv = node.versions.get(parent)
                    if pv is None:
                        pv = Version()
                        node.versions[parent] = pv
                    merge_delta(pv, v)
                    ptxo = self.state.txm.get_master(parent)
                    self._save_tx(ptxo)
                    ptxo.touched.add(node.id)
            # Locks are inherited by the parent; snapshot locks are released.
            kept = []
            for lock in node.locks:
                if lock.tx != txo.id:
                    kept.append(lock)
                    continue
                if parent is None or lock.mode == "snapshot":
                    self._lock_removed(lock.id)
                    continue
                dup = any(
                    lk.tx == parent
                    and lk.mode == lock.mode
                    and lk.child_key == lock.child_key
                    and lk.attribute_key == lock.attribute_key
                    for lk in node.locks
                )
                if dup:
                    self._lock_removed(lock.id)
                    continue
                lock.tx = parent
                ptx = self.state.txm.get_master(parent)
                self._save_tx(ptx)
                ptx.locks.append((node.id, lock.id))
                ptx.touched.add(node.id)
                kept.append(lock)
            node.locks = kept
            node.pending = [lk for lk in node.pending if lk.tx != txo.id]
            self.try_pending(node)

    def on_abort(self, txo):
        for node_id in list(txo.touched):
            node = self.nodes.get(node_id)
            if node is None:
                continue
            self._save(node)
            node.versions.pop(txo.id, None)
            if node.created_in == txo.id:
                node.dead = True
            for lock in node.locks:
                if lock.tx == txo.id:
                    self._lock_removed(lock.id)
            node.locks = [lk for lk in node.locks if lk.tx != txo.id]
            node.pending = [lk for lk in node.pending if lk.tx != txo.id]
            self.try_pending(node)

    # -------------------------------------------------------------- node creation

    def new_node(self, node_type, tx):
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

    def link_child(self, parent, key, child, tx):
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

    def unlink_child(self, parent, key, tx):
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
        node,
        tx,
        attrs=None,
        value=REMOVED,
        chunks=None,
        chunks_mode=None,
        lock_mode="exclusive",
        attribute_key=None,
    ):
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

    def mark_removed(self, node, tx):
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

    def _check_removable(self, node, tx):
        if node.type in VIRTUAL_MAP_TYPES:
            # Built-in system nodes cannot be removed (nor anything containing them).
            raise not_supported_by_virtual_node(self.path_of(node, tx), self.path_of(node, tx))
        if node.dyn is not None and node.dyn.any_not_unmounted():
            raise YtError(
                'Cannot remove table %s since not all of its tablets are in "unmounted" state'
                % self.path_of(node, tx),
                1,
                {"tablet_state": node.dyn.table_state()},
            )

    def subtree(self, node, tx):
        out = [node]
        if node.type == "map_node":
            for cid in self.view(node, tx).children.values():
                child = self.nodes.get(cid)
                if child is not None:
                    out.extend(self.subtree(child, tx))
        return out

    # -------------------------------------------------------------- values <-> nodes

    def build_from_value(self, value, tx):
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

    def clone(self, node, tx, dst_tx):
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
