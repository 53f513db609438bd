"""The ``yt-static`` sink: exactly-once into a YT static table, one transaction tree per batch.

::

    MainTx (driver; state_store.py)          kept alive by the batch's keeper (tx.py, keeper.py)
    |-- SubTx -> Init (staging.py)           create tmp.<attempt> in the writer's staging folder
    |-- PartTx (staging.py, one per task attempt, in parallel on the executors)
    |     `-- TableWriter                    append the partition's rows to tmp.<attempt>
    `-- SubTx -> Commit (publish.py)         commit the kept PartTxs; sort, merge or append
                                             (or move), proof; then MainTx commits: data and
                                             proof become visible at once

The hooks below only wire these steps together. Nothing of a batch is visible before MainTx
commits; aborting MainTx removes every staging table and every PartTx. A task's PartTx stays
open after ``write`` returns: the driver commits exactly the PartTxs named by the messages of
the successful task attempts and aborts the others, so a retried or speculative task never
adds its rows twice.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import pyarrow as pa

from eosink.logs import get_logger
from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    Proof,
    Sink,
    SinkError,
    crash_point,
    hookimpl,
)
from eosink_yt_common import key_columns, retry_unit
from eosink_yt_static import keeper, publish, staging, target
from eosink_yt_static import tx as txs
from eosink_yt_static.operator_hooks import YtStaticOperatorHooks
from eosink_yt_static.options import YtStaticOptions
from eosink_yt_static.proof import PROOFS_ATTR, prepared_proof, proof_in
from eosink_yt_static.staging import YtStaticMessage, YtStaticState
from eosink_yt_static.state_store import StateStore

log = get_logger("eosink.yt_static")

#: Kept importable from here: the attribute holding the proofs.
#: How often the MainTx commit is retried when a zombie task opened a PartTx under it.
MAIN_COMMIT_ROUNDS = 5

__all__ = ["PROOFS_ATTR", "YtStaticMessage", "YtStaticOptions", "YtStaticSink", "YtStaticState"]


class YtStaticSink(YtStaticOperatorHooks, Sink):
    """Exactly-once into a YT static table through a per-batch transaction tree."""

    name = "yt-static"
    Options = YtStaticOptions

    def client(self) -> Any:
        return self.options.connection().client()

    def committed_proof(self, client: Any, writer_id: str) -> Proof | None:
        """The proof of ``writer_id`` as committed (read outside any transaction)."""
        attrs_ = target.attributes(client, self.options.path)
        target.check_static(self.options.path, attrs_)
        return proof_in(attrs_, writer_id)

    def effective_cleanup(self, ctx: BatchContext) -> str:
        if ctx.mode == "complete" and self.options.cleanup == "disabled":
            return "drop"  # Spark's complete mode: the table is the result of the batch
        return self.options.cleanup

    # -- driver: is_committed ----------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        proof = self.committed_proof(self.client(), ctx.writer_id)
        if proof is not None and proof.batch_id >= ctx.batch_id:
            return proof
        return None

    # -- driver: init (MainTx, SubTx -> Init) ------------------------------------------------
    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> YtStaticState:
        o = self.options
        client = self.client()
        current = target.attributes(client, o.path)
        target.check_static(o.path, current)
        cleanup = self.effective_cleanup(ctx)
        final_schema = target.final_schema(o.path, schema, current, cleanup, o.key_columns)
        main_tx, resumed = StateStore(o).begin(client, ctx)
        self._keep(main_tx, detached=keeper.in_spark_worker())
        try:
            attempt = uuid.uuid4().hex[:12]
            inherited = {k: current[k] for k in target.INHERITED_ATTRS if current and k in current}
            tmp = staging.init(client, o, ctx, main_tx, attempt, final_schema, inherited)
        except BaseException:
            self._release(main_tx)
            if not resumed:  # nothing but this attempt's work inside: nobody will commit it
                with suppress(Exception):
                    txs.abort(client, main_tx)
            raise
        log.info(
            "yt_static.init",
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            main_tx=main_tx,
            resumed=resumed,
            tmp=tmp,
            cleanup=cleanup,
        )
        return YtStaticState(
            main_tx=main_tx,
            attempt=attempt,
            staging=staging.staging_folder(o, ctx.writer_id, main_tx),
            tmp=tmp,
            schema=json.dumps(final_schema),
            keys=tuple(key_columns(final_schema)),
            cleanup=cleanup,
            resumed=resumed,
        )

    # -- executors: write (PartTx -> TableWriter) --------------------------------------------
    @hookimpl
    def write(
        self,
        ctx: BatchContext,
        state: YtStaticState,
        partition_id: int,
        attempt: int,
        batches: Iterator[pa.RecordBatch],
    ) -> YtStaticMessage:
        return staging.write_part(self.options, ctx, state, partition_id, attempt, batches)

    # -- driver: commit (SubTx -> Commit, then MainTx) ---------------------------------------
    @hookimpl
    def commit(
        self,
        ctx: BatchContext,
        state: YtStaticState,
        messages: list[YtStaticMessage],
        proof: Proof,
    ) -> None:
        self._keep(state.main_tx, detached=False)
        try:
            self._commit(ctx, state, messages, proof)
        finally:
            self._release(state.main_tx)

    def _keep(self, main_tx: str, *, detached: bool) -> None:
        """Keep the batch alive from this process (a thread) and, when this process is a
        Spark worker that ends before the batch (``init`` in the data-source door), from a
        detached keeper process too."""
        o = self.options
        txs.BatchKeeper.keep(o.connection(), main_tx, o.ping_period_s)
        if detached:
            keeper.start(
                o.connection(), main_tx, o.ping_period_s, o.main_tx_timeout_s, o.keepalive_max_s
            )

    @staticmethod
    def _release(main_tx: str) -> None:
        txs.BatchKeeper.release(main_tx)
        keeper.release(main_tx)

    def _commit(
        self, ctx: BatchContext, state: YtStaticState, messages: list[YtStaticMessage], proof: Proof
    ) -> None:
        o, client, main_tx = self.options, self.client(), state.main_tx
        committed = self.committed_proof(client, ctx.writer_id)
        if committed is not None and committed.batch_id >= ctx.batch_id:
            raise AlreadyCommitted(f"{ctx.label}: batch {committed.batch_id} already committed")
        if not txs.alive(client, main_tx):
            raise SinkError(
                f"{ctx.label}: the main transaction {main_tx} ended before the commit (aborted, "
                "or its driver was gone longer than main_tx_timeout_s), so the batch's staged "
                "rows are gone and nothing was published; the batch is written again when it is "
                "retried"
            )
        stages = _Stages()
        mine = self._prepared_in(client, main_tx, ctx) is None
        if mine:
            with stages("part_txs"):
                publish.commit_parts(client, o, ctx, state, messages)
                publish.abort_nested(client, main_tx)

            def commit_unit() -> bool:
                prepared = self._prepared_in(client, main_tx, ctx)
                if prepared is not None:
                    # Our own earlier try (its reply lost), or another attempt's.
                    return prepared == proof
                try:
                    way = publish.run(client, o, ctx, state, proof, stages)
                except publish.PreparedByOther:
                    return False
                stages.way = way
                return True

            mine = retry_unit(commit_unit, what="commit sub transaction")
            if mine:
                crash_point("commit:proof-set")
        if not mine:
            # Another attempt of this batch (a driver that died, or a concurrent one)
            # prepared data + proof inside this MainTx: finish its commit, drop our staging.
            log.info("yt_static.finishing_prepared_commit", main_tx=main_tx, batch=ctx.batch_id)
            publish.abort_nested(client, main_tx)

            def drop_staging() -> None:
                with txs.sub_tx(client, main_tx, o.sub_tx_timeout_s, f"cleanup {ctx.label}"):
                    client.remove(state.staging, recursive=True, force=True)

            retry_unit(drop_staging, what="cleanup sub transaction")
        with stages("main_tx"):
            self._commit_main(client, ctx, main_tx, proof if mine else None)
        crash_point("commit:main-tx-committed")
        log.debug(
            "yt_static.commit_stages",
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            way=stages.way,
            **stages.ms(),
        )
        StateStore(o).forget(client, ctx, main_tx)
        if not mine:
            raise AlreadyCommitted(f"{ctx.label}: committed by another attempt of this batch")

    def _prepared_in(self, client: Any, main_tx: str, ctx: BatchContext) -> Proof | None:
        """A proof of this batch set inside MainTx (by an attempt that did not commit it)."""
        proof = prepared_proof(client, self.options.path, main_tx, ctx.writer_id)
        return proof if proof is not None and proof.batch_id >= ctx.batch_id else None

    def _commit_main(
        self, client: Any, ctx: BatchContext, main_tx: str, proof: Proof | None
    ) -> None:
        """Commit MainTx: the single atomic step.

        A task attempt Spark gave up on (a zombie) may open a PartTx under MainTx after the
        nested transactions were aborted; YT then refuses the commit. Its rows are not wanted:
        abort it and commit again. A lost reply is resolved by the proof."""
        for round_ in range(1, MAIN_COMMIT_ROUNDS + 1):
            publish.abort_nested(client, main_tx)
            try:
                txs.commit(client, main_tx)
                return
            except Exception as exc:
                if round_ < MAIN_COMMIT_ROUNDS and _has_nested(client, main_tx):
                    log.info("yt_static.late_nested_tx", main_tx=main_tx, round=round_)
                    continue
                # The client already resent the commit with the same mutation id; if the
                # reply still did not come through, the table tells whether it happened.
                stored = self.committed_proof(self.client(), ctx.writer_id)
                if stored is not None and (
                    stored == proof if proof is not None else stored.batch_id >= ctx.batch_id
                ):
                    log.warning(
                        "yt_static.commit_reply_lost",
                        writer=ctx.writer_id,
                        batch=ctx.batch_id,
                        main_tx=main_tx,
                        error=type(exc).__name__,
                    )
                    return
                raise

    # -- driver: abort -----------------------------------------------------------------------
    @hookimpl
    def abort(self, ctx: BatchContext, state: YtStaticState | None, messages: list[Any]) -> None:
        if state is None:
            return
        self._release(state.main_tx)
        # Aborting MainTx removes its staging tables and PartTxs; what a commit published is
        # outside it (a committed MainTx cannot be aborted).
        if txs.abort(self.client(), state.main_tx):
            log.info("yt_static.main_tx_aborted", writer=ctx.writer_id, batch=ctx.batch_id)


def _has_nested(client: Any, main_tx: str) -> bool:
    try:
        return bool(txs.nested(client, main_tx))
    except Exception:  # noqa: BLE001 - MainTx gone: nothing nested
        return False


class _Stages:
    """Wall time of the internal stages of a commit, for one debug event."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}
        self.way: str | None = None
        self._open: tuple[str, float] | None = None

    def start(self, name: str) -> None:
        self._open = (name, time.monotonic())

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self._close()
        started = time.monotonic()
        try:
            yield
        finally:
            self.took[name] = self.took.get(name, 0.0) + time.monotonic() - started

    def _close(self) -> None:
        if self._open is not None:
            name, started = self._open
            self.took[name] = self.took.get(name, 0.0) + time.monotonic() - started
            self._open = None

    def ms(self) -> dict[str, float]:
        self._close()
        return {f"{k}_ms": round(v * 1000, 1) for k, v in self.took.items()}
