"""The idempotent receiver: executors upsert rows keyed by their source row into a dynamic table.

Exactly-once here does not come from atomicity but from the key: every output row's key is the
position of its source row in the queue (``(tablet_index, row_index)``, with ``queue_id`` in
front for several queues), so a replayed batch overwrites its own rows with the same values and
the table ends up the same however often a batch runs. Hence:

* ``write`` (executors) upserts each partition in tablet transactions of at most
  ``rows_per_transaction`` rows, retried as a unit on conflicts and proxy faults; rows become
  visible as they are written (the idempotent receiver has no staging);
* ``commit`` (driver) only records the proof (writer id, batch id) in
  ``<output>_eosink_progress``, forward only, so that replays of long-committed batches are
  skipped without rewriting them; correctness never depends on that proof;
* ``init`` refuses every configuration under which a key would not name one source row (the
  seed's "Common configuration errors"), before anything is written; ``write`` refuses
  duplicate and null keys before writing the rows that carry them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa
import structlog

import eosink
from eosink import AlreadyCommitted, BatchContext, ConfigurationError, Proof, crash_point, hookimpl
from eosink_yt_dynamic.cli import YtDynamicCommands
from eosink_yt_common import YtConnection, client_config_option, retry_unit, yt_rows
from eosink_yt_dynamic.keys import (
    KeyPlan,
    check_no_null_keys,
    decode_runs,
    encode_runs,
    find_overlap,
    key_runs,
    overlap_error,
    plan_key,
    renamed,
)
from eosink_yt_dynamic.tables import (
    KEYS_SCHEMA,
    PROGRESS_SCHEMA,
    ensure_dynamic_table,
    inspect_output,
    mount_table,
    output_columns,
)

log = structlog.get_logger("eosink.yt_dynamic")

#: YT refuses tablet transactions that touch more rows than this (the documented default).
YT_MAX_ROWS_PER_TRANSACTION = 100_000


@attrs.frozen
class YtDynamicOptions:
    """Options of the ``yt-dynamic`` sink (Spark: ``.option("path", ...)``, case-insensitive)."""

    proxy: str
    path: str
    #: YT token; default: ``YT_TOKEN``, else ``~/.yt/token`` (read by the YT client). Never logged.
    token: str | None = attrs.field(default=None, repr=False)
    proxy_discovery: bool = True
    #: Output key column names of the source coordinates. SPYT's service columns
    #: ``__spyt_streaming_src_tablet_index``/``..._row_index`` are renamed to them on write.
    tablet_index_column: str = "tablet_index"
    row_index_column: str = "row_index"
    queue_id_column: str = "queue_id"
    #: ``insert_rows`` with ``update=%true``: columns missing from the rows keep their values
    #: (default: the row is overwritten whole, missing columns become null).
    update: bool = False
    rows_per_transaction: int = 50_000
    #: Refuse keys that repeat within a batch (across partitions too), before writing them.
    check_duplicates: bool = True
    #: Create the output table from the rows' schema if missing, and mount it if unmounted.
    create_table: bool = False
    #: Where proofs live; default ``<path>_eosink_progress``.
    progress_path: str | None = None
    #: Where tasks register their key runs; default ``<path>_eosink_keys``.
    keys_path: str | None = None
    #: Extra YT client configuration (YT's config keys), a dict or its JSON text.
    client_config: dict[str, Any] = attrs.field(factory=dict, converter=client_config_option)

    def __attrs_post_init__(self) -> None:
        if not self.path.startswith("//") and not self.path.startswith("<"):
            raise ConfigurationError(
                f"option path: {self.path!r} is not a YT path; use an absolute Cypress path such "
                "as //home/project/events"
            )
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


@attrs.frozen
class WriteMessage:
    """What one task upserted: counts only."""

    partition_id: int
    rows: int
    chunks: int

    @property
    def files(self) -> int:  # the core's logs count "files": here, tablet transactions
        return self.chunks


def _ql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class YtDynamicSink(YtDynamicCommands, eosink.Sink):
    """Exactly-once into a YT sorted dynamic table by upserts keyed by the source row."""

    name = "yt-dynamic"
    Options = YtDynamicOptions

    def connection(self) -> YtConnection:
        o = self.options
        return YtConnection(
            proxy=o.proxy, token=o.token, proxy_discovery=o.proxy_discovery, config=o.client_config
        )

    def client(self) -> Any:
        return self.connection().client()

    # -- driver ------------------------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        client = self.client()
        stored = self._stored_proof(client, ctx.writer_id)
        if stored is not None and stored.batch_id >= ctx.batch_id:
            return stored
        return None

    def _stored_proof(self, client: Any, writer_id: str) -> Proof | None:
        table = self.options.progress_table
        if not client.exists(table):
            return None
        try:
            rows = list(client.lookup_rows(table, [{"writer_id": writer_id}]))
        except Exception as exc:
            if getattr(exc, "is_tablet_not_mounted", lambda: False)():
                raise ConfigurationError(
                    f"progress table {table} is not mounted. Fix: `yt mount-table --sync {table}`"
                ) from exc
            raise
        return Proof.from_json(rows[0]["proof"]) if rows else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> WriteState:
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
        plan = plan_key(
            schema,
            table_schema,
            path=o.path,
            tablet_index_column=o.tablet_index_column,
            row_index_column=o.row_index_column,
            queue_id_column=o.queue_id_column,
        )
        ensure_dynamic_table(client, o.progress_table, PROGRESS_SCHEMA)
        if o.check_duplicates:
            ensure_dynamic_table(client, o.keys_table, KEYS_SCHEMA)
        state = WriteState(attempt=uuid.uuid4().hex, plan=plan)
        log.info(
            "yt_dynamic.init",
            path=o.path,
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            key=list(plan.key),
            renamed=dict(plan.rename),
            check_duplicates=o.check_duplicates,
        )
        return state

    @hookimpl
    def commit(
        self, ctx: BatchContext, state: WriteState, messages: list[WriteMessage], proof: Proof
    ):
        client = self.client()
        table = self.options.progress_table

        def record() -> None:
            # Forward only: a proof never replaces one of the same or a later batch.
            with client.Transaction(type="tablet", ping=False):
                stored = [r for r in client.lookup_rows(table, [{"writer_id": ctx.writer_id}])]
                if stored:
                    if stored[0]["proof"] == proof.to_json():
                        return  # our own write, whose commit reply was lost
                    if stored[0]["batch_id"] >= ctx.batch_id:
                        raise AlreadyCommitted(
                            f"{ctx.label}: the proof of batch {stored[0]['batch_id']} is already "
                            f"in {table}"
                        )
                client.insert_rows(
                    table,
                    [
                        {
                            "writer_id": ctx.writer_id,
                            "batch_id": ctx.batch_id,
                            "proof": proof.to_json(),
                        }
                    ],
                )

        retry_unit(record, what=f"{ctx.label} proof")
        crash_point("commit:proof-written")
        if self.options.check_duplicates:
            self._drop_key_runs(client, ctx, upto=True)

    @hookimpl
    def abort(self, ctx: BatchContext, state: WriteState | None):
        if state is None or not self.options.check_duplicates:
            return
        self._drop_key_runs(self.client(), ctx, attempt=state.attempt)

    def _drop_key_runs(
        self, client: Any, ctx: BatchContext, *, upto: bool = False, attempt: str | None = None
    ) -> None:
        """Delete registrations no check needs any more; best effort (they are not data)."""
        table = self.options.keys_table
        where = f"writer_id = {_ql_string(ctx.writer_id)} and batch_id "
        where += f"<= {ctx.batch_id}" if upto else f"= {ctx.batch_id}"
        if attempt is not None:
            where += f" and attempt = {_ql_string(attempt)}"
        try:
            keys = list(
                client.select_rows(
                    "writer_id, batch_id, attempt, partition_id, chunk "
                    f"from [{table}] where {where}"
                )
            )
            if keys:
                client.delete_rows(table, keys)
        except Exception as exc:  # noqa: BLE001 - leftovers are harmless and retried next commit
            log.warning("yt_dynamic.key_runs_cleanup_failed", table=table, error=type(exc).__name__)

    # -- executors ---------------------------------------------------------------------------
    @hookimpl
    def write(
        self,
        ctx: BatchContext,
        state: WriteState,
        partition_id: int,
        batches: Iterator[pa.RecordBatch],
    ) -> WriteMessage:
        client = self.client()
        rows = chunks = 0
        for chunk in self._chunks(batches, state.plan):
            self._write_chunk(client, ctx, state, partition_id, chunks, chunk)
            rows += chunk.num_rows
            chunks += 1
        return WriteMessage(partition_id=partition_id, rows=rows, chunks=chunks)

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
    ) -> None:
        o, plan = self.options, state.plan
        check_no_null_keys(chunk, plan, o.path)
        if o.check_duplicates:
            self._register_and_check(client, ctx, state, partition_id, n, chunk)
        rows = yt_rows(chunk)

        def upsert() -> None:
            with client.Transaction(type="tablet", ping=False):
                client.insert_rows(o.path, rows, update=o.update or None)

        retry_unit(upsert, what=f"{ctx.label} partition {partition_id} chunk {n}")

    def _register_and_check(
        self,
        client: Any,
        ctx: BatchContext,
        state: WriteState,
        partition_id: int,
        n: int,
        chunk: pa.Table,
    ) -> None:
        """Register this chunk's key runs, then compare with every run registered before.

        Registration commits before the read, so of any two chunks sharing a key the one that
        registered last sees the other (reads are at the latest timestamp): it fails before
        writing, and no row is overwritten by another of the same batch.
        """
        table, plan = self.options.keys_table, state.plan
        runs = key_runs(chunk, plan, self.options.path)  # raises on keys repeated in the chunk
        me = {
            "writer_id": ctx.writer_id,
            "batch_id": ctx.batch_id,
            "attempt": state.attempt,
            "partition_id": partition_id,
            "chunk": n,
        }
        client.insert_rows(table, [{**me, "runs": encode_runs(runs)}])
        query = (
            f"partition_id, chunk, runs from [{table}] "
            f"where writer_id = {_ql_string(ctx.writer_id)} "
            f"and batch_id = {ctx.batch_id} and attempt = {_ql_string(state.attempt)}"
        )
        others = [
            decode_runs(r["runs"])
            for r in client.select_rows(query)
            if (r["partition_id"], r["chunk"]) != (partition_id, n)
        ]
        hit = find_overlap(runs, others)
        if hit is not None:
            raise overlap_error(plan, self.options.path, *hit)


def read_table(client: Any, path: str) -> list[dict[str, Any]]:
    """Every row of a sorted dynamic table, in key order (``select_rows``)."""
    return list(client.select_rows(f"* from [{path}]"))


__all__ = ["YtDynamicOptions", "YtDynamicSink", "mount_table", "read_table"]
