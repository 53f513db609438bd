"""Master and tablet transactions.

Master transactions follow https://ytsaurus.tech/docs/en/user-guide/storage/transactions:
they nest; the lifetime is counted from the later of start and the last ping
("The reference point for transaction lifetime is the latter of start_tx moment or
last ping_tx moment"); the upper limit is one hour; aborting a transaction aborts its
nested transactions; committing requires all nested transactions to be finished
("run commit_tx on all nested transactions and then on the parent"); a commit merges
the changes into the parent.

Tablet transactions follow https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/transactions:
a start timestamp at start, writes buffered until commit, snapshot isolation, a
write-write conflict on commit is error 1700, at most 100,000 rows per transaction
by default (counted at commit: 1717), ``atomicity`` ``full``/``none`` must match the table's.
Over HTTP they are *sticky* (the driver's ``start_transaction``: "Tablet transactions must be
sticky"): the proxy that started one holds it in its pool, every command naming it renews its
lease, and another proxy of the cluster does not know it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from . import common
from .common import NULL_ID, new_id, now_iso, to_bool
from .errors import (
    INVALID_TRANSACTION_STATE,
    YtError,
    no_such_transaction,
    sticky_transaction_not_found,
)

if TYPE_CHECKING:
    from .state import EmulatorState

MAX_TIMEOUT_MS = 60 * 60 * 1000
DEFAULT_TIMEOUT_MS = 15000


class MasterTransaction:
    kind = "master"

    def __init__(self, parent: str | None, timeout_ms: int | None, attributes: Any) -> None:
        self.id = new_id(common.TYPE_NESTED_TRANSACTION if parent else common.TYPE_TRANSACTION)
        self.parent = parent
        self.timeout_ms = (
            min(int(timeout_ms), MAX_TIMEOUT_MS) if timeout_ms is not None else DEFAULT_TIMEOUT_MS
        )
        self.attributes = dict(attributes or {})
        self.start = time.time()
        self.last_ping = self.start
        self.deadline = None
        self.children = set()
        self.touched = set()
        self.locks = []  # (node_id, lock_id)
        self.state = "active"
        self.prerequisites = []

    def expired(self, now: float) -> bool:
        if self.deadline is not None and now > self.deadline:
            return True
        return self.timeout_ms is not None and (now - self.last_ping) * 1000.0 > self.timeout_ms

    def describe(self, state: EmulatorState) -> dict[str, Any]:
        """The transaction's attributes, as ``#<id>/@`` and ``//sys/transactions/<id>/@`` show
        them (names and presence as in ytsaurus ``transaction_proxy.cpp``: ``title`` and
        ``deadline`` only when set)."""
        depth = 0
        cur = self.parent
        while cur is not None and cur in state.txm.txs:
            depth += 1
            cur = state.txm.txs[cur].parent
        attrs = {
            "id": self.id,
            "type": "nested_transaction" if self.parent else "transaction",
            "timeout": self.timeout_ms,
            "parent_id": self.parent or NULL_ID,
            "start_time": now_iso(self.start),
            "last_ping_time": now_iso(self.last_ping),
            "nested_transaction_ids": sorted(self.children),
            "lock_ids": [lock_id for _, lock_id in self.locks if lock_id in state.locks],
            "locked_node_ids": sorted(
                {node_id for node_id, lock_id in self.locks if lock_id in state.locks}
            ),
            "branched_node_ids": sorted(self.touched),
            "staged_object_ids": [],
            "state": self.state,
            "owner": "root",
            "depth": depth,
            "prerequisite_transaction_ids": list(self.prerequisites),
        }
        if self.deadline is not None:
            attrs["deadline"] = now_iso(self.deadline)
        for k, v in self.attributes.items():
            attrs.setdefault(k, v)
        return attrs


class TabletTransaction:
    kind = "tablet"

    def __init__(
        self,
        start_ts: int,
        timeout_ms: int | None,
        atomicity: str,
        durability: str,
        attributes: Any,
    ) -> None:
        self.id = new_id(
            common.TYPE_NON_ATOMIC_TABLET_TRANSACTION
            if atomicity == "none"
            else common.TYPE_ATOMIC_TABLET_TRANSACTION
        )
        self.start_ts = start_ts
        self.timeout_ms = (
            min(int(timeout_ms), MAX_TIMEOUT_MS) if timeout_ms is not None else DEFAULT_TIMEOUT_MS
        )
        self.atomicity = atomicity
        self.durability = durability
        self.attributes = dict(attributes or {})
        self.start = time.time()
        self.last_ping = self.start
        self.deadline = None
        self.writes = []  # (node_id, op, row, flags)
        self.row_count = 0
        self.state = "active"
        self.parent = None
        self.children = set()
        #: The proxy holding it (its sticky transaction pool); ``None``: the emulator's own.
        self.proxy = None

    def expired(self, now: float) -> bool:
        if self.deadline is not None and now > self.deadline:
            return True
        return (now - self.last_ping) * 1000.0 > self.timeout_ms

    def describe(self, state: EmulatorState) -> dict[str, Any]:
        attrs = {
            "id": self.id,
            "type": "atomic_tablet_transaction"
            if self.atomicity != "none"
            else "non_atomic_tablet_transaction",
            "timeout": self.timeout_ms,
            "start_timestamp": self.start_ts,
            "start_time": now_iso(self.start),
            "last_ping_time": now_iso(self.last_ping),
        }
        for k, v in self.attributes.items():
            attrs.setdefault(k, v)
        return attrs


def _is_null(tx: str | None) -> bool:
    """Whether a transaction id parameter means no transaction (absent, null or the null GUID)."""
    return tx is None or tx == "" or tx == NULL_ID


class TransactionManager:
    """All transactions.  Methods are called with the state lock held."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self.txs = {}
        self.finished = {}  # id -> "committed" | "aborted" | "expired" (bounded)

    # ---------------------------------------------------------------- lookup

    def normalize(self, tx: str | None) -> str | None:
        """A transaction id parameter as a string, ``None`` for no transaction."""
        if _is_null(tx):
            return None
        return str(tx)

    def find_master(self, tx: str | None) -> MasterTransaction | None:
        """The master transaction ``tx``, if it is one (else ``None``, without failing)."""
        t = self.txs.get(tx)
        return t if t is not None and t.kind == "master" else None

    def get_master(self, tx: str | None) -> MasterTransaction:
        """The active master transaction ``tx``; any other id fails as in YT."""
        t = self.txs.get(tx)
        if t is None or t.state != "active":
            raise no_such_transaction(tx)
        if t.kind != "master":
            raise YtError(
                f"Transaction {tx} is not a master transaction", 1, {"transaction_id": tx}
            )
        return t

    def get_any(self, tx: str | None) -> MasterTransaction | TabletTransaction:
        """The active transaction ``tx``, master or tablet; a tablet one only on the proxy
        holding it, and asking renews its lease (the sticky transaction pool)."""
        t = self.txs.get(tx)
        serving = self.state.serving_proxy()  # None: the emulator's own control, not a request
        if t is not None and t.kind == "tablet" and t.proxy is not None and serving is not None:
            if t.proxy != serving:
                raise sticky_transaction_not_found(tx)
        if t is None or t.state != "active":
            raise no_such_transaction(tx)
        if t.kind == "tablet":
            t.last_ping = time.time()
        return t

    def chain(self, tx: str | None) -> list[str]:
        """Ancestors of master transaction ``tx`` from the topmost down to ``tx``."""
        tx = self.normalize(tx)
        if tx is None:
            return []
        out = []
        cur = tx
        while cur is not None:
            t = self.get_master(cur)
            out.append(cur)
            cur = t.parent
        out.reverse()
        return out

    # ---------------------------------------------------------------- lifecycle

    def start(self, params: dict[str, Any]) -> MasterTransaction | TabletTransaction:
        """``start_transaction``: a master transaction (nested under ``transaction_id``) or a tablet
        one."""
        tx_type = params.get("type", "master")
        parent = self.normalize(params.get("transaction_id"))
        timeout = params.get("timeout")
        attributes = params.get("attributes") or {}
        if tx_type == "tablet":
            if not to_bool(params.get("sticky", False)):
                raise YtError("Tablet transactions must be sticky", 1)
            if parent is not None:
                raise YtError("Tablet transactions cannot have a parent transaction", 1)
            atomicity = params.get("atomicity", "full")
            if atomicity not in ("full", "none"):
                raise YtError(f"Invalid atomicity {atomicity!r}", 1)
            t = TabletTransaction(
                self.state.clock.next(),
                timeout,
                atomicity,
                params.get("durability", "sync"),
                attributes,
            )
            t.proxy = self.state.serving_proxy()
        elif tx_type == "master":
            if parent is not None:
                self.get_master(parent)
            for pre in params.get("prerequisite_transaction_ids") or []:
                if self.find_master(pre) is None or self.txs[pre].state != "active":
                    raise YtError(
                        f"Prerequisite check failed: transaction {pre} is missing",
                        1000,
                        {"prerequisite_transaction_id": pre},
                    )
            t = MasterTransaction(parent, timeout, attributes)
            t.prerequisites = [str(p) for p in params.get("prerequisite_transaction_ids") or []]
            if parent is not None:
                self.txs[parent].children.add(t.id)
        else:
            raise YtError(f"Invalid transaction type {tx_type!r}", 1)
        deadline = params.get("deadline")
        if deadline:
            import datetime

            try:
                t.deadline = datetime.datetime.fromisoformat(
                    str(deadline).replace("Z", "+00:00")
                ).timestamp()
            except ValueError:
                pass
        self.txs[t.id] = t
        return t

    def ping(self, tx: str | None, ping_ancestors: bool = False) -> None:
        """Renew a transaction's lease (and its ancestors' if asked)."""
        tx = self.normalize(tx)
        if tx is None:
            raise YtError("Transaction id is required for ping", 1)
        t = self.get_any(tx)
        now = time.time()
        t.last_ping = now
        if ping_ancestors:
            cur = t.parent
            while cur is not None:
                p = self.txs[cur]
                p.last_ping = now
                cur = p.parent

    def commit(self, tx: str | None) -> None:
        """Commit a transaction: its Cypress versions merge into its parent, its rows are
        written."""
        tx = self.normalize(tx)
        if tx is None:
            raise YtError("Transaction id is required for commit", 1)
        t = self.get_any(tx)
        if t.kind == "tablet":
            try:
                self.state.dynamic.commit(t)
            except YtError:
                # A tablet transaction whose commit failed (e.g. a 1700 conflict) is aborted.
                self._finish(t, "aborted")
                raise
            self._finish(t, "committed")
            return
        active = [c for c in t.children if c in self.txs and self.txs[c].state == "active"]
        if active:
            raise YtError(
                f"Cannot commit transaction {tx} since it has {len(active)} active nested "
                "transaction(s)",
                INVALID_TRANSACTION_STATE,
                {"transaction_id": tx, "nested_transaction_ids": sorted(active)},
            )
        self.state.operations.on_transaction_finished(t.id, committed=True)
        self.state.cypress.on_commit(t)
        self._finish(t, "committed")

    def abort(self, tx: str | None, reason: str = "aborted") -> None:
        """Abort a transaction and, first, its nested transactions."""
        tx = self.normalize(tx)
        if tx is None:
            raise YtError("Transaction id is required for abort", 1)
        t = self.get_any(tx)
        self._abort(t, reason)

    def _abort(self, t: MasterTransaction | TabletTransaction, reason: str) -> None:
        """Abort ``t`` and its descendants (also for an expired lease)."""
        for c in list(t.children):
            ct = self.txs.get(c)
            if ct is not None and ct.state == "active":
                self._abort(ct, reason)
        if t.kind == "master":
            self.state.operations.on_transaction_finished(t.id, committed=False)
            self.state.cypress.on_abort(t)
        self._finish(t, reason)

    def _finish(self, t: MasterTransaction | TabletTransaction, how: str) -> None:
        """Mark ``t`` finished and drop it from its parent's nested transactions."""
        t.state = how
        self.txs.pop(t.id, None)
        if t.parent is not None and t.parent in self.txs:
            self.txs[t.parent].children.discard(t.id)
        self.finished[t.id] = how
        if len(self.finished) > 100000:
            for k in list(self.finished)[:50000]:
                del self.finished[k]

    def expire(self, tx: str | None) -> None:
        """Expire ``tx`` now, as if its timeout had passed (fault injection)."""
        tx = self.normalize(tx)
        t = self.get_any(tx)
        self._abort(t, "expired")

    def reap(self) -> None:
        """Abort the transactions whose lease ran out (before each command, as a lease thread
        would)."""
        now = time.time()
        for t in list(self.txs.values()):
            if t.state == "active" and t.id in self.txs and t.expired(now):
                # Abort the topmost expired transaction; children go with it.
                self._abort(t, "expired")

    def active_ids(self) -> list[str]:
        """The ids of the active transactions (for tests that check nothing leaked)."""
        return sorted(self.txs)
