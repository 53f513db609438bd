"""Exactly-once into a PostgreSQL table: staged binary COPY, then one transaction.

* ``write`` (executors): each task attempt COPYs its rows (binary COPY from Arrow), tagged
  with itself (Spark's partition and ``taskAttemptId``), into the batch attempt's staging
  table in one transaction (a failed COPY leaves no row). The first task attempt with rows
  creates that table, UNLOGGED (a crash loses only staging), named after writer, batch and the
  attempt's tag. One table per batch attempt, not per task: an aggregation's 200 shuffle
  partitions would otherwise create and drop 200 tables a batch in the catalog. A task
  attempt that starts after its batch was committed stages nothing. No task touches the
  target.
* ``commit`` (driver), one transaction: lock the target (ROW EXCLUSIVE) and check it is the
  table ``init`` saw (its identity, :mod:`eosink_postgres.identity`), lock this writer's
  progress row (``FOR UPDATE``), skip if the batch is recorded, move the rows of exactly the
  task attempts the messages name into the target (``append``; ``complete`` deletes the
  target's rows first; ``upsert``: ``INSERT ... ON CONFLICT (key) DO UPDATE``), record the
  proof keyed by the target's identity, drop the staging table, commit. Readers see the
  rows and the proof together or neither.
* Every connection speaks UTF8 in UTC (``options.SESSION``), whatever the server, database,
  role or environment default: the binary COPY sends UTF-8 text as it is.
* A commit whose reply is lost (the connection dropped after COMMIT was sent) is settled by
  ending the old session and reading the proof: this attempt's proof there means it landed.
* ``abort`` drops only this attempt's staging table: a landed commit dropped it already, so
  nothing it finds was ever published.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import psycopg
import pyarrow as pa
from psycopg import errors as pg_errors
from psycopg import sql

from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    SinkError,
    clock,
    crash_point,
    hookimpl,
)
from eosink.logs import get_logger
from eosink_postgres import copy_binary, identity, idle, store
from eosink_postgres import proof as proof_rows
from eosink_postgres.move import move_rows
from eosink_postgres.operator_hooks import PostgresOperatorHooks
from eosink_postgres.options import SINK, PostgresOptions, scrub
from eosink_postgres.schema import check_target, create_target
from eosink_postgres.types import check_values, columns_sql, copy_rows, copy_type, pg_type, quote

log = get_logger("eosink.postgres")

#: How long a commit whose reply was lost waits for its old session to end before reading the
#: proof (the old session may still be finishing the COMMIT).
SETTLE_TIMEOUT_S = 30.0
#: The PostgreSQL types of the staging table's task columns.
TASK_TYPES = [kind for _, kind in store.TASK_COLUMNS]


@attrs.frozen
class PostgresState:
    """What ``init`` hands every ``write``: where to stage, and the target as ``init`` saw it."""

    tag: str  # this attempt of the batch (random): the staging name and the proof carry it
    prefix: str  # the start of the name of this attempt's staging table
    target_id: str  # the target's identity (``eosink_postgres.identity``): the proofs' key
    columns: tuple[str, ...]

    @property
    def staging(self) -> str:
        """The name of this attempt's staging table (in the meta schema)."""
        return store.staging_name(self.prefix)


@attrs.frozen
class PostgresMessage:
    """One task attempt: Spark's partition and ``taskAttemptId``, and the rows it staged."""

    partition: int
    attempt: int
    rows: int


