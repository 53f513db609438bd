"""Master transactions and explicit locks."""

from __future__ import annotations

from typing import Any

from ..errors import (
    YtError,
)
from ..yson import Uint64
from .base import CommandsBase, _b, _s, command


class TransactionCommands(CommandsBase):
    @command("lock")
    def lock(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        tx = self.tx(params)
        if tx is None:
            raise YtError("A valid master transaction is required", 1)
        mode = _s(params.get("mode", "exclusive"))
        if mode not in ("snapshot", "shared", "exclusive"):
            raise YtError(f"Invalid lock mode {mode!r}", 1)
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

    @command("unlock")
    def unlock(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        tx = self.tx(params)
        if tx is None:
            raise YtError("A valid master transaction is required", 1)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        v = node.versions.get(tx)
        if v is not None and not v.is_empty():
            raise YtError(
                f"Cannot unlock node {text} since it has been modified in transaction {tx}", 1
            )
        for lock in [lk for lk in node.locks if lk.tx == tx and not lk.implicit]:
            node.locks.remove(lock)
            self.state.locks.pop(lock.id, None)
        if v is not None:
            v.snapshot = None
        node.pending = [lk for lk in node.pending if lk.tx != tx]
        self.cypress.try_pending(node)
        return {}

    @command("start_transaction")
    def start_transaction(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        t = self.txm.start(params)
        return {"transaction_id": t.id}

    @command("ping_transaction")
    def ping_transaction(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        self.txm.ping(params.get("transaction_id"), _b(params, "ping_ancestor_transactions"))
        return {}

    @command("commit_transaction")
    def commit_transaction(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        self.txm.commit(params.get("transaction_id"))
        return {}

    @command("abort_transaction")
    def abort_transaction(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        self.txm.abort(params.get("transaction_id"))
        return {}
