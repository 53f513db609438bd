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

The tree's objects are in ``nodes.py``, YPath parsing in ``ypath.py``; ``Cypress`` itself
(this module: atomicity of a command, views, path resolution) is completed by its locks
(``cypress_locks.py``) and its writes (``cypress_writes.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cypress_locks import CypressLocks
from .cypress_writes import CypressWrites
from .errors import (
    RESOLVE_ERROR,
    YtError,
    not_supported_by_virtual_node,
)
from .nodes import (
    READ_ONLY_ATTRS,
    REMOVED,
    SCALAR_TYPES,
    VALUE_TYPES,
    VIRTUAL_MAP_TYPES,
    VIRTUAL_MAPS,
    Lock,
    Node,
    NodeState,
    Version,
    apply_delta,
    merge_delta,
)
from .ypath import escape_key, parse_ypath
from .yson import unwrap

if TYPE_CHECKING:
    from .state import EmulatorState
    from .transactions import MasterTransaction

__all__ = [
    "READ_ONLY_ATTRS",
    "REMOVED",
    "SCALAR_TYPES",
    "VALUE_TYPES",
    "VIRTUAL_MAP_TYPES",
    "VIRTUAL_MAPS",
    "Cypress",
    "Lock",
    "Node",
    "NodeState",
    "Version",
    "apply_delta",
    "escape_key",
    "merge_delta",
    "parse_ypath",
]


class Cypress(CypressLocks, CypressWrites):
    """The node tree.  All methods are called with the state lock held."""

    def __init__(self, state: EmulatorState) -> None:
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

    def _bootstrap_child(self, parent: Node, key: str, node_type: str = "map_node") -> Node:
        """Make a child of the initial tree (``//tmp``, ``//sys``, ...), in the trunk, outside any
        journal."""
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

    def begin(self) -> None:
        """Start the journal of one command, so that ``rollback`` can undo whatever it changes."""
        self.journals.append(
            {"nodes": {}, "new": set(), "txs": {}, "locks_added": set(), "locks_removed": {}}
        )

    def _frame(self) -> dict[str, Any] | None:
        """The journal frame of the running command."""
        return self.journals[-1] if self.journals else None

    def _save(self, node: Node) -> None:
        """Remember a node's state before its first change in this command."""
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

    def _save_tx(self, txo: MasterTransaction) -> None:
        """Remember a transaction's state before its first change in this command."""
        f = self._frame()
        if f is None or txo.id in f["txs"]:
            return
        f["txs"][txo.id] = (txo, set(txo.touched), list(txo.locks))

    def _lock_added(self, lock: Lock) -> None:
        """Journal a lock the command took, to drop it on rollback."""
        self.state.locks[lock.id] = lock
        f = self._frame()
        if f is not None:
            f["locks_added"].add(lock.id)

    def _lock_removed(self, lock_id: str) -> None:
        """Journal a lock the command released, to put it back on rollback."""
        lock = self.state.locks.pop(lock_id, None)
        f = self._frame()
        if f is not None and lock is not None and lock_id not in f["locks_added"]:
            f["locks_removed"].setdefault(lock_id, lock)

    def commit_journal(self) -> None:
        """End the command's journal: its changes stay."""
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

    def rollback(self) -> None:
        """Undo every change the running command made (nodes, transactions, locks)."""
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

    def chain(self, tx: str | None) -> list[str]:
        """The master transactions whose changes ``tx`` sees, from the topmost down to ``tx``."""
        return self.state.txm.chain(tx)

    def view(self, node: Node, tx: str | None) -> NodeState:
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

    def visible(self, node: Node, tx: str | None) -> bool:
        """Whether ``node`` exists for ``tx``: created in ``tx``'s chain and not removed there."""
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

    def version(self, node: Node, tx: str | None) -> Version:
        """The version of ``node`` that ``tx`` writes to (made on first use)."""
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

    def get_node(self, node_id: str) -> Node | None:
        """The node with id ``node_id`` (``None`` if there is none)."""
        return self.nodes.get(node_id)

    def resolve(
        self, path: Any, tx: str | None, missing_ok: bool = False, virtual_ok: bool = False
    ) -> tuple[Node, list[str], list[str] | None, str]:
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
                raise YtError(f"No such object {obj_id}", RESOLVE_ERROR, {"path": text})
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
                    f"Node {self.path_of(node, tx)} cannot have children",
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
                f"Node {self.path_of(node, tx)} has no child with key {rest[0]!r}",
                RESOLVE_ERROR,
                {"path": text},
            )
        return node, rest, attr_path, text

    def path_of(self, node: Node, tx: str | None) -> str:
        """The node's path as ``tx`` sees it (for messages and the ``path`` attribute)."""
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