class PostgresSink(PostgresOperatorHooks, Sink):
    """Exactly-once into a PostgreSQL table; the batch's rows and proof in one transaction."""

    name = "postgres"
    Options = PostgresOptions
    options: PostgresOptions

    def __init__(self, options: Any = None, /, **kwargs: Any) -> None:
        if isinstance(options, Mapping) or options is None:
            merged = {**(options or {}), **kwargs}
            path = next((k for k in merged if k.lower() == "path"), None)
            if path is not None:  # Spark's .start(path) and the eosink command's TARGET
                value = merged.pop(path)
                if not any(k.lower() == "table" for k in merged):
                    merged["table"] = value
            super().__init__(merged)
        else:
            super().__init__(options, **kwargs)

    @contextlib.contextmanager
    def connect(self, *, autocommit: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """A connection to the target's database; server errors that escape become eosink
        errors without secrets. A healthy connection goes back to the process's idle one
        (:mod:`eosink_postgres.idle`) for the next hook or task."""
        conn = self._take(autocommit)
        try:
            yield conn
        except psycopg.Error as exc:
            conn.close()
            raise store.sql_error(exc, self.options, "PostgreSQL error") from None
        except BaseException:
            conn.close()
            raise
        self._give(conn)

    def _take(self, autocommit: bool) -> psycopg.Connection[Any]:
        conn = idle.take(self.options.conninfo())
        if conn is None:
            conn = store.connect(self.options)
        conn.autocommit = autocommit
        return conn

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        idle.give(self.options.conninfo(), conn)

    # -- driver ----------------------------------------------------------------------------
    @hookimpl
    def upsert_key(self) -> tuple[str, ...] | None:
        """``mode=upsert`` replaces rows by ``key``: Spark's update output mode may write here."""
        return self.options.key if self.options.mode == "upsert" else None

    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        with self.connect(autocommit=True) as conn:
            oid = store.target_oid(conn, self.options)
            layout = proof_rows.layout(conn, self.options)
            if oid is None or layout == "none":
                return None
            if layout == "oid":  # an earlier version's proofs, until init migrates them
                key: str | int = oid
            else:
                target = identity.find(conn, self.options, oid)
                if target is None:
                    return None
                key = target.target_id
            found = proof_rows.read_proof(conn, self.options, key, ctx.writer_id, ctx.batch_id)
        return found[0] if found else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> PostgresState:
        options = self.options
        if ctx.mode == "complete" and options.mode == "upsert":
            raise ConfigurationError(
                f"{SINK}: mode 'upsert' and Spark's complete output mode exclude each other: "
                "complete replaces the table; use outputMode('update'/'append') for upserts"
            )
        for field in schema:
            pg_type(field)  # every column has a type here, or a clear error now
        clash = sorted({name for name, _ in store.TASK_COLUMNS} & set(schema.names))
        if clash:
            raise ConfigurationError(
                f"{SINK}: the stream has column(s) {clash}, which the sink's staging table uses "
                "for itself; rename them in the query"
            )
        tag = uuid.uuid4().hex
        prefix = store.staging_prefix(ctx.writer_id, ctx.batch_id, tag)
        with self.connect() as conn:
            try:
                with conn.transaction():
                    (read_only,) = conn.execute("SHOW transaction_read_only").fetchone()
                    if read_only == "on":
                        raise store.sql_error(
                            pg_errors.ReadOnlySqlTransaction("the session is read-only"),
                            options,
                            "init",
                        )
                    proof_rows.ensure_meta(conn, options)
                    oid = store.target_oid(conn, options)
                    created = oid is None
                    if oid is None:
                        if not options.create_table:
                            raise ConfigurationError(
                                f"{SINK}: table {options.qualified} does not exist; create it, "
                                "or set option create_table=true to create it from the "
                                "stream's schema"
                            )
                        oid = create_target(conn, options, schema)
                    check_target(conn, options, oid, schema, ctx.mode)
                    target_id = identity.bind(
                        conn, options, oid, created=created, setup_lock=proof_rows.SETUP_LOCK
                    )
            except psycopg.Error as exc:
                raise store.sql_error(exc, options, f"preparing {options.qualified}") from None
        return PostgresState(
            tag=tag, prefix=prefix, target_id=target_id, columns=tuple(schema.names)
        )

    @hookimpl
    def commit(
        self,
        ctx: BatchContext,
        state: PostgresState,
        messages: list[PostgresMessage],
        proof: Proof,
    ) -> None:
        staged = [m for m in messages if m is not None and m.rows]
        conn = self._take(autocommit=False)
        pid = conn.info.backend_pid  # the session a lost COMMIT reply leaves behind
        try:
            try:
                self._commit(conn, ctx, state, staged, proof)
            except BaseException:
                conn.close()  # a failed commit's session is never kept
                raise
        except psycopg.OperationalError as exc:
            # The connection broke: before COMMIT (nothing landed) or after it was sent (it
            # may have landed). The proof, read once the old session is gone, tells which.
            if self._landed(ctx, state, pid):
                log.warning(
                    "commit reply lost, proof found",
                    batch=ctx.label,
                    error=scrub(str(exc), self.options),
                )
                return
            raise SinkError(
                f"{SINK}: commit of {ctx.label} failed, the connection broke and no proof of "
                f"this attempt is in the target: {scrub(str(exc), self.options)}"
            ) from None
        except pg_errors.CardinalityViolation as exc:
            raise self._duplicate_keys_error(ctx, exc) from None
        except psycopg.Error as exc:
            raise store.sql_error(exc, self.options, f"commit of {ctx.label}") from None
        self._give(conn)

    def _commit(
        self,
        conn: psycopg.Connection[Any],
        ctx: BatchContext,
        state: PostgresState,
        staged: list[PostgresMessage],
        proof: Proof,
    ) -> None:
        options = self.options
        meta = options.meta_schema
        target = store.target_ident(options)
        with conn.transaction():
            conn.execute(
                sql.SQL("SET LOCAL lock_timeout = {}").format(
                    sql.Literal(f"{int(options.lock_timeout_s * 1000)}ms")
                )
            )
            self._lock_target(conn, ctx, state)
            last = proof_rows.lock_last_batch(conn, options, state.target_id, ctx.writer_id)
            if last >= ctx.batch_id:
                raise AlreadyCommitted(f"{ctx.label}: batch {last} is already committed")
            if ctx.mode == "complete":
                conn.execute(sql.SQL("DELETE FROM {}").format(target))
            expected = sum(m.rows for m in staged)
            tasks = [(m.partition, m.attempt) for m in staged]
            moved = move_rows(conn, options, state.columns, state.staging, tasks) if staged else 0
            if moved != expected:
                raise SinkError(
                    f"{SINK}: the staging table of {ctx.label} holds {moved} rows of its tasks, "
                    f"they reported {expected}; nothing was written, the batch runs again on "
                    "restart"
                )
            crash_point("commit:rows-moved")
            proof_rows.record(
                conn,
                options,
                state.target_id,
                ctx,
                attempt=state.tag,
                mode="complete" if ctx.mode == "complete" else options.mode,
                proof=proof,
            )
            crash_point("commit:proof-written")
            # With the rows of failed or speculative task attempts, never published. (A task
            # attempt still COPYing holds the table: the DROP waits for it, lock_timeout_s.)
            conn.execute(
                sql.SQL("DROP TABLE IF EXISTS {}").format(store.ident(meta, state.staging))
            )
            crash_point("commit:before-commit")
        # leaving the block sent COMMIT and read its reply

    def _lock_target(
        self, conn: psycopg.Connection[Any], ctx: BatchContext, state: PostgresState
    ) -> None:
        """Lock the target (ROW EXCLUSIVE, the lock its INSERT takes anyway: other writers'
        commits go on beside this one, a rename or drop waits for it), then check that the
        table the name now means is the one ``init`` saw: the rows and the proof go to the
        same table, whatever another application renames or recreates meanwhile."""
        options = self.options
        replaced = SinkError(
            f"{SINK}: table {options.qualified} was dropped or replaced while batch "
            f"{ctx.label} ran; nothing was written, the batch runs again on restart"
        )
        try:
            with conn.transaction():  # a savepoint: a missing table is an answer, not an error
                conn.execute(
                    sql.SQL("LOCK TABLE {} IN ROW EXCLUSIVE MODE").format(
                        store.target_ident(options)
                    )
                )
        except pg_errors.UndefinedTable:
            raise replaced from None
        oid = store.target_oid(conn, options)
        found = identity.find(conn, options, oid) if oid is not None else None
        if found is None or found.target_id != state.target_id:
            raise replaced

    def _duplicate_keys_error(self, ctx: BatchContext, exc: Exception) -> ConfigurationError:
        return ConfigurationError(
            f"{SINK}: two rows of {ctx.label} have the same key ({', '.join(self.options.key)}):"
            f" {scrub(str(exc), self.options)}; deduplicate the batch in the query"
        )

    def _landed(self, ctx: BatchContext, state: PostgresState, old_pid: int | None) -> bool:
        """Whether this attempt's proof is in the target, once the old session has ended."""
        with self.connect(autocommit=True) as conn:
            if old_pid:
                conn.execute("SELECT pg_terminate_backend(%s)", (old_pid,))
                deadline = time.monotonic() + SETTLE_TIMEOUT_S
                while conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (old_pid,)
                ).fetchone():
                    if time.monotonic() > deadline:
                        raise SinkError(
                            f"{SINK}: commit of {ctx.label}: the reply was lost and the old "
                            f"session {old_pid} did not end in {SETTLE_TIMEOUT_S:.0f} s; the "
                            "batch is in doubt until it does (the next run settles it)"
                        )
                    time.sleep(0.05)
            found = proof_rows.read_proof(
                conn, self.options, state.target_id, ctx.writer_id, ctx.batch_id
            )
        return found is not None and found[0].batch_id == ctx.batch_id and found[1] == state.tag

    @hookimpl
    def abort(
        self, ctx: BatchContext, state: PostgresState | None, messages: list[PostgresMessage | None]
    ) -> None:
        """Drop this attempt's staging table. A landed commit dropped it in its transaction, so
        whatever is left was never published."""
        if state is None:
            return
        with self.connect(autocommit=True) as conn:
            names = {state.staging}
            names |= {name for name, _ in store.staging_tables(conn, self.options, state.prefix)}
            for name in sorted(names):
                conn.execute(
                    sql.SQL("DROP TABLE IF EXISTS {}").format(
                        store.ident(self.options.meta_schema, name)
                    )
                )

    # -- executors -------------------------------------------------------------------------
    @hookimpl
    def write(
        self,
        ctx: BatchContext,
        state: PostgresState,
        partition_id: int,
        attempt: int,
        batches: Iterator[pa.RecordBatch],
    ) -> PostgresMessage:
        table = store.ident(self.options.meta_schema, state.staging)
        rows = 0
        tag = (partition_id, attempt)
        with self.connect() as conn, contextlib.ExitStack() as stack:
            copy, encoded = None, False
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                if copy is None:
                    self._staging_table(conn, ctx, state, batch.schema)
                    copy = self._start_copy(conn, stack, ctx, table, batch.schema)
                    pg_types = [pg_type(f) for f in batch.schema]
                    encoded = copy_binary.encodable(batch.schema, pg_types)
                    if encoded:  # whole buffers: the signature here, the trailer at the end
                        copy.write(copy_binary.SIGNATURE)
                if encoded:
                    check_values(batch, row_by_row=False)
                    copy.write(copy_binary.encode_rows(tagged(batch, tag), pg_types + TASK_TYPES))
                else:
                    for row in copy_rows(batch):
                        copy.write_row(row + tag)
                rows += batch.num_rows
            if encoded:
                copy.write(copy_binary.TRAILER)
            stack.close()  # ends the COPY
            conn.commit()  # the rows appear together, tagged with this task attempt
        return PostgresMessage(partition=partition_id, attempt=attempt, rows=rows)

    def _staging_table(
        self, conn: psycopg.Connection[Any], ctx: BatchContext, state: PostgresState, schema: Any
    ) -> None:
        """Make sure the batch attempt's staging table exists, unless the batch is committed
        already (an old stage attempt Spark no longer waits for: its rows would only be an
        orphan). The first task attempt creates it, commented with who made it and when
        (``eosink cleanup`` reads that); one that loses the race finds it made."""
        options = self.options
        table = store.ident(options.meta_schema, state.staging)
        exists, done = conn.execute(
            sql.SQL(
                "SELECT to_regclass(%s) IS NOT NULL, EXISTS (SELECT 1 FROM {} WHERE target_id = "
                "%s AND writer_id = %s AND batch_id >= %s)"
            ).format(store.ident(options.meta_schema, proof_rows.PROOFS)),
            (table.as_string(conn), uuid.UUID(state.target_id), ctx.writer_id, ctx.batch_id),
        ).fetchone()
        if done:
            raise SinkError(
                f"{SINK}: {ctx.label} is already committed; this late task attempt stages nothing"
            )
        if not exists:
            tags = ", ".join(f"{quote(n)} {kind} NOT NULL" for n, kind in store.TASK_COLUMNS)
            about = {
                "target": options.qualified,
                "target_id": state.target_id,
                "writer": ctx.writer_id,
                "batch": ctx.batch_id,
                "attempt": state.tag,
                "created": clock.now(),
            }
            try:
                with conn.transaction():  # a savepoint: another task may create it first
                    conn.execute(
                        sql.SQL("CREATE UNLOGGED TABLE {} ({}, {})").format(
                            table, sql.SQL(columns_sql(schema)), sql.SQL(tags)
                        )
                    )
                    conn.execute(
                        sql.SQL("COMMENT ON TABLE {} IS {}").format(
                            table, sql.Literal(json.dumps(about))
                        )
                    )
            except (pg_errors.DuplicateTable, pg_errors.DuplicateObject, pg_errors.UniqueViolation):
                pass  # made by another task attempt meanwhile
            conn.commit()  # the table, for every task attempt (the COPY is not theirs to wait)

    def _start_copy(
        self,
        conn: psycopg.Connection[Any],
        stack: contextlib.ExitStack,
        ctx: BatchContext,
        table: sql.Identifier,
        schema: pa.Schema,
    ) -> Any:
        names = [*schema.names, *(name for name, _ in store.TASK_COLUMNS)]
        cols = sql.SQL(", ").join(sql.SQL(quote(n)) for n in names)
        statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(table, cols)
        try:  # the transaction has written nothing yet: failing it loses nothing
            copy = stack.enter_context(conn.cursor().copy(statement))
        except pg_errors.UndefinedTable:
            raise SinkError(
                f"{SINK}: the staging table of {ctx.label} is gone: the batch was committed or "
                "aborted (or its table cleaned up) while this task attempt ran; it stages "
                "nothing"
            ) from None
        copy.set_types([copy_type(pg_type(f)) for f in schema] + TASK_TYPES)
        return copy


def tagged(batch: pa.RecordBatch, task: tuple[int, int]) -> pa.RecordBatch:
    """``batch`` with the task attempt's columns (:data:`store.TASK_COLUMNS`) after its own."""
    partition, attempt = task
    arrays = [
        *batch.columns,
        pa.repeat(pa.scalar(partition, pa.int32()), batch.num_rows),
        pa.repeat(pa.scalar(attempt, pa.int64()), batch.num_rows),
    ]
    names = [*batch.schema.names, *(name for name, _ in store.TASK_COLUMNS)]
    return pa.RecordBatch.from_arrays(arrays, names=names)
