"""Cypress locks: taking, queueing and conflicts, and what a transaction's end does to them.

Lock compatibility follows https://ytsaurus.tech/docs/en/user-guide/storage/transactions
("Locking modes", "Lock compatibility"); a transaction's end merges its versions into its
parent (``on_commit``) or drops them (``on_abort``), then retries the waiting locks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .common import now_iso
from .errors import (
    CONCURRENT_TRANSACTION_LOCK_CONFLICT,
    YtError,
)
from .nodes import (
    Lock,
    NodeState,
    Version,
    apply_delta,
    merge_delta,
)

if TYPE_CHECKING:
    from .nodes import Node
    from .transactions import MasterTransaction


class CypressLocks:
    """Locks and transaction ends, a part of ``Cypress`` (its state lives there)."""

    # -------------------------------------------------------------- locks

    def ancestors_or_self(self, tx: str | None) -> set[str]:
        """``tx`` and its ancestors: their locks never conflict with ``tx``'s."""
        return set(self.chain(tx))

    def _conflict(
        self,
        node: Node,
        tx: str | None,
        mode: str,
        child_key: str | None,
        attribute_key: str | None,
    ) -> tuple[Lock, str] | tuple[None, None]:
        """The lock that keeps ``tx`` from taking ``mode`` on ``node``, and why; or
        ``(None, None)``."""
        mine = self.ancestors_or_self(tx) if tx else set()
        if mode in ("shared", "exclusive") and tx:
            for lock in node.locks:
                if lock.mode == "snapshot" and lock.tx in mine:
                    return (
                        lock,
                        f"Cannot take {mode!r} lock for node {self.path_of(node, tx)} since "
                        f"'snapshot' lock is already taken by the same transaction or its "
                        f"ancestor {lock.tx}",
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
                what = f" for child {lock.child_key!r}"
            elif lock.attribute_key is not None:
                what = f" for attribute {lock.attribute_key!r}"
            return (
                lock,
                f"Cannot take {mode!r} lock for node {self.path_of(node, tx)} since {lock.mode!r} "
                f"lock{what} is taken by concurrent "
                f"transaction {lock.tx}",
            )
        return None, None

    def take_lock(
        self,
        node: Node,
        tx: str | None,
        mode: str,
        child_key: str | None = None,
        attribute_key: str | None = None,
        implicit: bool = True,
        waitable: bool = False,
    ) -> Lock | None:
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

    def try_pending(self, node: Node) -> None:
        """Acquire the waiting locks of ``node`` that no longer conflict, in queue order."""
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

    def on_commit(self, txo: MasterTransaction) -> None:
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

    def on_abort(self, txo: MasterTransaction) -> None:
        """Drop the versions and locks of an aborted transaction, then retry waiting locks."""
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
