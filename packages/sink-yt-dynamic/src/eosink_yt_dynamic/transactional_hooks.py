"""The protocol's hooks in the transactional mode (:mod:`eosink_yt_dynamic.transactional` says
how the mode works); :class:`~eosink_yt_dynamic.sink.YtDynamicSink` calls them when its option
``mode`` is ``transactional``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from eosink.logs import get_logger
from eosink.plugin import AlreadyCommitted, BatchContext, ConfigurationError, Proof, crash_point
from eosink_yt_common import YtConnection, is_retriable, retry_unit, yt_rows
from eosink_yt_dynamic.consumers import advance_all, batch_consumers
from eosink_yt_dynamic.proof import ProgressTable
from eosink_yt_dynamic.tables import ensure_dynamic_table, inspect_output, keyed_columns
from eosink_yt_dynamic.transactional import (
    TOO_MANY_ROWS,
    TransactionMessage,
    TransactionState,
    check_keys_set,
    check_rows,
    chunk_key_hashes,
    chunks_of,
    conflict,
    key_mismatch,
    partition_key_hashes,
    pin_proxy,
    pinned,
    shared_key,
    owned,
    start,
    stop_pinger,
    table_key,
    too_many_rows,
    transaction_gone,
)

log = get_logger("eosink.yt_dynamic")


def _is(error: BaseException, check: str) -> bool:
    return bool(getattr(error, check, lambda: False)())


def _code(error: BaseException) -> int | None:
    """The YT error code of ``error`` or of the first inner error that has one."""
    stack = [getattr(error, "error", None)]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        if item.get("code") not in (None, 1):
            return int(item["code"])
        stack.extend(item.get("inner_errors") or [])
    return None


def _insert_retriable(error: BaseException) -> bool:
    """A lost insert reply may be sent again (an upsert over itself), a lost transaction not."""
    return is_retriable(error) and not _is(error, "is_no_such_transaction")


class TransactionalHooks:
    """Mixin of the sink: the batch hooks of the transactional mode."""

    options: Any
    progress: ProgressTable

    def connection(self) -> YtConnection:  # provided by the sink
        raise NotImplementedError

    def client(self) -> Any:  # provided by the sink
        raise NotImplementedError

    def _output_id(self, client: Any) -> str | None:  # provided by the sink
        raise NotImplementedError

    def _table_key(self) -> tuple[str, ...]:
        """The key rows are replaced by: the option ``key``, else the table's key."""
        o = self.options
        if o.key:
            return tuple(o.key)
        client = self.client()
        if not client.exists(o.path):
            raise ConfigurationError(
                f"output table {o.path} does not exist, so its key is unknown. Fix: create it "
                "keyed by the query's key (eosink_yt_dynamic.create_output_table(client, path, "
                "df, key=[...])), or set the options key and create_table=true"
            )
        return table_key(client.get(f"{o.path}/@schema"))

    # -- driver ------------------------------------------------------------------------------
    def _tx_init(self, ctx: BatchContext, schema: pa.Schema) -> TransactionState:
        o = self.options
        if ctx.mode == "complete":
            raise ConfigurationError(
                f"{ctx.label}: output mode 'complete' rewrites the whole result every batch; an "
                "upsert by key keeps the keys the result dropped. Fix: outputMode('update') "
                "(the changed rows, replaced by key) or outputMode('append')"
            )
        client = self.client()
        if o.create_table:
            ensure_dynamic_table(client, o.path, keyed_columns(schema, o.key))
        table_schema = inspect_output(client, o.path)
        key = table_key(table_schema)
        if o.key and tuple(o.key) != key:
            raise key_mismatch(o.path, o.key, key)
        check_rows(schema, table_schema, o.path)
        output_id = self._output_id(client)
        self.progress.ensure(client)
        # a new attempt of this writer: transactions of its abandoned attempts that this
        # process still pings are aborted (in a dead process nobody pings them: they expire)
        self._abort_all(owned(self._owner(ctx)[:2]))
        proxy = pin_proxy(self.connection())
        tx = start(pinned(self.connection(), proxy), o.transaction_timeout_s, self._owner(ctx))
        log.info(
            "yt_dynamic.transaction_started",
            path=o.path,
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            transaction=tx,
            key=list(key),
        )
        return TransactionState(transaction_id=tx, proxy=proxy, key=key, output_id=output_id)

    def _tx_commit(
        self,
        ctx: BatchContext,
        state: TransactionState,
        messages: list[TransactionMessage],
        proof: Proof,
    ) -> None:
        o = self.options
        rows = sum(m.rows for m in messages)
        if rows + 1 > o.max_batch_rows:  # the proof row is one more
            raise too_many_rows(ctx, o.path, rows, o.max_batch_rows)
        shared_key(messages, state.key, o.path)
        client = pinned(self.connection(), state.proxy).client()
        tx = state.transaction_id
        try:
            # the YT queue consumers the batch's rows came through, from the checkpoint's
            # offset log (eosink_yt_dynamic.consumers): they move in this transaction too
            consumers = batch_consumers(ctx, o.proxy)
            with client.Transaction(transaction_id=tx, ping=False):
                # read at the transaction's start: a later proof of this writer makes the
                # commit below conflict (1700) on the proof row
                stored = self.progress.proof(client, state.output_id, ctx.writer_id)
                if stored is not None and stored.batch_id >= ctx.batch_id:
                    raise AlreadyCommitted(
                        f"{ctx.label}: the proof of batch {stored.batch_id} is already in "
                        f"{o.progress_table}"
                    )
                self.progress.write(client, state.output_id, ctx, proof)
                advance_all(client, ctx, consumers)
            crash_point("commit:before-transaction-commit")
            client.commit_transaction(tx)
        except AlreadyCommitted:
            raise
        except Exception as exc:
            error = self._commit_error(ctx, state, proof, rows, exc)
            if error is not None:
                raise error from exc
            log.info("yt_dynamic.commit_landed", transaction=tx, error=type(exc).__name__)
        finally:
            stop_pinger(tx)
        log.info("yt_dynamic.transaction_committed", transaction=tx, rows=rows)

    def _commit_error(
        self,
        ctx: BatchContext,
        state: TransactionState,
        proof: Proof,
        rows: int,
        exc: BaseException,
    ) -> BaseException | None:
        """The error a failed commit raises (YT's limits and races named with their fix), or
        ``None`` when the commit landed after all (its reply was lost: the stored proof is
        this attempt's)."""
        if _code(exc) == TOO_MANY_ROWS:
            return too_many_rows(ctx, self.options.path, rows + 1, self.options.max_batch_rows)
        gone = _is(exc, "is_no_such_transaction")
        if gone or _is(exc, "is_tablet_transaction_lock_conflict"):
            # settle the outcome before saying anything: read the proof as it is now
            stored = self._proof_now(ctx, state)
            if stored is not None and stored.to_json() == proof.to_json():
                return None
            if stored is not None and stored.batch_id >= ctx.batch_id:
                return AlreadyCommitted(
                    f"{ctx.label}: another attempt committed batch {stored.batch_id} while this "
                    "one ran; this attempt's transaction was aborted"
                )
            if gone:
                return transaction_gone(ctx, state, self.options.transaction_timeout_s, exc)
            return conflict(ctx, state, self.options.path)
        return exc

    def _proof_now(self, ctx: BatchContext, state: TransactionState) -> Proof | None:
        return self.progress.proof(self.client(), state.output_id, ctx.writer_id)

    def _owner(self, ctx: BatchContext) -> tuple:
        return (self.options.path, ctx.writer_id, ctx.batch_id)

    def _tx_abort(self, ctx: BatchContext, state: TransactionState | None) -> None:
        """Abort the batch's transaction (nothing of it becomes visible); one that committed
        or is gone already is left as it is: an abort can never undo a commit. Without a state
        (``init`` failed after starting it), the transactions this process pings for the
        batch; in another process there are none left alive: nobody pings them."""
        if state is not None:
            targets = [(state.transaction_id, pinned(self.connection(), state.proxy))]
        else:
            targets = owned(self._owner(ctx))
        self._abort_all(targets)

    @staticmethod
    def _abort_all(targets: list[tuple[str, YtConnection]]) -> None:
        for tx, connection in targets:
            stop_pinger(tx)
            try:
                connection.client().abort_transaction(tx)
            except Exception as exc:  # noqa: BLE001 - committed, expired or aborted already
                log.info(
                    "yt_dynamic.transaction_not_aborted", transaction=tx, error=type(exc).__name__
                )

    # -- executors ---------------------------------------------------------------------------
    def _tx_write(
        self,
        ctx: BatchContext,
        state: TransactionState,
        partition_id: int,
        batches: Iterator[pa.RecordBatch],
    ) -> TransactionMessage:
        """Insert the partition's rows into the batch's transaction (attached by id, on the
        proxy holding it); a retried task inserts the same rows over themselves."""
        o = self.options
        client = pinned(self.connection(), state.proxy).client()
        rows = chunks = 0
        hashes = []
        for chunk in chunks_of(batches, o.rows_per_transaction):
            check_keys_set(chunk, state.key, o.path)
            hashes.append(chunk_key_hashes(chunk, state.key, o.path))
            rows += chunk.num_rows
            if rows + 1 > o.max_batch_rows:  # refused before shipping the rest to the proxy
                raise too_many_rows(ctx, o.path, None, o.max_batch_rows)
            values = yt_rows(chunk)

            def insert(values: list[dict[str, Any]] = values) -> None:
                with client.Transaction(transaction_id=state.transaction_id, ping=False):
                    client.insert_rows(o.path, values, update=o.update or None)

            try:
                retry_unit(
                    insert,
                    what=f"{ctx.label} partition {partition_id} insert {chunks}",
                    retriable=_insert_retriable,
                )
            except Exception as exc:
                if _is(exc, "is_no_such_transaction"):
                    raise transaction_gone(ctx, state, o.transaction_timeout_s, exc) from exc
                raise
            chunks += 1
        return TransactionMessage(
            partition_id=partition_id,
            rows=rows,
            chunks=chunks,
            key_hashes=partition_key_hashes(hashes, state.key, o.path, partition_id),
        )
