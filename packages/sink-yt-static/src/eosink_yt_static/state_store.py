"""MainTx and its state store: the top of the tree.

MainTx combines everything a batch does to the table; nothing of the batch is visible before
it commits. Its id is kept in a Cypress document per (target table, writer id), under
``<state_path>/<table>/<writer id>`` (names escaped by :func:`eosink_yt_static.tx.node_key`),
so that a restarted driver resumes the MainTx of the batch it was running, and two tables that
share a ``state_path`` and a writer id never see each other's MainTx.
"""

from __future__ import annotations

from typing import Any

from eosink.logs import get_logger
from eosink.plugin import BatchContext, clock
from eosink_yt_common import retry_unit
from eosink_yt_static import tx as txs
from eosink_yt_static.options import YtStaticOptions

log = get_logger("eosink.yt_static")


class StateStore:
    """The state documents of one target table."""

    def __init__(self, options: YtStaticOptions) -> None:
        self.options = options

    def document(self, writer_id: str) -> str:
        o = self.options
        return f"{o.state_dir}/{txs.node_key(o.path)}/{txs.node_key(writer_id)}"

    def begin(self, client: Any, ctx: BatchContext) -> tuple[str, bool]:
        """This writer's MainTx for the batch: resumed if it belongs to this batch and lives
        (``True``), else a new one (the stale one aborted)."""
        doc = self.document(ctx.writer_id)
        with txs.in_tx(client, None):
            state = client.get(doc) if client.exists(doc) else None
        old = state.get("main_tx") if isinstance(state, dict) else None
        if old and txs.alive(client, old):
            if int(state.get("batch_id", -1)) == ctx.batch_id:
                return str(old), True
            log.info("yt_static.main_tx_superseded", main_tx=old, batch=state.get("batch_id"))
            txs.abort(client, str(old))
        main_tx = txs.start_tx(
            client,
            None,
            self.options.main_tx_timeout_s,
            f"eosink yt-static {ctx.label} -> {self.options.path}",
            eosink_writer=ctx.writer_id,
            eosink_batch=ctx.batch_id,
        )
        record = {
            "main_tx": main_tx,
            "batch_id": ctx.batch_id,
            "path": self.options.path,
            # what cleanup ages the MainTx by (eosink.clock: the kit's histories move it)
            "started_at": clock.now(),
        }

        def save() -> None:
            with txs.in_tx(client, None):
                client.create("document", doc, recursive=True, ignore_existing=True)
                client.set(doc, record)

        retry_unit(save, what="state store")
        return main_tx, False

    def forget(self, client: Any, ctx: BatchContext, main_tx: str) -> None:
        """Clear the document's MainTx after its commit (best effort: a stale id is found dead
        next time)."""
        doc = self.document(ctx.writer_id)
        try:
            with txs.in_tx(client, None):
                state = client.get(doc)
                if isinstance(state, dict) and state.get("main_tx") == main_tx:
                    client.set(doc, {**state, "main_tx": None, "committed_batch": ctx.batch_id})
        except Exception as exc:  # noqa: BLE001 - bookkeeping only
            log.info("yt_static.state_store_not_updated", error=type(exc).__name__)
