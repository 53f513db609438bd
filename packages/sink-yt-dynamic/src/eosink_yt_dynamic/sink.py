"""The idempotent receiver: executors upsert rows keyed by their source row into a dynamic table.

Exactly-once here does not come from atomicity but from the key: every output row's key is the
position of its source row in the queue (``(tablet_index, row_index)``, with ``queue_id`` in
front for several queues), so a replayed batch overwrites its own rows with the same values and
the table ends up the same however often a batch runs. Hence:

* ``write`` (executors) upserts each partition in tablet transactions of at most
  ``rows_per_transaction`` rows, retried as a unit on conflicts and proxy faults; rows become
  visible as they are written (the idempotent receiver has no staging);
* ``commit`` (driver) only records the proof (writer id, batch id) of this output table in
  ``<output>_eosink_progress`` (:mod:`eosink_yt_dynamic.proof`), forward only, so that
  replays of long-committed batches are skipped without rewriting them; correctness never
  depends on that proof;
* ``init`` refuses every configuration under which a key would not name one source row (the
  "Common configuration errors" of SPYT's idempotent receiver documentation), before anything
  is written; ``write`` refuses duplicate and null keys (:mod:`eosink_yt_dynamic.registrations`)
  and rows another writer wrote (:mod:`eosink_yt_dynamic.sources`) before writing the rows
  that carry them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.logs import get_logger
from eosink.options import names
from eosink.plugin import (
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    crash_point,
    hookimpl,
)
from eosink_yt_common import YtClientOptions, YtConnection, retry_unit, yt_rows
from eosink_yt_dynamic.operator_hooks import YtDynamicOperatorHooks
from eosink_yt_dynamic.keys import (
    KeyPlan,
    check_no_null_keys,
    key_runs,
    overlap_error,
    plan_key,
    renamed,
)
from eosink_yt_dynamic.proof import ProgressTable
from eosink_yt_dynamic.registrations import Registrations, drop_registrations, ensure_keys_table
from eosink_yt_dynamic.sources import (
    Foreign,
    Spans,
    chunk_spans,
    concurrent_error,
    first_difference,
    foreign_spans,
    meeting,
    merge_spans,
    new_overlaps,
    overwrite_error,
    rewrite_error,
    rows_within,
)
from eosink_yt_dynamic.transactional import (
    TransactionMessage,
    TransactionState,
    pin_proxy,
    pinned,
)
from eosink_yt_dynamic.transactional_hooks import TransactionalHooks
from eosink_yt_dynamic.tables import (
    ensure_dynamic_table,
    inspect_output,
    mount_table,
    output_columns,
)

log = get_logger("eosink.yt_dynamic")

#: YT refuses tablet transactions that touch more rows than this (the documented default).
YT_MAX_ROWS_PER_TRANSACTION = 100_000

#: The sink's two modes (option ``mode``).
IDEMPOTENT = "idempotent"
TRANSACTIONAL = "transactional"


@attrs.frozen(kw_only=True)
class YtDynamicOptions(YtClientOptions):
    """Options of the ``yt-dynamic`` sink (Spark: ``.option("path", ...)``, case-insensitive);
    ``proxy``, ``token``, ``proxy_discovery`` and ``client_config`` come from
    :class:`eosink_yt_common.YtClientOptions`."""

    path: str
    #: Output key column names of the source coordinates. SPYT's service columns
    #: ``__spyt_streaming_src_tablet_index``/``..._row_index`` are renamed to them on write.
    tablet_index_column: str = "tablet_index"
    row_index_column: str = "row_index"
    queue_id_column: str = "queue_id"
    #: ``insert_rows`` with ``update=%true``: columns missing from the rows keep their values
    #: (default: the row is overwritten whole, missing columns become null).
    update: bool = False
    rows_per_transaction: int = 50_000
    #: Refuse keys that repeat within a batch (across partitions too), and keys another writer
    #: wrote when the key has no queue id, before writing them.
    check_duplicates: bool = True
    #: Create the output table from the rows' schema if missing, and mount it if unmounted.
    create_table: bool = False
    #: Where proofs live; default ``<path>_eosink_progress``. May be shared by several outputs.
    progress_path: str | None = None
    #: Where tasks register their key runs; default ``<path>_eosink_keys``.
    keys_path: str | None = None
    #: ``idempotent`` (the default: rows keyed by their source row, one-to-one queries) or
    #: ``transactional`` (SPYT's transactional mode: one tablet transaction per batch, any
    #: query, rows replaced by the table's key: Spark's update output mode may write here).
    mode: str = IDEMPOTENT
    #: Transactional mode: the table's key columns, checked against the table (and used by
    #: ``create_table``); by default the table's own key.
    key: tuple[str, ...] = attrs.field(default=(), converter=names)
    #: Transactional mode: seconds the batch's transaction lives without a ping (the driver
    #: pings it every third of that for the batch's whole life).
    transaction_timeout_s: float = 120.0
    #: Transactional mode: rows one transaction may write, the cluster's
    #: ``max_rows_per_transaction`` (YT's default); a larger batch is refused early.
    max_batch_rows: int = YT_MAX_ROWS_PER_TRANSACTION

    def __attrs_post_init__(self) -> None:
        if not self.path.startswith("//") and not self.path.startswith("<"):
            raise ConfigurationError(
                f"option path: {self.path!r} is not a YT path; use an absolute Cypress path such "
                "as //home/project/events"
            )
        if self.mode not in (IDEMPOTENT, TRANSACTIONAL):
            raise ConfigurationError(
                f"option mode: {self.mode!r}; use 'idempotent' (the default: one-to-one "
                "queries, rows keyed by their source row) or 'transactional' (any query, one "
                "tablet transaction per batch, rows replaced by the table's key)"
            )
        if self.key and self.mode != TRANSACTIONAL:
            raise ConfigurationError(
                "option key is for mode 'transactional' (the idempotent receiver is keyed by "
                "the source row); set mode='transactional' or drop key"
            )
        if self.mode == TRANSACTIONAL and self.create_table and not self.key:
            raise ConfigurationError(
                "option create_table in mode 'transactional' needs option key, the columns "
                "the table is keyed by (e.g. the groupBy columns), e.g. key='user_id'"
            )
        if not self.transaction_timeout_s > 0:
            raise ConfigurationError(
                f"option transaction_timeout_s: {self.transaction_timeout_s} must be positive"
            )
        if self.max_batch_rows < 1:
            raise ConfigurationError(f"option max_batch_rows: {self.max_batch_rows} must be >= 1")
        if not 0 < self.rows_per_transaction <= YT_MAX_ROWS_PER_TRANSACTION:
            raise ConfigurationError(
                f"option rows_per_transaction: {self.rows_per_transaction} is outside 1.."
                f"{YT_MAX_ROWS_PER_TRANSACTION} (YT's limit of rows per tablet transaction); "
                "use e.g. 50000"
            )

    @property
    def progress_table(self) -> str:
        return self.progress_path or f"{self.path}_eosink_progress"

    @property
    def keys_table(self) -> str:
        return self.keys_path or f"{self.path}_eosink_keys"


@attrs.frozen
class WriteState:
    """What ``init`` decided, shipped to every task."""

    attempt: str
    plan: KeyPlan
    #: The node id of the output table the batch writes into.
    output_id: str
    #: Other writers' source spans a chunk must not meet (empty when the check is off).
    foreign: Foreign = ()
    #: The source spans this writer's committed batches covered (empty when the check is
    #: off): a chunk reaching into them may rewrite a row of an earlier batch.
    earlier: Foreign = ()


@attrs.frozen
class WriteMessage:
    """What one task upserted: counts, and the source rows it covered."""

    partition_id: int
    rows: int
    chunks: int
    sources: Spans = attrs.field(factory=dict)

    @property
    def files(self) -> int:  # the core's logs count "files": here, tablet transactions
        return self.chunks


class YtDynamicSink(TransactionalHooks, YtDynamicOperatorHooks, Sink):
    """Exactly-once into a YT sorted dynamic table: by upserts keyed by the source row (the
    idempotent receiver), or in one tablet transaction per batch (``mode="transactional"``)."""

    name = "yt-dynamic"
    Options = YtDynamicOptions

    def connection(self) -> YtConnection:
        o = self.options
        return YtConnection(
            proxy=o.proxy, token=o.token, proxy_discovery=o.proxy_discovery, config=o.client_config
        )

    def client(self) -> Any:
        """A client that sends every request to one proxy: a tablet transaction over HTTP is
        known only to the proxy that started it, and with proxy discovery the client would
        send its ``insert_rows`` to any proxy (one is chosen as the client chooses them)."""
        connection = self.connection()
        return pinned(connection, pin_proxy(connection)).client()

    @property
    def progress(self) -> ProgressTable:
        return ProgressTable(self.options.progress_table, self.options.path)

    def _output_id(self, client: Any) -> str | None:
        """The node id of the output table (None if there is none): proofs are about it."""
        from yt.wrapper.errors import YtResponseError

        try:
            return str(client.get(f"{self.options.path}/@id"))
        except YtResponseError as exc:
            if exc.is_resolve_error():
                return None
            raise

    def _checks_sources(self, plan: KeyPlan) -> bool:
        """Other writers' rows are checked when duplicates are and the key has no queue id
        (with one, rows of different queues never share a key)."""
        return self.options.check_duplicates and self.options.queue_id_column not in plan.key

    @property
    def transactional(self) -> bool:
        return self.options.mode == TRANSACTIONAL

    # -- driver ------------------------------------------------------------------------------
    @hookimpl
    def upsert_key(self) -> tuple[str, ...] | None:
        """The transactional mode replaces rows by the table's key, so Spark's update output
        mode may write there; the idempotent receiver keys rows by their source row."""
        return self._table_key() if self.transactional else None

    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        client = self.client()
        output_id = self._output_id(client)
        if output_id is None or not self.progress.exists(client):
            return None
        try:
            stored = self.progress.proof(client, output_id, ctx.writer_id)
        except Exception as exc:
            if getattr(exc, "is_tablet_not_mounted", lambda: False)():
                table = self.options.progress_table
                raise ConfigurationError(
                    f"progress table {table} is not mounted. Fix: `yt mount-table --sync {table}`"
                ) from exc
            raise
        if stored is not None and stored.batch_id >= ctx.batch_id:
            return stored
        return None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> WriteState | TransactionState:
        if self.transactional:
            return self._tx_init(ctx, schema)
        o = self.options
        if ctx.mode == "complete":
            raise ConfigurationError(
                f"{ctx.label}: output mode 'complete' rewrites the whole result every batch, "
                "which an idempotent receiver (rows keyed by their source row) cannot do. Fix: "
                "use outputMode('append') with a one-to-one query"
            )
        client = self.client()
        if o.create_table:
            columns = output_columns(
                schema,
                queue_id=o.queue_id_column in schema.names,
                tablet_index_column=o.tablet_index_column,
                row_index_column=o.row_index_column,
                queue_id_column=o.queue_id_column,
            )
            ensure_dynamic_table(client, o.path, columns)
        table_schema = inspect_output(client, o.path)
        output_id = self._output_id(client)
        plan = plan_key(
            schema,
            table_schema,
            path=o.path,
            tablet_index_column=o.tablet_index_column,
            row_index_column=o.row_index_column,
            queue_id_column=o.queue_id_column,
        )
        self.progress.ensure(client)
        others = self.progress.writers(client, output_id)
        mine = others.pop(ctx.writer_id, {})
        if o.check_duplicates:
            ensure_keys_table(client, o.keys_table)
        state = WriteState(
            attempt=uuid.uuid4().hex,
            plan=plan,
            output_id=output_id,
            foreign=foreign_spans(others) if self._checks_sources(plan) else (),
            earlier=foreign_spans({ctx.writer_id: mine}) if o.check_duplicates else (),
        )
        log.info(
            "yt_dynamic.init",
            path=o.path,
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            key=list(plan.key),
            renamed=dict(plan.rename),
            check_duplicates=o.check_duplicates,
            other_writers=sorted(others),
        )
        return state

    @hookimpl
    def commit(
        self, ctx: BatchContext, state: WriteState, messages: list[WriteMessage], proof: Proof
    ):
        if isinstance(state, TransactionState):
            return self._tx_commit(ctx, state, messages, proof)
        client = self.client()
        check = None
        if self._checks_sources(state.plan):

            def check(mine: Spans, others: dict[str, Spans]) -> None:
                overlaps = new_overlaps(mine, others, state.foreign)
                if overlaps:
                    raise concurrent_error(
                        state.plan, self.options.path, ctx.writer_id, overlaps[0]
                    )

        spans = merge_spans(*(m.sources for m in messages))
        self.progress.record(client, ctx, proof, state.output_id, spans, check)
        crash_point("commit:proof-written")
        if self.options.check_duplicates:
            drop_registrations(client, self.options.keys_table, state.output_id, ctx, upto=True)

    @hookimpl
    def abort(self, ctx: BatchContext, state: WriteState | None):
        if isinstance(state, TransactionState) or (state is None and self.transactional):
            return self._tx_abort(ctx, state)
        if state is None or not self.options.check_duplicates:
            return
        drop_registrations(
            self.client(), self.options.keys_table, state.output_id, ctx, attempt=state.attempt
        )

    # -- executors ---------------------------------------------------------------------------
    @hookimpl
    def write(
        self,
        ctx: BatchContext,
        state: WriteState,
        partition_id: int,
        batches: Iterator[pa.RecordBatch],
    ) -> WriteMessage | TransactionMessage:
        if isinstance(state, TransactionState):
            return self._tx_write(ctx, state, partition_id, batches)
        client = self.client()
        rows = chunks = 0
        sources: Spans = {}
        for chunk in self._chunks(batches, state.plan):
            spans = self._write_chunk(client, ctx, state, partition_id, chunks, chunk)
            sources = merge_spans(sources, spans)
            rows += chunk.num_rows
            chunks += 1
        return WriteMessage(partition_id=partition_id, rows=rows, chunks=chunks, sources=sources)

    def _chunks(self, batches: Iterator[pa.RecordBatch], plan: KeyPlan) -> Iterator[pa.Table]:
        """Tables of exactly ``rows_per_transaction`` rows (the last one shorter)."""
        size = self.options.rows_per_transaction
        pending: list[pa.Table] = []
        count = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = renamed(batch, plan)
            pending.append(table)
            count += table.num_rows
            while count >= size:
                merged = pa.concat_tables(pending)
                yield merged.slice(0, size)
                rest = merged.slice(size)
                pending, count = ([rest] if rest.num_rows else []), rest.num_rows
        if count:
            yield pa.concat_tables(pending)

    def _write_chunk(
        self,
        client: Any,
        ctx: BatchContext,
        state: WriteState,
        partition_id: int,
        n: int,
        chunk: pa.Table,
    ) -> Spans:
        """Check, then upsert one chunk in a tablet transaction; returns its source spans."""
        o, plan = self.options, state.plan
        check_no_null_keys(chunk, plan, o.path)
        rows = yt_rows(chunk)  # refuses values YT cannot hold, before the chunk is registered
        spans = chunk_spans(chunk, plan)
        self._check_written_rows(client, ctx, state, chunk, spans)
        if o.check_duplicates:
            runs = key_runs(chunk, plan, o.path)  # raises on keys repeated in the chunk
            registrations = Registrations(
                o.keys_table, state.output_id, ctx.writer_id, ctx.batch_id, state.attempt
            )
            hit = registrations.register(client, partition_id, n, runs)
            if hit is not None:
                raise overlap_error(plan, o.path, *hit)

        def upsert() -> None:
            with client.Transaction(type="tablet", ping=False):
                client.insert_rows(o.path, rows, update=o.update or None)

        retry_unit(upsert, what=f"{ctx.label} partition {partition_id} chunk {n}")
        return spans

    def _check_written_rows(
        self, client: Any, ctx: BatchContext, state: WriteState, chunk: pa.Table, spans: Spans
    ) -> None:
        """Refuse a chunk that would overwrite, with other values, rows that another writer or
        an earlier batch of this writer wrote.

        Costs nothing unless the chunk's spans meet those rows' spans: a writer reading a queue
        in order writes each batch after its last one, and other writers' rows lie elsewhere.
        Where they meet, the rows inside are looked up in the table and compared (equal rows:
        the same source row read again, harmless); other writers' spans first, so that a row
        both wrote (``update=true``: each its columns) is blamed on the other writer.
        """
        plan = state.plan
        for overlap in meeting(spans, state.foreign + state.earlier):
            ours = yt_rows(rows_within(chunk, plan, overlap))
            keys = [{k: row[k] for k in plan.key} for row in ours]
            stored = list(client.lookup_rows(self.options.path, keys))
            row = first_difference(ours, stored, plan, update=self.options.update)
            if row is None:
                continue
            if overlap[0] == ctx.writer_id:
                raise rewrite_error(plan, self.options.path, ctx.writer_id, ctx.batch_id, row)
            raise overwrite_error(plan, self.options.path, ctx.writer_id, overlap[0], row)


def read_table(client: Any, path: str) -> list[dict[str, Any]]:
    """Every row of a sorted dynamic table, in key order (``select_rows``)."""
    return list(client.select_rows(f"* from [{path}]"))


__all__ = ["YtDynamicOptions", "YtDynamicSink", "mount_table", "read_table"]
